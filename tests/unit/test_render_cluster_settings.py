"""Cluster-level rendering settings (issue 14 item 5): the node label that pins each pool, the
Gateway routes attach to and the workload namespace mode come from the InferenceCluster, with
defaults that follow the document's API group so clusters prepared for Modelplane work
unchanged."""

from __future__ import annotations

from typing import Any

import pytest
from render_factories import engine, gang, gpus, member, replica
from render_helpers import one, render, workloads

from modelfleet.api.clusters import InferenceCluster, NamespaceMode
from modelfleet.api.kinds import parse_resource
from modelfleet.api.manifest_errors import InvalidResourceError
from modelfleet.api.naming import LABEL_POOL, MODELPLANE_LABEL_POOL
from modelfleet.rendering.cluster_settings import cluster_facts
from modelfleet.rendering.facts import ClusterFacts


def cluster(api_version: str = "modelfleet.dev/v1alpha1", **spec: Any) -> InferenceCluster:
    doc = {
        "apiVersion": api_version,
        "kind": "InferenceCluster",
        "metadata": {"name": "byo"},
        "spec": {
            "cluster": {"source": "Existing"},
            "nodePools": [
                {"name": "h100", "className": "h100"},
                {"name": "cpu", "className": "cpu"},
            ],
            **spec,
        },
    }
    parsed = parse_resource(doc)
    assert isinstance(parsed, InferenceCluster)
    return parsed


def _selectors(rendered: Any) -> list[dict[str, str]]:
    out = []
    for workload in workloads(rendered):
        spec = workload["spec"]
        if workload["kind"] == "Deployment":
            out.append(spec["template"]["spec"]["nodeSelector"])
        else:
            lwt = spec["leaderWorkerTemplate"]
            out.append(lwt["leaderTemplate"]["spec"]["nodeSelector"])
            out.append(lwt["workerTemplate"]["spec"]["nodeSelector"])
    return out


def test_defaults_of_a_modelfleet_cluster_are_unchanged() -> None:
    facts = cluster_facts(cluster())
    assert facts == ClusterFacts()
    rendered = render(replica(), facts)
    assert _selectors(rendered) == [{LABEL_POOL: "h100"}]
    assert rendered.namespace == "mf-ml-team"
    route = one(rendered, "HTTPRoute")
    assert route["spec"]["parentRefs"][0]["namespace"] == "modelfleet-system"


def test_a_modelplane_cluster_pins_pools_with_its_label_and_uses_its_gateway() -> None:
    facts = cluster_facts(cluster("modelplane.ai/v1alpha1"))
    rendered = render(replica(), facts)
    assert _selectors(rendered) == [{MODELPLANE_LABEL_POOL: "h100"}]
    parent = one(rendered, "HTTPRoute")["spec"]["parentRefs"][0]
    assert (parent["name"], parent["namespace"]) == ("inference-gateway", "modelplane-system")


def test_each_pool_may_name_its_own_node_label() -> None:
    spec_pools = [
        {"name": "h100", "className": "h100", "nodeLabel": "example.com/gpu-pool"},
        {"name": "cpu", "className": "cpu"},
    ]
    facts = cluster_facts(cluster(nodePools=spec_pools))
    leader_on_cpu = replica(
        engine(
            "main",
            member("Leader", pool="cpu"),
            member("Worker", pool="h100", nodes=1, requests=[gpus(8)]),
        )
    )
    rendered = render(leader_on_cpu, facts)
    # The leader's pool keeps the default label; the worker's pool uses its own.
    assert _selectors(rendered) == [{LABEL_POOL: "cpu"}, {"example.com/gpu-pool": "h100"}]


def test_the_gateway_and_namespace_mode_are_configurable() -> None:
    facts = cluster_facts(
        cluster(
            workloads={
                "namespaceMode": "Deployment",
                "gateway": {"name": "edge", "namespace": "gateways"},
            }
        )
    )
    assert facts.namespace_mode is NamespaceMode.DEPLOYMENT
    rendered = render(replica(gang("llm", nodes=1)), facts)
    assert rendered.namespace == "ml-team"
    assert {m["metadata"].get("namespace") for m in rendered.manifests()} - {None} == {"ml-team"}
    parent = one(rendered, "HTTPRoute")["spec"]["parentRefs"][0]
    assert (parent["name"], parent["namespace"]) == ("edge", "gateways")


def test_explicit_settings_win_over_the_modelplane_defaults() -> None:
    spec_pools = [{"name": "h100", "className": "h100", "nodeLabel": "modelfleet.dev/pool"}]
    facts = cluster_facts(
        cluster(
            "modelplane.ai/v1alpha1",
            nodePools=spec_pools,
            workloads={"gateway": {"name": "gw", "namespace": "modelfleet-system"}},
        )
    )
    assert facts.pool_label("h100") == LABEL_POOL
    assert facts.pool_label("other") == MODELPLANE_LABEL_POOL
    assert (facts.gateway_name, facts.gateway_namespace) == ("gw", "modelfleet-system")


def test_worker_defaults_are_kept_where_the_cluster_says_nothing() -> None:
    base = ClusterFacts(epp_image="registry.local/epp:1", gateway_namespace="edge")
    facts = cluster_facts(cluster(), base)
    assert facts.epp_image == "registry.local/epp:1"
    assert facts.gateway_namespace == "edge"


def test_an_invalid_node_label_is_rejected_at_its_field() -> None:
    with pytest.raises(InvalidResourceError) as info:
        cluster(nodePools=[{"name": "h100", "className": "h100", "nodeLabel": "bad label!"}])
    assert [e.field for e in info.value.errors] == ["spec.nodePools[0].nodeLabel"]
