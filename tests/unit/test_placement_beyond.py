"""Where placement goes beyond Modelplane: bad input never prunes, capacity is counted per
device, ``desired`` overrides the spec, ownership is namespace-aware, output is deterministic
and new replicas never reuse a removed replica's name."""

from __future__ import annotations

from placement_builders import (
    cluster,
    deployment,
    existing,
    fleet,
    gang,
    gpu,
    mem_at_least,
    placed_at,
    pool,
    pools_of,
    reasons,
    simple_cluster,
    standalone,
    status,
    where,
)

from modelfleet.api.naming import (
    LABEL_CLUSTER,
    LABEL_DEPLOYMENT,
    LABEL_NAMESPACE,
    LABEL_REPLICA_INDEX,
    replica_name,
)
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.scheduling.placement import place
from modelfleet.scheduling.snapshot import FleetSnapshot


def _eight_gpu_nodes(nodes: int = 1) -> FleetSnapshot:
    return fleet(cluster("a", pool("p", nodes, gpu(8))))


class TestBadInputNeverPrunes:
    def test_invalid_cel_keeps_every_replica_and_places_nothing(self) -> None:
        good = deployment(replicas=1)
        current = [existing(good, "a", 0), existing(good, "b", 0)]
        broken = deployment(standalone(1, "device.attributes[ =="), replicas=1)
        result = place(broken, fleet(simple_cluster("a"), simple_cluster("c")), current)
        # Neither the scale-down to 1 nor the vanished cluster "b" removes anything.
        assert [r.name for r in result.kept] == sorted(r.name for r in current)
        assert result.victims == []
        assert result.placed == []
        assert status(result) == ("False", "InvalidNodeSelector")
        condition = result.condition()
        assert condition is not None
        assert condition.message.startswith(
            "engine 'vllm', member Standalone, device 'gpu': invalid CEL selector: "
        )
        assert condition.message.endswith("keeping the 2 existing replica(s) unchanged")

    def test_empty_fleet_keeps_every_replica(self) -> None:
        dep = deployment()
        current = [existing(dep, "a", 0)]
        result = place(dep, fleet(), current)
        assert [r.name for r in result.kept] == [current[0].name]
        assert result.victims == []
        condition = result.condition()
        assert condition is not None
        assert (condition.status, condition.reason) == ("False", "NoClusters")
        assert condition.message == (
            "the fleet has no clusters; keeping the 1 existing replica(s) unchanged"
        )

    def test_selector_matching_no_cluster_keeps_every_replica(self) -> None:
        dep = deployment(cluster_selector={"region": "eu"})
        current = [existing(dep, "a", 0)]
        snapshot = fleet(simple_cluster("a", labels={"region": "us"}), simple_cluster("b"))
        result = place(dep, snapshot, current)
        assert where(result) == [("a", 0)]
        assert result.victims == []
        condition = result.condition()
        assert condition is not None
        assert condition.message.startswith(
            "no cluster matches clusterSelector region=eu (2 in the fleet)"
        )

    def test_selector_that_still_matches_some_cluster_re_places(self) -> None:
        dep = deployment(cluster_selector={"region": "eu"})
        old = existing(dep, "a", 0)
        snapshot = fleet(
            simple_cluster("a", labels={"region": "us"}),
            simple_cluster("b", labels={"region": "eu"}),
        )
        result = place(dep, snapshot, [old])
        assert reasons(result) == [(old.name, "ClusterNotSelected")]
        assert where(result) == [("b", 0)]


