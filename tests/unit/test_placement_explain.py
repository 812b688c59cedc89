"""Explanations: one reason per cluster and a kube-scheduler-style summary, surfaced in a False
condition whenever any desired replica is missing."""

from __future__ import annotations

from placement_builders import (
    cluster,
    deployment,
    fleet,
    gang,
    gpu,
    mem_at_least,
    pool,
    simple_cluster,
    standalone,
    status,
)

from modelfleet.scheduling.explain import summarize
from modelfleet.scheduling.placement import place


def test_summary_counts_each_reason_most_common_first() -> None:
    dep = deployment(
        gang(8, 8, name="decode", leader_selectors=[mem_at_least("130Gi")]),
        tolerations=[],
    )
    snapshot = fleet(
        cluster("l4-a", pool("l4", 4, gpu(1, memory="23034Mi"))),
        cluster("l4-b", pool("l4", 4, gpu(1, memory="23034Mi"))),
        cluster("h100", pool("h100", 4, gpu(8, memory="81559Mi"))),
        cluster("west", pool("h200", 1, gpu(8, memory="140Gi"))),
        cluster(
            "east", pool("h200", 2, gpu(8, "140Gi")), taints=[("maintenance", "true", "NoSchedule")]
        ),
    )
    result = place(dep, snapshot, [])
    assert result.summary == (
        "0/5 clusters fit: 3 no pool satisfies device 'gpu' of engine 'decode'; "
        "1 pool 'h200' has 1 free node, needs 2; "
        "1 untolerated taint maintenance=true:NoSchedule"
    )
    assert result.rejections == {
        "l4-a": "no pool satisfies device 'gpu' of engine 'decode'",
        "l4-b": "no pool satisfies device 'gpu' of engine 'decode'",
        "h100": "no pool satisfies device 'gpu' of engine 'decode'",
        "west": "pool 'h200' has 1 free node, needs 2",
        "east": "untolerated taint maintenance=true:NoSchedule",
    }


def test_partial_shortfall_is_a_false_condition_with_the_reasons() -> None:
    result = place(deployment(replicas=3), fleet(simple_cluster("a", 2)), [])
    assert len(result.placed) == 2
    assert status(result) == ("False", "InsufficientCapacity")
    condition = result.condition()
    assert condition is not None
    assert condition.message == (
        "Scheduled 2 of 3 replicas; 0/1 clusters fit: 1 pool 'gpu' has 0 free nodes, needs 1"
    )


def test_clusters_outside_the_selector_are_counted_and_named() -> None:
    dep = deployment(standalone(8), cluster_selector={"tier": "prod"})
    snapshot = fleet(
        simple_cluster("dev", labels={"tier": "dev"}),
        cluster("prod", pool("p", 1, gpu(4)), labels={"tier": "prod"}),
    )
    result = place(dep, snapshot, [])
    assert result.rejections == {
        "dev": "not selected by clusterSelector",
        "prod": "no pool satisfies device 'gpu' of engine 'vllm'",
    }
    assert result.summary.startswith("0/2 clusters fit: ")


def test_readiness_reasons() -> None:
    snapshot = fleet(
        simple_cluster("down", ready=False), simple_cluster("dark", gateway=None), cluster("none")
    )
    snapshot.clusters[2].pools = []
    result = place(deployment(), snapshot, [])
    assert result.rejections == {
        "down": "not Ready",
        "dark": "no gateway address",
        "none": "no node pools",
    }


def test_full_success_has_no_rejections_or_summary() -> None:
    result = place(deployment(), fleet(simple_cluster("a")), [])
    assert result.rejections == {}
    assert result.summary == ""
    condition = result.condition()
    assert condition is not None
    assert condition.message == "Scheduled 1 of 1 replicas"


def test_sub_node_pods_are_explained_in_pods_not_nodes() -> None:
    result = place(
        deployment(standalone(3, copies=3)), fleet(cluster("a", pool("p", 1, gpu(8)))), []
    )
    assert result.rejections == {"a": "pool 'p' has room for 2 more pods of 3 'gpu', needs 3"}


def test_summarize_orders_by_count_then_reason() -> None:
    reasons = {"a": "y", "b": "x", "c": "y", "d": "z"}
    assert summarize(4, 0, reasons) == "0/4 clusters fit: 2 y; 1 x; 1 z"
    assert summarize(3, 3, {}) == "3/3 clusters fit"
