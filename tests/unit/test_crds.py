"""The generated CRDs: one per kind and group, named, scoped and with the subresources and
printer columns the controller, ``kubectl`` and a scaler rely on; structural schemas that
admit every valid document unchanged in meaning and refuse invalid ones with the words of
``modelfleet validate``."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from modelfleet.api.crd_rules import RULES
from modelfleet.api.crd_schema import rules_placed
from modelfleet.api.crds import custom_resource_definitions
from modelfleet.api.deployments import ModelDeployment
from modelfleet.api.kinds import KINDS, parse_resource
from modelfleet.api.manifest_errors import InvalidResourceError
from modelfleet.api.modelplane_gateway import ModelplaneInferenceGateway
from modelfleet.cli.main import app

# The simulated apiserver's schema and CEL handling judge the generated CRDs as a real one
# would (they share no code with the generator).
from modelfleet.sim.apiserver.crd_cel import compile_causes, rule_causes
from modelfleet.sim.apiserver.crd_schema import apply_defaults, prune, structural_causes, validate

# kubectl's own short names (core, apps, autoscaling, networking, policy...) and Gateway API's.
BUILTIN_SHORT_NAMES = {
    "cm", "cs", "csr", "ds", "deploy", "ep", "ev", "hpa", "ing", "limits", "netpol", "no",
    "ns", "pc", "pdb", "po", "psp", "pv", "pvc", "quota", "rc", "rs", "sa", "sc", "sts", "svc",
    "gtw", "gc", "eps",
}  # fmt: skip


def _by_name() -> dict[str, dict[str, Any]]:
    return {crd["metadata"]["name"]: crd for crd in custom_resource_definitions()}


def test_one_crd_per_kind_in_its_own_group_and_in_modelplanes() -> None:
    crds = _by_name()
    assert len(crds) == 2 * len(KINDS)
    assert "modeldeployments.modelfleet.dev" in crds
    assert "modeldeployments.modelplane.ai" in crds
    assert "gkeclusters.infrastructure.modelfleet.dev" in crds
    assert "gkeclusters.infrastructure.modelplane.ai" in crds
    without = custom_resource_definitions(modelplane=False)
    assert {c["spec"]["group"] for c in without} == {
        "modelfleet.dev",
        "infrastructure.modelfleet.dev",
    }


def test_names_scope_and_short_names() -> None:
    crds = _by_name()
    md = crds["modeldeployments.modelfleet.dev"]["spec"]
    assert md["names"] == {
        "kind": "ModelDeployment",
        "listKind": "ModelDeploymentList",
        "plural": "modeldeployments",
        "singular": "modeldeployment",
        "shortNames": ["md"],
        "categories": ["modelfleet"],
    }
    # Modelplane's group: no short names (``md`` is modelfleet's), no category.
    mp = crds["modeldeployments.modelplane.ai"]["spec"]["names"]
    assert "shortNames" not in mp
    assert "categories" not in mp
    assert md["scope"] == "Namespaced"
    assert crds["inferenceclasses.modelfleet.dev"]["spec"]["scope"] == "Cluster"
    assert crds["inferenceclusters.modelfleet.dev"]["spec"]["scope"] == "Cluster"
    for crd in crds.values():
        shorts = set(crd["spec"]["names"].get("shortNames", []))
        assert not shorts & BUILTIN_SHORT_NAMES, crd["metadata"]["name"]
        assert crd["metadata"]["name"] == f"{crd['spec']['names']['plural']}.{crd['spec']['group']}"


def test_subresources_and_printer_columns() -> None:
    crds = _by_name()
    for crd in crds.values():
        (version,) = crd["spec"]["versions"]
        assert version["subresources"]["status"] == {}
        shown = [c for c in version["additionalPrinterColumns"] if not c.get("priority")]
        assert shown[-1] == {
            "name": "Age",
            "type": "date",
            "jsonPath": ".metadata.creationTimestamp",
        }
    (md,) = crds["modeldeployments.modelfleet.dev"]["spec"]["versions"]
    assert md["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    }
    paths = {c["name"]: c["jsonPath"] for c in md["additionalPrinterColumns"]}
    assert paths["Ready"] == ".status.readyReplicas"
    assert paths["Desired"] == ".spec.replicas"
    (svc,) = crds["modelservices.modelfleet.dev"]["spec"]["versions"]
    assert "scale" not in svc["subresources"]


# --- the schemas: structural, and judging documents as modelfleet does ------------------------

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus" / "modelplane"


@functools.cache
def _schemas() -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (c["spec"]["group"], c["spec"]["names"]["kind"]): c["spec"]["versions"][0]["schema"][
            "openAPIV3Schema"
        ]
        for c in custom_resource_definitions()
    }


def _admit(document: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """What the apiserver stores of ``document`` (pruned, defaulted) and why it refuses it."""
    schema = _schemas()[(document["apiVersion"].split("/")[0], document["kind"])]
    stored = copy.deepcopy(document)
    prune(schema, stored, root=True)
    apply_defaults(schema, stored, root=True)
    causes = validate(schema, stored)
    return stored, causes or rule_causes(schema, stored)


_GROUPS = {crd["spec"]["group"] for crd in custom_resource_definitions()}


def _documents(*globs: str) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for pattern in globs:
        for path in sorted(ROOT.glob(pattern)):
            for doc in yaml.safe_load_all(path.read_text()):
                # examples/gitops also holds KEDA's and the HPA's kinds, which no CRD here serves.
                if not isinstance(doc, dict) or "kind" not in doc:
                    continue
                if str(doc.get("apiVersion", "")).split("/")[0] in _GROUPS:
                    found.append((f"{path.relative_to(ROOT)}:{doc['metadata']['name']}", doc))
    return found


def test_every_schema_is_structural_and_its_rules_compile() -> None:
    for crd in custom_resource_definitions():
        (version,) = crd["spec"]["versions"]
        schema = version["schema"]["openAPIV3Schema"]
        where = f"{crd['metadata']['name']}: openAPIV3Schema"
        assert structural_causes(schema, where) == []
        assert compile_causes(schema, where) == []
        assert "x-kubernetes-preserve-unknown-fields" not in schema["properties"]["spec"]


def test_every_rule_is_placed_on_some_schema() -> None:
    placed: set[str] = set()
    for model in KINDS.values():
        placed |= rules_placed(model, RULES)
    placed |= rules_placed(ModelplaneInferenceGateway, RULES)
    assert placed == set(RULES)


DOCUMENTS = _documents("examples/**/*.yaml", "tests/corpus/modelplane/valid/*.yaml")


@pytest.mark.parametrize(("where", "document"), DOCUMENTS, ids=[w for w, _ in DOCUMENTS])
def test_valid_documents_are_admitted_unchanged_in_meaning(
    where: str, document: dict[str, Any]
) -> None:
    original = parse_resource(document)
    stored, causes = _admit(document)
    assert causes == []
    pruned = copy.deepcopy(document)
    prune(_schemas()[(document["apiVersion"].split("/")[0], document["kind"])], pruned, root=True)
    assert pruned == document  # nothing modelfleet reads is dropped
    # The schema's defaults are the models' own: what the controller reads back means the same.
    assert parse_resource(stored) == original


def _deployment(**spec: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(
        (ROOT / "examples" / "quickstart" / "qwen3-8b.yaml").read_text().split("\n---")[0]
    )
    doc["spec"].update(spec)
    return doc


def _member(doc: dict[str, Any]) -> dict[str, Any]:
    member: dict[str, Any] = doc["spec"]["template"]["spec"]["engines"][0]["members"][0]
    return member


def _worker_on_standalone() -> dict[str, Any]:
    doc = _deployment()
    _member(doc)["worker"] = {"nodes": 2}
    return doc


def _env_both() -> dict[str, Any]:
    doc = _deployment()
    _member(doc)["template"]["spec"]["containers"][0]["env"] = [
        {"name": "A", "value": "1", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    ]
    return doc


def _toleration_without_key() -> dict[str, Any]:
    doc = _deployment()
    doc["spec"]["template"]["spec"]["tolerations"] = [{"operator": "Equal", "value": "x"}]
    return doc


def _phase_without_pd() -> dict[str, Any]:
    doc = _deployment()
    doc["spec"]["template"]["spec"]["engines"][0]["phase"] = "Decode"
    return doc


def _pool_min_above_max() -> dict[str, Any]:
    (doc,) = [d for w, d in DOCUMENTS if w.endswith("clusters.yaml:l4-dev")]
    doc = copy.deepcopy(doc)
    doc["spec"]["nodePools"][0].update(minNodeCount=3, maxNodeCount=2)
    return doc


def _empty_fallback() -> dict[str, Any]:
    (doc,) = [d for w, d in DOCUMENTS if w.endswith("gke-central-fallbacks")]
    doc = copy.deepcopy(doc)
    doc["spec"]["nodePools"][0]["fallbacks"].append({})
    return doc


def _corpus(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((CORPUS / "invalid" / name).read_text())
    return document


INVALID = {
    "both-zero": _deployment(strategy={"maxSurge": 0, "maxUnavailable": 0}),
    "borrow-without-home": _deployment(strategy={"borrow": "Fleet"}),
    "worker-on-standalone": _worker_on_standalone(),
    "env-value-and-valueFrom": _env_both(),
    "toleration-without-key": _toleration_without_key(),
    "phase-without-pd": _phase_without_pd(),
    "pool-min-above-max": _pool_min_above_max(),
    "pool-fallback-empty": _empty_fallback(),
    "cache-without-huggingface": _corpus("cache-without-huggingface.yaml"),
    "class-aks-without-block": _corpus("class-aks-without-block.yaml"),
    "cluster-gke-without-block": _corpus("cluster-gke-without-block.yaml"),
    "cluster-vultr-with-gke-block": _corpus("cluster-vultr-with-gke-block.yaml"),
    "gateway-metallb-without-pool": _corpus("gateway-metallb-without-pool.yaml"),
    "container-not-engine": _corpus("deployment-container-not-engine.yaml"),
    "canary-steps-not-increasing": _deployment(
        strategy={"canary": {"steps": [50, 25, 100], "analysis": {"ttftP95Ratio": 2}}}
    ),
    "canary-last-step-not-100": _deployment(
        strategy={"canary": {"steps": [25, 50], "analysis": {"maxErrorPercent": 1}}}
    ),
    "canary-without-threshold": _deployment(
        strategy={"canary": {"steps": [50, 100], "analysis": {"windowSeconds": 30}}}
    ),
}


def test_a_canary_strategy_is_admitted() -> None:
    canary = {"steps": [5, 25, 50, 100], "analysis": {"ttftP95Ratio": 2, "maxErrorPercent": 1}}
    document = _deployment(strategy={"canary": canary})
    stored, causes = _admit(document)
    assert causes == []
    md = parse_resource(stored)
    assert isinstance(md, ModelDeployment)
    assert md.spec.strategy.canary is not None
    assert md.spec.strategy.canary.analysis.window_seconds == 60


@pytest.mark.parametrize("name", INVALID)
def test_invalid_documents_are_refused_with_validates_words(name: str) -> None:
    document = INVALID[name]
    with pytest.raises(InvalidResourceError) as caught:
        parse_resource(document)
    _, causes = _admit(document)
    refused = {(c["field"], c["message"].removeprefix('Invalid value: "object": ')) for c in causes}
    for error in caught.value.errors:
        # The field validate names, or (a rule that reads a parent's field: the serving mode)
        # the parent the rule sits on.
        assert any(
            reason == error.reason and error.field.startswith(field) for field, reason in refused
        ), (error, causes)


def test_schema_bounds_are_refused_in_kubernetes_words() -> None:
    _, causes = _admit(_deployment(replicas=-1))
    assert causes == [
        {
            "reason": "FieldValueInvalid",
            "field": "spec.replicas",
            "message": "Invalid value: -1: spec.replicas in body should be greater than or "
            "equal to 0",
        }
    ]
    bad_name = _deployment()
    bad_name["spec"]["template"]["spec"]["engines"][0]["name"] = "Engine_1"
    _, causes = _admit(bad_name)
    assert [c["field"] for c in causes] == ["spec.template.spec.engines[0].name"]
    assert "should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'" in causes[0]["message"]


def _rules_under_unbounded_lists(node: dict[str, Any], path: str, out: list[str]) -> None:
    if node.get("x-kubernetes-validations") and "[]" in path:
        out.append(path)
    for name, child in (node.get("properties") or {}).items():
        _rules_under_unbounded_lists(child, f"{path}.{name}", out)
    for key, bound in (("items", "maxItems"), ("additionalProperties", "maxProperties")):
        child = node.get(key)
        if isinstance(child, dict):
            # A bounded collection multiplies a rule's cost by its bound; an unbounded one by
            # the apiserver's estimate of millions, which a real server refuses at CRD time.
            _rules_under_unbounded_lists(child, path + ("[n]" if bound in node else "[]"), out)


def test_no_rule_sits_under_an_unbounded_list() -> None:
    found: list[str] = []
    for crd in custom_resource_definitions():
        (version,) = crd["spec"]["versions"]
        _rules_under_unbounded_lists(
            version["schema"]["openAPIV3Schema"], crd["metadata"]["name"], found
        )
    assert found == []


def test_the_crds_command_prints_yaml_documents_or_a_json_list() -> None:
    runner = CliRunner()
    printed = runner.invoke(app, ["crds"])
    assert printed.exit_code == 0
    documents = list(yaml.safe_load_all(printed.output))
    assert [d["metadata"]["name"] for d in documents] == [
        c["metadata"]["name"] for c in custom_resource_definitions()
    ]
    listed = runner.invoke(app, ["crds", "-o", "json", "--no-modelplane"])
    assert listed.exit_code == 0
    body = json.loads(listed.output)
    assert body["kind"] == "List"
    assert {i["spec"]["group"] for i in body["items"]} == {
        "modelfleet.dev",
        "infrastructure.modelfleet.dev",
    }
    refused = runner.invoke(app, ["crds", "-o", "wide"])
    assert refused.exit_code == 2