class TestDeviceGranularPacking:
    def test_single_gpu_replicas_share_an_eight_gpu_node(self) -> None:
        result = place(deployment(replicas=8), _eight_gpu_nodes(1), [])
        assert len(result.placed) == 8
        assert status(result) == ("True", "ReplicasCreated")

    def test_ninth_single_gpu_replica_does_not_fit_one_node(self) -> None:
        result = place(deployment(replicas=9), _eight_gpu_nodes(1), [])
        assert len(result.placed) == 8
        assert result.rejections == {"a": "pool 'p' has room for 0 more pods of 1 'gpu', needs 1"}

    def test_pods_of_two_deployments_share_a_node(self) -> None:
        first = deployment(standalone(4), name="first")
        running = existing(first, "a", 0, "p")
        assert where(place(deployment(standalone(4)), _eight_gpu_nodes(1), [running])) == [("a", 0)]
        third = place(deployment(standalone(5), name="third"), _eight_gpu_nodes(1), [running])
        assert third.placed == []

    def test_a_node_holds_floor_n_over_k_pods(self) -> None:
        three_gpus = standalone(3)
        assert len(place(deployment(three_gpus, replicas=2), _eight_gpu_nodes(1), []).placed) == 2
        assert len(place(deployment(three_gpus, replicas=3), _eight_gpu_nodes(1), []).placed) == 2
        assert len(place(deployment(three_gpus, replicas=3), _eight_gpu_nodes(2), []).placed) == 3

    def test_gang_members_need_untouched_nodes(self) -> None:
        small = existing(deployment(name="small"), "a", 0, "p")
        result = place(deployment(gang(8, 8)), _eight_gpu_nodes(2), [small])
        assert result.placed == []
        assert result.rejections == {"a": "pool 'p' has 1 free node, needs 2"}

    def test_shared_pods_do_not_land_on_gang_nodes(self) -> None:
        big = existing(deployment(gang(1, 1), name="big"), "a", 0, "p")
        assert place(deployment(), _eight_gpu_nodes(2), [big]).placed == []

    def test_claimless_members_cost_nothing(self) -> None:
        api_only = existing(deployment(gang(None, 8), name="api"), "a", 0, "p")
        result = place(deployment(standalone(8)), _eight_gpu_nodes(2), [api_only])
        assert where(result) == [("a", 0)]

    def test_retained_replica_is_charged_its_stamped_device_count(self) -> None:
        dep = deployment(standalone(1), replicas=2)
        stamped_with_8 = existing(deployment(standalone(8)), "a", 0, "p")
        result = place(dep, _eight_gpu_nodes(1), [stamped_with_8])
        assert [r.name for r in result.kept] == [stamped_with_8.name]
        assert result.placed == []
        # The same replica stamped with one GPU leaves room for the second one.
        stamped_with_1 = existing(dep, "a", 0, "p")
        assert placed_at(place(dep, _eight_gpu_nodes(1), [stamped_with_1])) == [("a", 1)]


class TestDesiredOverride:
    def test_desired_asks_for_a_surge_replica(self) -> None:
        dep = deployment(replicas=1)
        snapshot = fleet(simple_cluster("a"), simple_cluster("b"))
        result = place(dep, snapshot, [existing(dep, "a", 0)], desired=2)
        assert result.desired == 2
        assert where(result) == [("a", 0), ("b", 0)]

    def test_desired_zero_removes_every_replica(self) -> None:
        dep = deployment(replicas=2)
        current = [existing(dep, "a", 0), existing(dep, "b", 0)]
        result = place(dep, fleet(simple_cluster("a"), simple_cluster("b")), current, desired=0)
        assert where(result) == []
        assert sorted(reason for _, reason in reasons(result)) == ["ScaleDown", "ScaleDown"]
        assert status(result) == ("True", "ReplicasCreated")


class TestOwnership:
    def test_same_named_deployment_in_another_namespace_is_not_ours(self) -> None:
        ours = deployment(namespace="ml-team")
        theirs = existing(deployment(namespace="other-team"), "a", 0)
        result = place(ours, fleet(simple_cluster("a"), simple_cluster("b")), [theirs])
        assert result.victims == []
        assert result.kept == []
        # Their replica still holds the only node of "a".
        assert where(result) == [("b", 0)]

    def test_replica_names_differ_between_namespaces(self) -> None:
        assert replica_name("ml-team", "m", "a", 0) != replica_name("other", "m", "a", 0)


