"""The generated CRDs: one per kind and group, named, scoped and with the subresources and
printer columns the controller, ``kubectl`` and a scaler rely on."""

from __future__ import annotations

from typing import Any

from modelfleet.api.crds import custom_resource_definitions
from modelfleet.api.kinds import KINDS

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
