"""Device matching of node selectors against pools (Modelplane's TestScheduleNodeSelector)."""

from __future__ import annotations

from placement_builders import (
    NIC_IB,
    cluster,
    deployment,
    device,
    engine,
    existing,
    fleet,
    gpu,
    mem_at_least,
    member,
    nic,
    placed_at,
    pool,
    pools_of,
    product_is,
    reasons,
    standalone,
    status,
    where,
)

from modelfleet.scheduling.placement import place


class TestScheduleNodeSelector:
    def test_matching_request_picks_the_cluster_and_records_the_pool(self) -> None:
        dep = deployment(standalone(1, mem_at_least("40Gi")))
        result = place(dep, fleet(cluster("a", pool("h100", 1, gpu(memory="80Gi")))), [])
        (replica,) = result.placed
        assert replica.spec.cluster_name == "a"
        assert pools_of(replica) == [["h100"]]
        (request,) = replica.spec.engines[0].members[0].device_requests or []
        assert (request.name, request.device_class_name, request.count) == (
            "gpu",
            "gpu.nvidia.com",
            1,
        )
        assert [s.cel for s in request.selectors] == [mem_at_least("40Gi")]

    def test_non_matching_request_filters_the_cluster_out(self) -> None:
        dep = deployment(standalone(1, mem_at_least("100Gi")))
        snapshot = fleet(
            cluster("a", pool("l4", 1, gpu(memory="23034Mi"))),
            cluster("b", pool("h200", 1, gpu(memory="140Gi"))),
        )
        result = place(dep, snapshot, [])
        assert where(result) == [("b", 0)]

    def test_device_count_not_covered_filters_out(self) -> None:
        dep = deployment(standalone(8))
        result = place(dep, fleet(cluster("a", pool("x4", 4, gpu(4)))), [])
        assert result.placed == []
        assert result.rejections == {"a": "no pool satisfies device 'gpu' of engine 'vllm'"}

    def test_published_device_count_of_zero_satisfies_nothing(self) -> None:
        broken = gpu(1).model_copy(update={"count": 0})
        result = place(deployment(), fleet(cluster("a", pool("gpu", 4, broken))), [])
        assert result.placed == []

    def test_pool_with_zero_nodes_hosts_nothing(self) -> None:
        result = place(deployment(), fleet(cluster("a", pool("gpu", 0, gpu()))), [])
        assert result.placed == []
        assert result.rejections == {"a": "pool 'gpu' has 0 free nodes, needs 1"}

    def test_synthetic_nic_matches_but_is_not_claimed(self) -> None:
        dep = deployment(engine(member(device("gpu", 8), device("nic", 8, NIC_IB))))
        result = place(dep, fleet(cluster("a", pool("h200", 1, gpu(8), nic(8)))), [])
        (replica,) = result.placed
        requests = replica.spec.engines[0].members[0].device_requests or []
        assert [r.name for r in requests] == ["gpu"]

    def test_missing_nic_filters_the_pool_out(self) -> None:
        dep = deployment(engine(member(device("gpu", 8), device("nic", 8, NIC_IB))))
        snapshot = fleet(cluster("a", pool("plain", 1, gpu(8)), pool("ib", 1, gpu(8), nic(8))))
        (replica,) = place(dep, snapshot, []).placed
        assert pools_of(replica) == [["ib"]]

    def test_two_requests_cannot_both_claim_one_single_count_device(self) -> None:
        dep = deployment(engine(member(device("a", 1), device("b", 1))))
        assert place(dep, fleet(cluster("x", pool("p", 2, gpu(1)))), []).placed == []

    def test_two_requests_of_five_do_not_fit_a_device_of_count_eight(self) -> None:
        dep = deployment(engine(member(device("a", 5), device("b", 5))))
        assert place(dep, fleet(cluster("x", pool("p", 2, gpu(8)))), []).placed == []

    def test_two_requests_of_four_share_a_device_of_count_eight(self) -> None:
        dep = deployment(engine(member(device("a", 4), device("b", 4))))
        (replica,) = place(dep, fleet(cluster("x", pool("p", 1, gpu(8)))), []).placed
        requests = replica.spec.engines[0].members[0].device_requests or []
        assert [(r.name, r.count) for r in requests] == [("a", 4), ("b", 4)]

    def test_first_matching_pool_wins(self) -> None:
        snapshot = fleet(
            cluster(
                "a",
                pool("small", 1, gpu(memory="24Gi")),
                pool("first", 1, gpu(memory="80Gi")),
                pool("second", 1, gpu(memory="141Gi")),
            )
        )
        dep = deployment(standalone(1, mem_at_least("40Gi")))
        (replica,) = place(dep, snapshot, []).placed
        assert pools_of(replica) == [["first"]]

    def test_synthetic_only_selector_leaves_the_pool_ineligible(self) -> None:
        dep = deployment(engine(member(device("nic", 8, NIC_IB))))
        result = place(dep, fleet(cluster("a", pool("ib", 1, gpu(8), nic(8)))), [])
        assert result.placed == []
        assert result.rejections == {"a": "engine 'vllm' would claim no device here"}

    def test_retained_replica_keeps_its_pinned_pool(self) -> None:
        dep = deployment()
        snapshot = fleet(cluster("a", pool("first", 1, gpu()), pool("second", 1, gpu())))
        result = place(dep, snapshot, [existing(dep, "a", 0, "second")])
        assert [pools_of(r) for r in result.replicas] == [[["second"]]]
        assert result.victims == []

    def test_selector_drift_re_places_onto_a_newly_matching_pool(self) -> None:
        old = deployment(standalone(1, product_is("NVIDIA L4")))
        new = deployment(standalone(1, product_is("NVIDIA H100")))
        snapshot = fleet(
            cluster(
                "a",
                pool("l4", 1, gpu(memory="24Gi", product="NVIDIA L4")),
                pool("h100", 1, gpu(product="NVIDIA H100")),
            )
        )
        stale = existing(old, "a", 0, "l4")
        result = place(new, snapshot, [stale])
        assert reasons(result) == [(stale.name, "PoolMismatch")]
        assert result.victims[0].message == (
            "pool 'l4' no longer satisfies device 'gpu' of engine 'vllm'"
        )
        (replica,) = result.placed
        assert pools_of(replica) == [["h100"]]

    def test_attribute_drift_is_sticky(self) -> None:
        # The pool's driver was upgraded; the selector only cares about memory, so it stays.
        dep = deployment(standalone(1, mem_at_least("40Gi")))
        drifted = cluster("a", pool("gpu", 1, gpu(driverVersion="999.0.0")))
        result = place(dep, fleet(drifted, cluster("b")), [existing(dep, "a", 0)])
        assert where(result) == [("a", 0)]
        assert result.victims == []

    def test_no_matching_pool_anywhere_drops_the_replica(self) -> None:
        dep = deployment(standalone(1, mem_at_least("100Gi")))
        stale = existing(dep, "a", 0)
        result = place(dep, fleet(cluster("a", pool("gpu", 1, gpu(memory="80Gi")))), [stale])
        assert where(result) == []
        assert reasons(result) == [(stale.name, "PoolMismatch")]
        assert status(result) == ("False", "InsufficientCapacity")

    def test_replica_without_a_published_pool_pin_is_re_placed(self) -> None:
        dep = deployment()
        stale = existing(dep, "a", 0, "not-a-pool")
        result = place(dep, fleet(cluster("a", pool("gpu", 1, gpu()))), [stale])
        assert reasons(result) == [(stale.name, "PoolMismatch")]
        assert (
            result.victims[0].message == "pool 'not-a-pool' is no longer published on cluster 'a'"
        )
        assert placed_at(result) == [("a", 1)]

    def test_dropping_a_non_matching_replica_frees_its_node_for_the_refill(self) -> None:
        # One node only: the refill fits because the dropped replica no longer holds it.
        old = deployment(standalone(1, name="vllm"))
        dep = deployment(standalone(1, name="sglang"))
        stale = existing(old, "a", 0)
        result = place(dep, fleet(cluster("a", pool("gpu", 1, gpu()))), [stale])
        assert reasons(result) == [(stale.name, "ShapeChanged")]
        assert placed_at(result) == [("a", 1)]
        assert status(result) == ("True", "ReplicasCreated")

    def test_device_count_is_checked_per_pool_not_summed_over_the_cluster(self) -> None:
        dep = deployment(standalone(8))
        snapshot = fleet(cluster("a", pool("p1", 4, gpu(4)), pool("p2", 4, gpu(4))))
        assert place(dep, snapshot, []).placed == []

    def test_invalid_cel_is_reported_as_invalid_node_selector(self) -> None:
        dep = deployment(standalone(1, "device.capacity[ ==="))
        result = place(dep, fleet(cluster("a")), [])
        assert result.placed == []
        assert status(result) == ("False", "InvalidNodeSelector")
