"""Placement against the live fleet (``scheduling.fleet_placement``): what the Fleet observed of
each cluster becomes the snapshot, drains evict, gone clusters drop out, and avoided clusters
are explained in the rejections, the summary and the condition alike."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from placement_builders import deployment, existing, gpu

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.contracts.fleet_state import cluster_entry, cluster_record
from modelfleet.contracts.status import ClusterRecord
from modelfleet.scheduling.explain import NOT_READY, UNREACHABLE
from modelfleet.scheduling.fleet_placement import (
    DRAINING_TAINT,
    ObservedCluster,
    live_snapshot,
    place_in_fleet,
    unreachable_rejections,
)
from modelfleet.scheduling.placement import REPLICAS_SCHEDULED, VictimReason

CLASSES = {
    "h100": InferenceClass.model_validate(
        {"kind": "InferenceClass", "metadata": {"name": "h100"}, "spec": {"devices": [gpu()]}}
    )
}


def spec(name: str, nodes: int = 2, class_name: str = "h100") -> InferenceCluster:
    return InferenceCluster.model_validate(
        {
            "kind": "InferenceCluster",
            "metadata": {"name": name, "labels": {"region": name}},
            "spec": {
                "cluster": {"source": "Existing"},
                "nodePools": [{"name": "gpu", "className": class_name, "nodeCount": nodes}],
            },
        }
    )


def observed(
    name: str,
    nodes: int = 2,
    *,
    ready: bool = True,
    ready_nodes: Mapping[str, int] | None = None,
    draining: bool = False,
    reachable: bool = True,
) -> ObservedCluster:
    return ObservedCluster(
        spec=spec(name, nodes),
        ready=ready,
        reachable=reachable,
        gateway_address=f"10.0.0.{len(name)}",
        ready_nodes=ready_nodes or {},
        draining=draining,
    )


def by_name(*clusters: ObservedCluster) -> dict[str, ObservedCluster]:
    return {c.spec.name: c for c in clusters}


def test_observed_ready_nodes_bound_capacity_and_unprobed_clusters_count_as_declared() -> None:
    fleet = by_name(
        observed("a", 4, ready_nodes={"gpu": 1}),
        observed("b", 2, ready_nodes={"gpu": 9}),  # never more than declared
        observed("c", 3),  # not probed yet
        observed("d", 3, ready_nodes={"other": 2}),  # probed, pool not seen: no nodes
    )
    snapshot = live_snapshot(CLASSES, fleet)
    assert [(c.name, c.pools[0].nodes) for c in snapshot.clusters] == [
        ("a", 1),
        ("b", 2),
        ("c", 3),
        ("d", 0),
    ]
    assert snapshot.clusters[0].labels == {"region": "a"}
    assert snapshot.clusters[0].pools[0].devices == CLASSES["h100"].spec.devices


def test_missing_class_and_gone_clusters_are_left_out() -> None:
    fleet = by_name(observed("a"), observed("b"))
    fleet["c"] = ObservedCluster(spec=spec("c", class_name="nope"), ready=True)
    snapshot = live_snapshot(CLASSES, fleet, gone={"b"})
    assert [c.name for c in snapshot.clusters] == ["a", "c"]
    assert snapshot.clusters[1].pools == []
    assert [(m.cluster, m.class_name) for m in snapshot.missing_classes] == [("c", "nope")]


def test_a_draining_cluster_evicts_its_replicas_to_another_cluster() -> None:
    dep = deployment(replicas=1)
    fleet = by_name(observed("a", draining=True), observed("b"))
    assert DRAINING_TAINT in live_snapshot(CLASSES, fleet).clusters[0].taints
    placement = place_in_fleet(
        dep,
        desired=1,
        classes=CLASSES,
        clusters=fleet,
        replicas=[existing(dep, "a", 0)],
    )
    assert [v.reason for v in placement.victims] == [VictimReason.NO_EXECUTE_TAINT]
    assert [r.spec.cluster_name for r in placement.placed] == ["b"]


def test_avoided_clusters_are_explained_in_rejections_summary_and_condition() -> None:
    dep = deployment(replicas=2)
    fleet = by_name(observed("a", 1), observed("b", 1, ready=False), observed("c", 1))
    placement = place_in_fleet(
        dep,
        desired=2,
        classes=CLASSES,
        clusters=fleet,
        replicas=[existing(dep, "a", 0)],
        avoid={"b": "replica x failed: crash", "c": "replica y failed: oom"},
    )
    # The replica on "a" stays; nothing new may go to b or c, and "a" is full.
    assert [r.spec.cluster_name for r in placement.kept] == ["a"]
    assert placement.placed == []
    assert placement.rejections["b"] == "avoided for a while: replica x failed: crash"
    assert placement.rejections["c"] == "avoided for a while: replica y failed: oom"
    assert "avoided for a while: replica y failed: oom" in placement.summary
    assert NOT_READY not in placement.summary
    condition = placement.condition(REPLICAS_SCHEDULED)
    assert condition is not None
    assert condition.status == "False"
    assert condition.message.endswith(placement.summary)


def test_avoided_clusters_are_reported_even_when_every_replica_fits_elsewhere() -> None:
    dep = deployment(replicas=1)
    fleet = by_name(observed("a"), observed("b"))
    placement = place_in_fleet(
        dep,
        desired=1,
        classes=CLASSES,
        clusters=fleet,
        replicas=[],
        avoid={"a": "replica x failed: crash", "gone": "replica z failed: lost"},
        gone={"gone"},
    )
    assert [r.spec.cluster_name for r in placement.placed] == ["b"]
    assert placement.summary == ""
    assert placement.rejections == {
        "a": "avoided for a while: replica x failed: crash",
        "gone": "avoided for a while: replica z failed: lost",
    }


def test_a_cluster_whose_last_probe_failed_gets_no_new_replica_while_still_ready() -> None:
    # "a" is preferred (smaller name, empty) but its last probe failed: the new replica goes to
    # "b", the one already on "a" stays, and the rejections say why "a" was not used.
    dep = deployment(replicas=2)
    fleet = by_name(observed("a", 4, reachable=False), observed("b", 4), observed("c", 4))
    snapshot = live_snapshot(CLASSES, fleet)
    assert [c.schedulable for c in snapshot.clusters] == [False, True, True]
    assert unreachable_rejections(snapshot) == {"a": UNREACHABLE}
    placement = place_in_fleet(
        dep, desired=3, classes=CLASSES, clusters=fleet, replicas=[existing(dep, "a", 0)]
    )
    assert [r.spec.cluster_name for r in placement.kept] == ["a"]
    assert sorted(r.spec.cluster_name for r in placement.placed) == ["b", "c"]
    assert placement.victims == []
    assert placement.summary == ""
    assert placement.rejections == {"a": UNREACHABLE}


def test_an_unreachable_cluster_is_the_reason_when_nothing_else_fits() -> None:
    dep = deployment(replicas=2)
    fleet = by_name(observed("a", 1, reachable=False, ready=False), observed("b", 1))
    placement = place_in_fleet(dep, desired=2, classes=CLASSES, clusters=fleet, replicas=[])
    assert [r.spec.cluster_name for r in placement.placed] == ["b"]
    # Unreachable, not merely NotReady: the failed probe is the more useful word.
    assert placement.rejections["a"] == UNREACHABLE
    assert f"1 {UNREACHABLE}" in placement.summary
    assert NOT_READY not in placement.summary


def test_an_avoided_cluster_keeps_its_own_reason_over_unreachable() -> None:
    dep = deployment(replicas=1)
    fleet = by_name(observed("a", reachable=False), observed("b"))
    placement = place_in_fleet(
        dep,
        desired=1,
        classes=CLASSES,
        clusters=fleet,
        replicas=[],
        avoid={"a": "replica x failed: crash"},
    )
    assert [r.spec.cluster_name for r in placement.placed] == ["b"]
    assert placement.rejections == {"a": "avoided for a while: replica x failed: crash"}


def test_a_cluster_record_is_reachable_until_its_probes_fail() -> None:
    record = ClusterRecord(spec=spec("a"), ready=True)
    assert record.observed().reachable
    since = datetime(2026, 1, 1, tzinfo=UTC)
    dark = record.model_copy(update={"unreachable_since": since})
    assert not dark.observed().reachable
    assert dark.observed() != record.observed()  # a change the Fleet passes on
    entry, _, layout = cluster_entry(dark)
    # Carried across continue-as-new.
    assert cluster_record(entry, {entry.layout: layout}).unreachable_since == since
