"""The pure pieces behind the cluster CLI: list-price estimates (``plan`` on a cluster) and the
free devices placement sees (``get clusters`` FREE)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelfleet.adapters import aks as aks_adapter
from modelfleet.adapters import eks as eks_adapter
from modelfleet.adapters import gke as gke_adapter
from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelDeployment
from modelfleet.api.loading import load_paths
from modelfleet.cli.plan import plan_resources
from modelfleet.scheduling.capacity import free_devices, summed
from modelfleet.scheduling.fleet_placement import ObservedCluster
from modelfleet.scheduling.pricing import (
    CONTROL_PLANE,
    PRICES_RECORDED,
    SYSTEM_POOLS,
    PriceSource,
    estimate,
    hourly_price,
)

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
PROVISIONING = QUICKSTART.parent / "provisioning"


def test_an_estimate_adds_the_system_pool_the_control_plane_and_each_pool() -> None:
    est = estimate("GKE", [("gpu", "a3-highgpu-8g", 2)])
    assert [(p.name, p.machine, p.nodes) for p in est.pools] == [
        ("system", "e2-standard-4", 1),
        ("gpu", "a3-highgpu-8g", 2),
    ]
    gpu = est.pools[1]
    assert gpu.hourly is not None
    assert gpu.total == pytest.approx(2 * gpu.hourly)
    system = est.pools[0].total
    assert system is not None
    assert est.known == pytest.approx(CONTROL_PLANE["GKE"] + system + 2 * gpu.hourly)
    assert est.unpriced == ()


def test_an_unknown_machine_is_reported_unpriced_not_guessed() -> None:
    est = estimate("EKS", [("a", "p9.huge", 3), ("b", "p9.huge", 1)])
    assert est.unpriced == ("p9.huge",)
    assert est.pools[1].total is None
    system = est.pools[0].total
    assert system is not None
    assert est.known == pytest.approx(CONTROL_PLANE["EKS"] + system)


def test_the_system_pools_priced_are_the_ones_the_adapters_create() -> None:
    assert SYSTEM_POOLS["GKE"][1] == gke_adapter.SYSTEM_MACHINE
    assert SYSTEM_POOLS["GKE"][2] == gke_adapter.system_pool().initial_node_count
    assert SYSTEM_POOLS["EKS"][1] == eks_adapter.SYSTEM_INSTANCE
    aks_system = aks_adapter.managed_cluster_body(
        aks_adapter.CloudCluster(name="c", region="eastus", kubernetes_version="1.34", owner="o")
    )["properties"]["agentPoolProfiles"][0]
    assert SYSTEM_POOLS["AKS"] == ("system", aks_system["vmSize"], aks_system["count"])


def test_plan_prices_the_aks_example_like_gke_and_eks() -> None:
    from modelfleet.cli.plan_clusters import plan_clusters

    (plan,) = plan_clusters(load_paths([str(PROVISIONING / "aks.yaml")]).resources)
    assert plan.problems == []
    assert plan.where == "location eastus"
    est = plan.initial
    assert [(p.name, p.machine, p.nodes) for p in est.pools] == [
        ("system", "Standard_D4s_v5", 1),
        ("gpuh100", "Standard_ND96isr_H100_v5", 1),
    ]
    assert [p.source for p in est.pools] == [PriceSource.LIST, PriceSource.ESTIMATE]
    assert est.control_plane == CONTROL_PLANE["AKS"] == 0.0
    gpu = est.pools[1].hourly
    assert gpu is not None
    # Every autoscaled pool at its maximum: three H100 nodes.
    assert plan.largest.known == pytest.approx(0.192 + 3 * gpu)


def _fleet() -> tuple[dict[str, InferenceClass], list[InferenceCluster], list[ModelDeployment]]:
    resources = load_paths([str(QUICKSTART)]).resources
    classes = {r.name: r for r in resources if isinstance(r, InferenceClass)}
    clusters = [r for r in resources if isinstance(r, InferenceCluster)]
    deployments = [r for r in resources if isinstance(r, ModelDeployment)]
    return classes, clusters, deployments


def test_free_devices_are_what_is_left_after_the_placed_replicas() -> None:
    classes, clusters, deployments = _fleet()
    observed = {
        c.name: ObservedCluster(
            spec=c, ready=True, ready_nodes={p.name: p.capacity_nodes for p in c.spec.node_pools}
        )
        for c in clusters
    }
    idle = free_devices(classes, observed, [])
    resources = load_paths([str(QUICKSTART)]).resources
    (placement,) = plan_resources(resources)
    replicas = placement.placed
    assert replicas, "the quickstart deployment must place somewhere"
    busy = free_devices(classes, observed, replicas)
    for cluster in clusters:
        before = {c.device: c for c in summed(idle[cluster.name])}
        after = {c.device: c for c in summed(busy[cluster.name])}
        used = sum(
            r.count * m.pods * e.copies
            for rep in replicas
            if rep.spec.cluster_name == cluster.name
            for e in rep.spec.engines
            for m in e.members
            for r in m.device_requests or []
        )
        assert before["gpu"].free == before["gpu"].total
        assert after["gpu"].total == before["gpu"].total
        assert after["gpu"].free == before["gpu"].total - used
    assert deployments


def test_a_pool_counts_only_its_ready_nodes() -> None:
    classes, clusters, _ = _fleet()
    cluster = clusters[0]
    pool = cluster.spec.node_pools[0]
    observed = {cluster.name: ObservedCluster(spec=cluster, ready=True, ready_nodes={pool.name: 1})}
    (count,) = free_devices(classes, observed, [])[cluster.name][pool.name]
    per_node = sum(d.count for d in classes[pool.class_name].spec.devices if d.name == count.device)
    assert (count.free, count.total) == (per_node, per_node)


def test_a_class_price_wins_over_the_table_and_each_price_says_where_it_came_from() -> None:
    est = estimate(
        "EKS",
        [("own", "p5en.48xlarge", 2), ("table", "p5en.48xlarge", 1), ("none", "p9.huge", 1)],
        {"own": 40.0},
    )
    by_name = {p.name: p for p in est.pools}
    assert (by_name["own"].hourly, by_name["own"].source) == (40.0, PriceSource.CLASS)
    assert by_name["own"].label == "class"
    # The table's p5en figure was never confirmed against a price list: an estimate.
    assert by_name["table"].source is PriceSource.ESTIMATE
    assert by_name["table"].label == f"estimate, {PRICES_RECORDED}"
    assert by_name["system"].source is PriceSource.LIST
    assert by_name["system"].label == f"list price, {PRICES_RECORDED}"
    assert (by_name["none"].hourly, by_name["none"].label) == (None, "unknown")
    assert est.unpriced == ("p9.huge",)
    assert est.sources == (PriceSource.LIST, PriceSource.CLASS, PriceSource.ESTIMATE)
    # A class price named after the system pool does not price it: it has no class.
    assert estimate("EKS", [], {"system": 1.0}).pools[0].source is PriceSource.LIST
    assert hourly_price("GKE", "e2-standard-4") == (0.134, PriceSource.LIST)


def test_a_class_price_is_validated_and_in_the_json_schema(tmp_path: Path) -> None:
    text = (PROVISIONING / "eks.yaml").read_text().split("---")[0]
    assert "hourlyPrice: 43.26" in text
    bad = tmp_path / "class.yaml"
    bad.write_text(text.replace("hourlyPrice: 43.26", "hourlyPrice: -3"))
    [error] = load_paths([str(bad)]).errors
    assert error.field == "spec.provisioning.hourlyPrice"
    assert "greater than 0" in error.reason
    schema = json.dumps(InferenceClass.model_json_schema(by_alias=True, mode="validation"))
    assert '"hourlyPrice"' in schema