class TestStamping:
    def test_new_replica_carries_template_and_managed_labels(self) -> None:
        dep = deployment(labels={"model": "qwen", "modelfleet.dev/cluster": "spoofed"})
        (replica,) = place(dep, fleet(simple_cluster("a")), []).placed
        assert replica.metadata.labels == {
            "model": "qwen",
            LABEL_DEPLOYMENT: "my-model",
            LABEL_NAMESPACE: "ml-team",
            LABEL_CLUSTER: "a",
            LABEL_REPLICA_INDEX: "0",
        }
        assert replica.name == replica_name("ml-team", "my-model", "a", 0)
        assert replica.namespace == "ml-team"
        assert (replica.spec.deployment, replica.spec.index) == ("my-model", 0)

    def test_kept_replica_is_re_stamped_with_the_current_template(self) -> None:
        old = existing(deployment(standalone(1, mem_at_least("20Gi"))), "a", 0)
        dep = deployment(standalone(1, mem_at_least("40Gi"), copies=2), labels={"v": "2"})
        (kept,) = place(dep, fleet(simple_cluster("a", 2)), [old]).kept
        assert kept.name == old.name
        assert kept.metadata.labels["v"] == "2"
        assert kept.spec.engines[0].copies == 2
        (request,) = kept.spec.engines[0].members[0].device_requests or []
        assert [s.cel for s in request.selectors] == [mem_at_least("40Gi")]

    def test_new_replica_never_reuses_a_removed_replicas_name(self) -> None:
        old = existing(deployment(standalone(1, name="old-engine")), "a", 0)
        result = place(deployment(), fleet(simple_cluster("a", 2)), [old])
        assert reasons(result) == [(old.name, "ShapeChanged")]
        assert placed_at(result) == [("a", 1)]
        assert result.placed[0].name != old.name

    def test_engines_of_one_replica_use_different_pools_of_one_cluster(self) -> None:
        dep = deployment(
            {**standalone(8), "name": "prefill", "phase": "Prefill"},
            {**standalone(8), "name": "decode", "phase": "Decode"},
            mode="PrefillDecode",
        )
        snapshot = fleet(cluster("a", pool("p1", 1, gpu(8)), pool("p2", 1, gpu(8))))
        (replica,) = place(dep, snapshot, []).placed
        assert pools_of(replica) == [["p1"], ["p2"]]

    def test_later_engines_see_what_earlier_engines_took(self) -> None:
        dep = deployment(
            {**standalone(8), "name": "prefill", "phase": "Prefill"},
            {**standalone(8), "name": "decode", "phase": "Decode"},
            mode="PrefillDecode",
        )
        result = place(dep, _eight_gpu_nodes(1), [])
        assert result.placed == []
        assert result.rejections == {"a": "pool 'p' has 0 free nodes, needs 1"}


class TestDeterminism:
    def test_same_input_gives_the_same_output(self) -> None:
        dep = deployment(standalone(2, name="a"), standalone(1, name="b"), replicas=5)
        snapshot = fleet(
            cluster("z", pool("p", 2, gpu(8))),
            cluster("a", pool("p", 1, gpu(8)), pool("q", 1, gpu(4))),
            simple_cluster("m", 3),
        )
        others = [existing(deployment(standalone(4), name="o"), "a", i, "p") for i in range(2)]
        first = place(dep, snapshot, others)
        again = place(dep, snapshot.model_copy(deep=True), others, evaluator=SelectorEvaluator())
        assert first.model_dump() == again.model_dump()
        assert first.scheduled == 5

    def test_a_changed_copy_of_a_snapshot_is_not_served_stale_lookups(self) -> None:
        snapshot = fleet(simple_cluster("a"))
        assert where(place(deployment(), snapshot, [])) == [("a", 0)]
        drained = snapshot.model_copy(deep=True)
        drained.clusters[0].ready = False
        assert place(deployment(), drained, []).placed == []
        renamed = snapshot.model_copy(update={"clusters": [simple_cluster("b")]})
        assert where(place(deployment(), renamed, [])) == [("b", 0)]
