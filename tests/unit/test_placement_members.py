"""Multi-member engines: whole engine on one pool, no stranding, claimless members
(Modelplane's TestScheduleMembers)."""

from __future__ import annotations

from placement_builders import (
    NIC_IB,
    cluster,
    deployment,
    device,
    engine,
    existing,
    fleet,
    gang,
    gpu,
    mem_at_least,
    member,
    nic,
    pool,
    pools_of,
    product_is,
    reasons,
    standalone,
    where,
)

from modelfleet.api.deployments import Role
from modelfleet.scheduling.placement import place


def _requests_by_role(replica_engines: list) -> dict[Role, list[str] | None]:
    return {
        m.role: [r.name for r in m.device_requests] if m.device_requests else None
        for m in replica_engines[0].members
    }


class TestScheduleMembers:
    def test_one_pool_satisfying_every_member_hosts_the_whole_gang(self) -> None:
        dep = deployment(
            gang(
                8,
                8,
                leader_selectors=[mem_at_least("141Gi")],
                worker_selectors=[mem_at_least("200Gi")],
            )
        )
        snapshot = fleet(
            cluster("a", pool("mid", 2, gpu(8, memory="141Gi")), pool("big", 2, gpu(8, "256Gi")))
        )
        (replica,) = place(dep, snapshot, []).placed
        assert pools_of(replica) == [["big", "big"]]

    def test_members_no_single_pool_satisfies_are_not_split(self) -> None:
        dep = deployment(
            gang(
                8,
                8,
                leader_selectors=[product_is("NVIDIA H100")],
                worker_selectors=[product_is("NVIDIA H200")],
            )
        )
        snapshot = fleet(
            cluster(
                "a",
                pool("h100", 2, gpu(8, product="NVIDIA H100")),
                pool("h200", 2, gpu(8, product="NVIDIA H200")),
            )
        )
        result = place(dep, snapshot, [])
        assert result.placed == []
        assert result.rejections == {"a": "no single pool satisfies every member of engine 'vllm'"}

    def test_gang_too_big_for_its_only_matching_pool_is_rejected(self) -> None:
        dep = deployment(gang(8, 8, nodes=2))
        result = place(dep, fleet(cluster("a", pool("p", 2, gpu(8)))), [])
        assert result.placed == []
        assert result.rejections == {"a": "pool 'p' has 2 free nodes, needs 3"}

    def test_gang_too_big_on_one_cluster_lands_whole_on_another(self) -> None:
        dep = deployment(gang(8, 8, nodes=2))
        snapshot = fleet(cluster("a", pool("p", 2, gpu(8))), cluster("b", pool("p", 3, gpu(8))))
        (replica,) = place(dep, snapshot, []).placed
        assert replica.spec.cluster_name == "b"
        assert pools_of(replica) == [["p", "p"]]

    def test_member_claimable_elsewhere_is_not_stranded_on_a_synthetic_match(self) -> None:
        dep = deployment(engine(member(device("nic", 1, NIC_IB))))
        snapshot = fleet(
            cluster("a", pool("fabric-only", 1, nic(8)), pool("dra-nic", 1, nic(8, claim="DRA")))
        )
        (replica,) = place(dep, snapshot, []).placed
        assert pools_of(replica) == [["dra-nic"]]
        assert _requests_by_role(replica.spec.engines) == {Role.STANDALONE: ["nic"]}

    def test_member_synthetic_only_everywhere_is_placed_claimless_with_its_gang(self) -> None:
        leader = member(device("nic", 8, NIC_IB), role="Leader")
        worker = member(device("gpu", 8), role="Worker", nodes=1)
        dep = deployment(engine(leader, worker))
        (replica,) = place(dep, fleet(cluster("a", pool("ib", 1, gpu(8), nic(8)))), []).placed
        assert _requests_by_role(replica.spec.engines) == {Role.LEADER: None, Role.WORKER: ["gpu"]}

    def test_member_that_matches_nowhere_fails_the_replica(self) -> None:
        leader = member(device("gpu", 8), role="Leader")
        worker = member(
            device("tpu", 1, 'device.driver == "tpu.google.com"'), role="Worker", nodes=1
        )
        result = place(
            deployment(engine(leader, worker)), fleet(cluster("a", pool("p", 4, gpu(8)))), []
        )
        assert result.placed == []
        assert result.rejections == {"a": "no pool satisfies device 'tpu' of engine 'vllm'"}

    def test_claimless_leader_rides_along_at_zero_cost(self) -> None:
        dep = deployment(gang(None, 8, nodes=1))
        (replica,) = place(dep, fleet(cluster("a", pool("p", 1, gpu(8)))), []).placed
        assert _requests_by_role(replica.spec.engines) == {Role.LEADER: None, Role.WORKER: ["gpu"]}

    def test_retained_claimless_member_keeps_its_pin(self) -> None:
        dep = deployment(gang(None, 8, nodes=1))
        current = existing(dep, "a", 0, "p")
        snapshot = fleet(cluster("a", pool("first", 1, gpu(8)), pool("p", 1, gpu(8))))
        result = place(dep, snapshot, [current])
        assert result.victims == []
        assert [pools_of(r) for r in result.kept] == [[["p", "p"]]]
        assert _requests_by_role(result.kept[0].spec.engines)[Role.LEADER] is None

    def test_other_deployments_claimless_member_uses_no_capacity(self) -> None:
        other = deployment(gang(None, 8, nodes=1), name="other")
        snapshot = fleet(cluster("a", pool("p", 2, gpu(8))))
        result = place(deployment(standalone(8)), snapshot, [existing(other, "a", 0, "p")])
        assert where(result) == [("a", 0)]

    def test_member_shape_change_re_places_the_replica(self) -> None:
        before = deployment(standalone(8))
        after = deployment(gang(8, 8))
        old = existing(before, "a", 0, "p")
        result = place(after, fleet(cluster("a", pool("p", 3, gpu(8)))), [old])
        assert reasons(result) == [(old.name, "ShapeChanged")]
        assert result.victims[0].message == (
            "engine 'vllm' members changed from Standalone to Leader+Worker"
        )
        (replica,) = result.placed
        assert [m.role for m in replica.spec.engines[0].members] == [Role.LEADER, Role.WORKER]
