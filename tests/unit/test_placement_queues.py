"""Capacity from the gang scheduler (issue 26 item 3): a cluster whose KAI Queue or Kueue
ClusterQueue can admit fewer GPUs than its nodes have gets no more than the queue admits, and
"why not scheduled" names the queue; the probe's reading of each scheduler's status."""

from __future__ import annotations

from typing import Any

from placement_builders import deployment, existing, gang, gpu, standalone

from modelfleet.adapters.gang_queues import kai_capacity, kueue_capacity
from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelDeployment
from modelfleet.scheduling.fleet_placement import ObservedCluster, place_in_fleet
from modelfleet.scheduling.placement import Placement
from modelfleet.scheduling.snapshot import QueueCapacity

CLASSES = {
    "h100": InferenceClass.model_validate(
        {"kind": "InferenceClass", "metadata": {"name": "h100"}, "spec": {"devices": [gpu(8)]}}
    )
}


def observed(name: str, queue: QueueCapacity | None, nodes: int = 2) -> ObservedCluster:
    spec = InferenceCluster.model_validate(
        {
            "kind": "InferenceCluster",
            "metadata": {"name": name},
            "spec": {
                "cluster": {"source": "Existing"},
                "nodePools": [{"name": "gpu", "className": "h100", "nodeCount": nodes}],
            },
        }
    )
    return ObservedCluster(spec=spec, ready=True, gateway_address="10.0.0.1", queue=queue)


def kai(total: int | None, used: int, problem: str = "") -> QueueCapacity:
    return QueueCapacity(
        scheduler="KAI", name="team-a", total_gpus=total, used_gpus=used, problem=problem
    )


def place(dep: ModelDeployment, *clusters: ObservedCluster) -> Placement:
    return place_in_fleet(
        dep,
        desired=dep.spec.replicas,
        classes=CLASSES,
        clusters={c.spec.name: c for c in clusters},
        replicas=[],
    )


def test_a_full_queue_keeps_placement_away_and_says_so() -> None:
    placement = place(deployment(standalone(8)), observed("a", kai(16, 16)))
    assert placement.placed == []
    assert placement.rejections == {"a": "queue team-a: 0 of 16 GPUs free, needs 8"}
    assert "queue team-a: 0 of 16 GPUs free" in placement.summary


def test_a_full_queue_sends_the_replica_to_a_cluster_whose_queue_has_room() -> None:
    placement = place(
        deployment(standalone(8)), observed("a", kai(16, 16)), observed("b", kai(16, 8))
    )
    assert [r.spec.cluster_name for r in placement.placed] == ["b"]


def test_the_queue_bounds_what_one_pass_places_even_with_free_nodes() -> None:
    # Four free 8-GPU nodes, but the queue admits 8 more GPUs: one replica, not two.
    placement = place(deployment(standalone(8), replicas=2), observed("a", kai(16, 8), nodes=4))
    assert [r.spec.cluster_name for r in placement.placed] == ["a"]
    assert placement.rejections == {"a": "queue team-a: 0 of 16 GPUs free, needs 8"}


def test_a_gang_needs_room_for_all_its_gpus_in_the_queue() -> None:
    placement = place(deployment(gang(8, 8, nodes=1)), observed("a", kai(24, 12)))
    assert placement.rejections == {"a": "queue team-a: 12 of 24 GPUs free, needs 16"}
    placement = place(deployment(gang(8, 8, nodes=1)), observed("a", kai(24, 8)))
    assert [r.spec.cluster_name for r in placement.placed] == ["a"]


def test_an_unlimited_queue_leaves_capacity_to_the_nodes_and_a_missing_one_admits_nothing() -> None:
    placement = place(deployment(standalone(8)), observed("a", kai(None, 100)))
    assert [r.spec.cluster_name for r in placement.placed] == ["a"]
    missing = kai(None, 0, problem="KAI Queue team-a not found")
    placement = place(deployment(standalone(8)), observed("a", missing))
    assert placement.rejections == {"a": "queue team-a: KAI Queue team-a not found"}


def test_the_probe_reads_kai_queue_limit_then_quota_and_allocated() -> None:
    queue: dict[str, Any] = {
        "spec": {"resources": {"gpu": {"quota": 16, "limit": -1}}},
        "status": {"allocated": {"nvidia.com/gpu": "12", "cpu": "96"}},
    }
    assert kai_capacity("team-a", queue) == kai(16, 12)
    queue["spec"]["resources"]["gpu"]["limit"] = 24
    assert kai_capacity("team-a", queue).total_gpus == 24
    unlimited = {"spec": {"resources": {"gpu": {"quota": -1}}}}
    assert kai_capacity("team-a", unlimited) == kai(None, 0)


def test_the_probe_sums_kueue_nominal_quota_and_flavor_usage() -> None:
    cq = {
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "h100",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "512"},
                                {"name": "nvidia.com/gpu", "nominalQuota": 16},
                            ],
                        },
                        {
                            "name": "a100",
                            "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}],
                        },
                    ],
                }
            ]
        },
        "status": {
            "flavorsUsage": [
                {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "16"}]},
                {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "total": "2"}]},
            ]
        },
    }
    capacity = kueue_capacity("team-a", cq)
    assert (capacity.total_gpus, capacity.used_gpus, capacity.free_gpus) == (24, 18, 6)


def test_replicas_placed_but_not_yet_admitted_count_against_the_queue() -> None:
    # The probe last saw the queue empty, but a replica of 16 GPUs is already placed there
    # (not admitted yet): the queue's lag must not let a second one in.
    dep = deployment(standalone(8, copies=2), name="first")
    running = existing(dep, "a", 0)
    placement = place_in_fleet(
        deployment(standalone(8), name="second"),
        desired=1,
        classes=CLASSES,
        clusters={"a": observed("a", kai(16, 0), nodes=4)},
        replicas=[running],
    )
    assert placement.placed == []
    assert placement.rejections == {"a": "queue team-a: 0 of 16 GPUs free, needs 8"}
