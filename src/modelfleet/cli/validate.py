"""``modelfleet validate -f PATH...``: check manifests without touching anything."""

from __future__ import annotations

from typing import Annotated

import typer

from modelfleet.api.classes import InferenceClass
from modelfleet.api.deployments import ModelDeployment
from modelfleet.api.loading import LoadedDocument, LoadResult, load_paths
from modelfleet.api.manifest_errors import ManifestError
from modelfleet.api.support import not_acted_upon
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.cli.output import (
    EXIT_INVALID,
    EXIT_OK,
    console,
    err_console,
    print_manifest_errors,
)
from modelfleet.scheduling.selector_errors import unevaluable_selectors

FilesOption = Annotated[
    list[str],
    typer.Option(
        "--filename",
        "-f",
        help="Manifest file or directory (recursive, *.yaml/*.yml); '-' reads standard input. "
        "Repeatable.",
    ),
]


def load_or_exit(files: list[str], *, check_selectors: bool = False) -> LoadResult:
    """The manifests under ``files``, saying on stderr what each directory gave (``read 3 files
    from DIR``); every error printed and exit 2 if any (empty input is one). With
    ``check_selectors``, a CEL device selector that cannot evaluate on any class the manifests
    declare is one (``validate``, ``apply``)."""
    result = load_paths(files)
    for folder, count in result.directories.items():
        err_console.print(
            f"read {count} file{'s' if count != 1 else ''} from {folder}",
            markup=False,
            soft_wrap=True,
        )
    errors = list(result.errors)
    if check_selectors and not errors:
        errors = selector_problems(result.documents)
    if errors:
        print_manifest_errors(errors)
        raise typer.Exit(EXIT_INVALID)
    return result


def selector_problems(documents: list[LoadedDocument]) -> list[ManifestError]:
    """A located error per device selector of a ModelDeployment that cannot evaluate on any
    device of the InferenceClasses among ``documents`` (a type error given their attributes'
    types, an attribute none has...): it could never match. Nothing without a declared class."""
    classes = [d.resource for d in documents if isinstance(d.resource, InferenceClass)]
    evaluator = SelectorEvaluator()
    errors = []
    for doc in documents:
        if not isinstance(doc.resource, ModelDeployment):
            continue
        for field, reason in unevaluable_selectors(doc.resource, classes, evaluator):
            errors.append(
                ManifestError(
                    source=doc.source,
                    document=doc.index,
                    line=doc.line,
                    field=field,
                    reason=reason,
                    subject=doc.resource.ref,
                )
            )
    return errors


def summary(doc: LoadedDocument) -> str:
    """A one-line description of a valid document."""
    r = doc.resource
    spec = getattr(r, "spec", None)
    detail = ""
    if r.KIND == "ModelDeployment" and spec is not None:
        engines = ", ".join(e.name for e in spec.template.spec.engines)
        mode = spec.template.spec.serving.mode.value
        detail = f"{spec.replicas} replica(s), {mode}, engines: {engines}"
    elif r.KIND == "InferenceCluster" and spec is not None:
        pools = ", ".join(f"{p.name}({p.class_name} x{p.capacity_nodes})" for p in spec.node_pools)
        detail = f"source {spec.cluster.source.value}, pools: {pools}"
    elif r.KIND == "InferenceClass" and spec is not None:
        devices = ", ".join(f"{d.name} x{d.count}" for d in spec.devices)
        prov = spec.provisioning.provider.value if spec.provisioning else "BYO"
        detail = f"{prov}, devices: {devices}"
    elif r.KIND == "ModelService" and spec is not None:
        detail = f"{len(spec.endpoints)} endpoint selector(s)"
    note = not_acted_upon(r)
    return (
        f"{doc.source}:{doc.line}: {r.ref} valid"
        + (f" ({detail})" if detail else "")
        + (f"; {note}" if note else "")
    )


def validate(files: FilesOption) -> None:
    """Validate manifests: exit 0 with a summary per document, or exit 2 listing every error."""
    result = load_or_exit(files, check_selectors=True)
    for doc in result.documents:
        console.print(summary(doc), soft_wrap=True)
    n = len(result.documents)
    console.print(f"{n} document{'s' if n != 1 else ''} valid.")
    raise typer.Exit(EXIT_OK)
