"""The registry of resource kinds and the one function that turns a parsed document (a dict)
into a validated resource, or into the complete list of what is wrong with it. Pure, no I/O.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from pydantic import ValidationError

import modelfleet.api
from modelfleet.api.manifest_errors import FieldError, InvalidResourceError
from modelfleet.api.meta import ACCEPTED_API_VERSIONS, Resource
from modelfleet.api.modelplane_gateway import ModelplaneInferenceGateway, is_modelplane_gateway
from modelfleet.api.rules import validate


def _discovered_kinds() -> dict[str, type[Resource]]:
    """Every kind the API parses: each ``Resource`` subclass of an ``api/`` module that names its
    own ``KIND`` (other shapes of a kind, ``ALTERNATE_SHAPE``, excluded), by name. A new kind's
    model is picked up by being written; nothing lists it."""
    for module in pkgutil.iter_modules(modelfleet.api.__path__):
        # A module still being imported (one that imports this one) is returned as it stands;
        # models never import this module, so theirs are complete.
        importlib.import_module(f"modelfleet.api.{module.name}")
    found: dict[str, type[Resource]] = {}
    pending: list[type[Resource]] = [Resource]
    seen: set[type[Resource]] = set()
    while pending:
        cls = pending.pop()
        if cls in seen:
            continue
        seen.add(cls)
        pending.extend(cls.__subclasses__())
        own_kind = vars(cls).get("KIND")
        if own_kind and cls.__module__.startswith("modelfleet.api.") and not cls.ALTERNATE_SHAPE:
            if own_kind in found:
                raise TypeError(f"two models claim kind {own_kind}: {found[own_kind]}, {cls}")
            found[own_kind] = cls
    return dict(sorted(found.items()))


# Filled at the end of this module: api modules that import ``parse_resource`` (loading) are
# imported by the discovery, so it runs once everything here is defined.
KINDS: dict[str, type[Resource]] = {}

# The words that name a kind (plural, short names) are its model's (``Resource.plural``,
# ``SHORT_NAMES``); the CLI's other words for it (aliases) are its kind registry's, cli/kinds.py.

_FRIENDLY = {
    "missing": "required field is missing",
    "extra_forbidden": "unknown field (check the spelling; unknown fields are not ignored)",
}


def _pydantic_errors(exc: ValidationError) -> list[FieldError]:
    errors = []
    for err in exc.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        reason = _FRIENDLY.get(err["type"], err["msg"])
        if err["type"] in ("literal_error", "enum") and "expected" in err.get("ctx", {}):
            reason = f"{err['msg']} (got {err.get('input')!r})"
        if reason.startswith("Value error, "):
            reason = reason.removeprefix("Value error, ")
        errors.append(FieldError(loc, reason))
    return errors


def parse_resource(document: Any) -> Resource:
    """Validate one document; raise ``InvalidResourceError`` listing every broken rule."""
    if not isinstance(document, dict):
        raise InvalidResourceError(
            "document", [FieldError((), f"must be a mapping (got {type(document).__name__})")]
        )
    api_version = document.get("apiVersion")
    kind = document.get("kind")
    head: list[FieldError] = []
    if api_version is None:
        head.append(FieldError(("apiVersion",), "required field is missing"))
    if kind is None:
        head.append(FieldError(("kind",), "required field is missing"))
    elif kind not in KINDS:
        head.append(
            FieldError(("kind",), f"unknown kind {kind!r} (known kinds: {', '.join(KINDS)})")
        )
    if api_version is not None:
        versions = KINDS[kind].API_VERSIONS if kind in KINDS else ACCEPTED_API_VERSIONS
        if api_version not in versions:
            head.append(
                FieldError(
                    ("apiVersion",),
                    f"unsupported apiVersion {api_version!r}"
                    + (f" for {kind}" if kind in KINDS else "")
                    + f" (use {versions[0]!r}; {versions[1]!r} is also accepted)",
                )
            )
    head.sort(key=lambda e: e.path != ("apiVersion",))  # apiVersion first, as in the document
    name = (
        (document.get("metadata") or {}).get("name")
        if isinstance(document.get("metadata"), dict)
        else None
    )
    subject = f"{kind} {name}" if kind and name else str(kind or "document")
    if head:
        raise InvalidResourceError(subject, head)
    cls = KINDS[str(kind)]
    if kind == "InferenceGateway" and is_modelplane_gateway(document):
        cls = ModelplaneInferenceGateway
    try:
        resource = cls.model_validate(document)
    except ValidationError as exc:
        raise InvalidResourceError(subject, _pydantic_errors(exc)) from None
    errors = validate(resource)
    if errors:
        raise InvalidResourceError(resource.ref, errors)
    return resource


KINDS.update(_discovered_kinds())
