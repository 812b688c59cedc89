"""Placement basics: retain before fill, spread then pack, lowest free index, scale-down order
and the ledger across deployments (Modelplane's TestSchedule and the retain-only mode)."""

from __future__ import annotations

from placement_builders import (
    cluster,
    deployment,
    existing,
    fleet,
    gang,
    gpu,
    placed_at,
    pool,
    reasons,
    simple_cluster,
    standalone,
    status,
    where,
)

from modelfleet.scheduling.placement import VictimReason, place


class TestSchedule:
    def test_no_clusters_places_nothing(self) -> None:
        result = place(deployment(), fleet(), [])
        assert result.placed == []
        assert status(result) == ("False", "NoClusters")

    def test_single_ready_cluster_is_picked(self) -> None:
        result = place(deployment(), fleet(simple_cluster("a")), [])
        assert where(result) == [("a", 0)]
        assert status(result) == ("True", "ReplicasCreated")

    def test_not_ready_cluster_gets_no_new_replica(self) -> None:
        result = place(deployment(), fleet(simple_cluster("a", ready=False)), [])
        assert result.placed == []
        assert result.rejections == {"a": "not Ready"}

    def test_cluster_without_gateway_address_gets_no_new_replica(self) -> None:
        snapshot = fleet(simple_cluster("a", gateway=None), simple_cluster("b"))
        result = place(deployment(replicas=2), snapshot, [])
        assert where(result) == [("b", 0)]
        assert result.rejections["a"] == "no gateway address"

    def test_four_node_gang_does_not_fit_a_two_node_pool(self) -> None:
        dep = deployment(gang(8, 8, nodes=3))
        result = place(dep, fleet(cluster("a", pool("gpu", 2, gpu(8)))), [])
        assert result.placed == []
        assert result.rejections == {"a": "pool 'gpu' has 2 free nodes, needs 4"}

    def test_existing_replica_is_retained_although_another_cluster_is_viable(self) -> None:
        dep = deployment()
        result = place(
            dep, fleet(simple_cluster("a"), simple_cluster("b")), [existing(dep, "b", 0)]
        )
        assert where(result) == [("b", 0)]
        assert result.placed == []
        assert result.victims == []

    def test_degraded_pinned_cluster_keeps_its_replica(self) -> None:
        dep = deployment()
        snapshot = fleet(simple_cluster("a", ready=False, gateway=None), simple_cluster("b"))
        result = place(dep, snapshot, [existing(dep, "a", 0)])
        assert where(result) == [("a", 0)]
        assert result.victims == []

    def test_deleted_pinned_cluster_triggers_replacement(self) -> None:
        dep = deployment()
        old = existing(dep, "gone", 0)
        result = place(dep, fleet(simple_cluster("b")), [old])
        assert where(result) == [("b", 0)]
        assert reasons(result) == [(old.name, "ClusterGone")]

    def test_scale_up_adds_a_replica_on_a_second_cluster(self) -> None:
        dep = deployment(replicas=2)
        result = place(
            dep, fleet(simple_cluster("a"), simple_cluster("b")), [existing(dep, "a", 0)]
        )
        assert where(result) == [("a", 0), ("b", 0)]
        assert placed_at(result) == [("b", 0)]

    def test_scale_up_without_capacity_keeps_only_the_retained_replica(self) -> None:
        dep = deployment(replicas=2)
        result = place(dep, fleet(simple_cluster("a")), [existing(dep, "a", 0)])
        assert where(result) == [("a", 0)]
        assert status(result) == ("False", "InsufficientCapacity")

    def test_two_replicas_pack_onto_one_two_node_cluster(self) -> None:
        result = place(deployment(replicas=2), fleet(simple_cluster("a", 2)), [])
        assert where(result) == [("a", 0), ("a", 1)]

    def test_two_replicas_spread_over_two_clusters_before_packing(self) -> None:
        snapshot = fleet(simple_cluster("a", 2), simple_cluster("b", 2))
        assert where(place(deployment(replicas=2), snapshot, [])) == [("a", 0), ("b", 0)]

    def test_three_replicas_spread_then_pack(self) -> None:
        snapshot = fleet(simple_cluster("a", 2), simple_cluster("b", 2))
        assert where(place(deployment(replicas=3), snapshot, [])) == [
            ("a", 0),
            ("a", 1),
            ("b", 0),
        ]

    def test_capacity_forces_packing_past_spread(self) -> None:
        snapshot = fleet(simple_cluster("a", 3), simple_cluster("b", 1))
        assert where(place(deployment(replicas=4), snapshot, [])) == [
            ("a", 0),
            ("a", 1),
            ("a", 2),
            ("b", 0),
        ]

    def test_new_replica_goes_to_the_empty_cluster_before_doubling_up(self) -> None:
        dep = deployment(replicas=2)
        snapshot = fleet(simple_cluster("a", 2), simple_cluster("b", 2))
        assert placed_at(place(dep, snapshot, [existing(dep, "a", 0)])) == [("b", 0)]

    def test_new_replica_takes_the_lowest_free_index(self) -> None:
        dep = deployment(replicas=3)
        current = [existing(dep, "a", 0), existing(dep, "a", 2)]
        assert placed_at(place(dep, fleet(simple_cluster("a", 3)), current)) == [("a", 1)]

    def test_scale_down_drops_the_highest_index(self) -> None:
        dep = deployment(replicas=1)
        a0, a1 = existing(dep, "a", 0), existing(dep, "a", 1)
        result = place(dep, fleet(simple_cluster("a", 2)), [a0, a1])
        assert where(result) == [("a", 0)]
        assert reasons(result) == [(a1.name, "ScaleDown")]

    def test_retained_replica_is_charged_its_stamped_cost_not_the_new_shape(self) -> None:
        # Stamped with copies=2 (2 nodes); the template now says copies=4. 2 + 4 fit in 6.
        old_shape = deployment(standalone(copies=2), replicas=2)
        dep = deployment(standalone(copies=4), replicas=2)
        result = place(dep, fleet(simple_cluster("a", 6)), [existing(old_shape, "a", 0)])
        assert where(result) == [("a", 0), ("a", 1)]
        assert [e.copies for r in result.replicas for e in r.spec.engines] == [4, 4]

    def test_scale_down_takes_from_the_most_loaded_cluster(self) -> None:
        dep = deployment(replicas=2)
        a0, a1, b3 = existing(dep, "a", 0), existing(dep, "a", 1), existing(dep, "b", 3)
        snapshot = fleet(simple_cluster("a", 2), simple_cluster("b", 4))
        result = place(dep, snapshot, [a0, a1, b3])
        assert where(result) == [("a", 0), ("b", 3)]
        assert reasons(result) == [(a1.name, "ScaleDown")]

    def test_colocated_replicas_are_both_retained(self) -> None:
        dep = deployment(replicas=2)
        current = [existing(dep, "a", 0), existing(dep, "a", 1)]
        result = place(dep, fleet(simple_cluster("a", 2), simple_cluster("b", 2)), current)
        assert where(result) == [("a", 0), ("a", 1)]
        assert result.victims == []

    def test_at_equal_index_scale_down_drops_the_later_cluster_name(self) -> None:
        dep = deployment(replicas=1)
        a0, b0 = existing(dep, "a", 0), existing(dep, "b", 0)
        result = place(dep, fleet(simple_cluster("a"), simple_cluster("b")), [b0, a0])
        assert where(result) == [("a", 0)]
        assert reasons(result) == [(b0.name, "ScaleDown")]

    def test_new_placement_is_alphabetical(self) -> None:
        snapshot = fleet(simple_cluster("b"), simple_cluster("a"))
        assert where(place(deployment(), snapshot, [])) == [("a", 0)]

    def test_other_deployments_replicas_consume_capacity(self) -> None:
        other = deployment(name="other")
        snapshot = fleet(simple_cluster("a"), simple_cluster("b"))
        result = place(deployment(), snapshot, [existing(other, "a", 0)])
        assert where(result) == [("b", 0)]

    def test_own_observed_replicas_are_not_double_counted(self) -> None:
        dep = deployment(replicas=2)
        result = place(dep, fleet(simple_cluster("a", 2)), [existing(dep, "a", 0)])
        assert where(result) == [("a", 0), ("a", 1)]
        assert status(result) == ("True", "ReplicasCreated")

    def test_replica_pinned_to_an_unknown_cluster_is_dropped_and_uses_nothing(self) -> None:
        dep = deployment()
        stray = existing(dep, "unknown", 0)
        result = place(dep, fleet(simple_cluster("a")), [stray])
        assert where(result) == [("a", 0)]
        assert reasons(result) == [(stray.name, "ClusterGone")]

    def test_other_deployment_pinned_to_a_deleted_pool_uses_no_capacity(self) -> None:
        other = deployment(name="other")
        result = place(deployment(), fleet(simple_cluster("a")), [existing(other, "a", 0, "old")])
        assert where(result) == [("a", 0)]

    def test_colliding_cluster_index_is_retained_deterministically_by_name(self) -> None:
        dep = deployment(replicas=2)
        first = existing(dep, "a", 0, name="my-model-aaaaa")
        second = existing(dep, "a", 0, name="my-model-bbbbb")
        snapshot = fleet(simple_cluster("a", 2))
        for order in ([first, second], [second, first]):
            result = place(dep, snapshot, order)
            assert [r.name for r in result.kept] == ["my-model-aaaaa"]
            assert reasons(result) == [("my-model-bbbbb", "DuplicateIndex")]
            # The duplicate's node is free again, so the gap is refilled at a new index.
            assert placed_at(result) == [("a", 1)]


