"""The pure decisions behind node pool changes of an InferenceCluster (issue 10): declared vs
observed pools per cloud, and the refusal to remove a pool that still runs replicas."""

from __future__ import annotations

from modelfleet.api.clusters import ClusterSource
from modelfleet.cluster.plan import (
    desired_shape,
    diff_pools,
    removal_refused,
)
from modelfleet.contracts.cloud_payloads import PoolPlan, PoolShape


def plan(name: str, count: int = 1, low: int | None = None, high: int | None = None) -> PoolPlan:
    return PoolPlan(
        name=name, class_name="h100", node_count=count, min_node_count=low, max_node_count=high
    )


def as_built(source: ClusterSource, *plans: PoolPlan) -> list[PoolShape]:
    return [desired_shape(source, p) for p in plans]


def names(plans: list[PoolPlan]) -> list[str]:
    return [p.name for p in plans]


def test_nothing_changes_when_the_cloud_holds_what_is_declared() -> None:
    for source in (ClusterSource.GKE, ClusterSource.EKS):
        declared = [plan("a", 2), plan("b", 1, 0, 4)]
        changes = diff_pools(source, declared, as_built(source, *declared), {"a", "b"})
        assert not changes
        assert changes.summary() == "no change"


def test_a_new_pool_is_created_and_a_changed_one_resized() -> None:
    source = ClusterSource.GKE
    built = as_built(source, plan("a", 2), plan("b", 1, 0, 4))
    changes = diff_pools(source, [plan("a", 3), plan("b", 1, 1, 8), plan("c")], built, {"a", "b"})
    assert names(changes.create) == ["c"]
    assert names(changes.resize) == ["a", "b"]
    assert changes.delete == []
    assert changes.summary() == "created c; resized a, b"


def test_an_autoscaled_pools_node_count_is_the_autoscalers() -> None:
    source = ClusterSource.GKE
    (shape,) = as_built(source, plan("b", 1, 0, 4))
    grown = shape.model_copy(update={"node_count": 3})  # the autoscaler added nodes
    assert not diff_pools(source, [plan("b", 1, 0, 4)], [grown], {"b"})
    # Turning autoscaling off is a change, even at the same count.
    assert names(diff_pools(source, [plan("b", 1)], [shape], {"b"}).resize) == ["b"]


def test_eks_fixed_groups_compare_their_whole_scaling_range() -> None:
    source = ClusterSource.EKS
    assert desired_shape(source, plan("a", 2)).model_dump() == {
        "name": "a",
        "node_count": 2,
        "min_node_count": 2,
        "max_node_count": 2,
    }
    assert desired_shape(source, plan("z", 0)).max_node_count == 1  # EKS wants max >= 1
    built = as_built(source, plan("a", 2))
    assert names(diff_pools(source, [plan("a", 3)], built, {"a"}).resize) == ["a"]


def test_only_pools_this_cluster_created_are_deleted() -> None:
    source = ClusterSource.GKE
    built = as_built(source, plan("a"), plan("old"), plan("someone-elses"))
    changes = diff_pools(source, [plan("a")], built, {"a", "old"})
    assert changes.delete == ["old"]


def test_removing_a_pool_with_replicas_is_refused_naming_them() -> None:
    on = {"gpu": ["ml/llama-0", "ml/llama-1"], "spare": []}
    refused = removal_refused(["gpu", "spare"], on)
    assert refused is not None
    assert refused.startswith(
        "node pools cannot be removed while replicas run on them: "
        "pool gpu runs ml/llama-0, ml/llama-1."
    )
    assert "spare" not in refused
    assert removal_refused(["spare"], on) is None
    assert removal_refused(["unknown"], on) is None