class TestRetainOnly:
    """``fill_missing=False``: keep and scale down, place nothing (e.g. cache unresolved)."""

    def test_nothing_placed_without_replicas(self) -> None:
        result = place(deployment(), fleet(simple_cluster("a")), [], fill_missing=False)
        assert result.placed == []
        assert status(result) == ("False", "PlacementPaused")

    def test_existing_replica_is_retained(self) -> None:
        dep = deployment()
        result = place(dep, fleet(simple_cluster("a")), [existing(dep, "a", 0)], fill_missing=False)
        assert where(result) == [("a", 0)]
        assert status(result) == ("True", "ReplicasCreated")

    def test_scale_up_shortfall_is_not_filled(self) -> None:
        dep = deployment(replicas=3)
        snapshot = fleet(simple_cluster("a", 3))
        result = place(dep, snapshot, [existing(dep, "a", 0)], fill_missing=False)
        assert where(result) == [("a", 0)]
        assert status(result) == ("False", "PlacementPaused")
        condition = result.condition()
        assert condition is not None
        assert condition.message == "Scheduled 1 of 3 replicas; new placements are paused"


def test_victim_reasons_are_an_enum_of_stable_strings() -> None:
    assert VictimReason.SCALE_DOWN.value == "ScaleDown"
    assert VictimReason("NoExecuteTaint") is VictimReason.NO_EXECUTE_TAINT
