"""The free-room check of the fill (``fill.fill(skip_full=True)``): a cluster whose charged pools
are already known and have no room is stepped over, not tried; and the charged-pool cache kept
up to date with each placement (``charging.book_into_cache``). The answers (placements, rejections,
summaries, conditions) are the plain walk's without any cache, on random fleets and
deployments."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from placement_builders import (
    cluster,
    deployment,
    fleet,
    gang,
    gpu,
    pool,
    simple_cluster,
    standalone,
)

from modelfleet.api.deployments import ModelDeployment, ModelReplica
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.scheduling import fill as fill_module
from modelfleet.scheduling.charging import LedgerCache, build_ledger
from modelfleet.scheduling.index import fleet_index
from modelfleet.scheduling.ledger import PodGroup, PoolLedger
from modelfleet.scheduling.placement import Placement, place
from modelfleet.scheduling.snapshot import FleetSnapshot

EVALUATOR = SelectorEvaluator()


def _answer(p: Placement) -> tuple[Any, ...]:
    return (
        [(r.name, r.spec.cluster_name, r.spec.index) for r in p.placed],
        [[[m.node_pool_name for m in e.members] for e in r.spec.engines] for r in p.placed],
        [(v.replica.name, v.reason) for v in p.victims],
        p.rejections,
        p.summary,
        [(c.status, c.reason, c.message) for c in p.conditions],
    )


def _run(
    snapshot: FleetSnapshot, deployments: list[tuple[ModelDeployment, int]], *, indexed: bool
) -> list[tuple[Any, ...]]:
    """Place each deployment in turn, booking what it gets, as the Fleet does: with the index,
    one charged-pool cache kept across calls and dropped per cluster that gains a replica."""
    existing: list[ModelReplica] = []
    cache: LedgerCache = LedgerCache()
    answers = []
    for dep, desired in deployments:
        result = place(
            dep,
            snapshot,
            existing,
            evaluator=EVALUATOR,
            desired=desired,
            ledger_cache=cache if indexed else None,
            skip_full=indexed,
        )
        answers.append(_answer(result))
        # Booked: ``place`` already brought the cache up to date (``charging.book_into_cache``).
        existing += result.placed
    return answers


GPUS_PER_NODE = st.sampled_from([1, 2, 4, 8])


@st.composite
def fleets(draw: st.DrawFn) -> FleetSnapshot:
    clusters = []
    for c in range(draw(st.integers(1, 6))):
        pools = [
            pool(f"p{p}", draw(st.integers(0, 3)), gpu(draw(GPUS_PER_NODE)))
            for p in range(draw(st.integers(1, 3)))
        ]
        clusters.append(
            cluster(
                f"c{c}",
                *pools,
                ready=draw(st.booleans()) or draw(st.booleans()),
                taints=[("dedicated", "x", "NoSchedule")] if draw(st.integers(0, 5)) == 0 else (),
            )
        )
    return fleet(*clusters)


@st.composite
def deployments(draw: st.DrawFn) -> list[tuple[ModelDeployment, int]]:
    out = []
    for k in range(draw(st.integers(1, 8))):
        if draw(st.integers(0, 3)) == 0:
            engine = gang(draw(GPUS_PER_NODE), draw(GPUS_PER_NODE), nodes=draw(st.integers(1, 2)))
        else:
            engine = standalone(draw(GPUS_PER_NODE), copies=draw(st.integers(1, 2)))
        engines = [engine]
        if draw(st.integers(0, 4)) == 0:
            engines.append(standalone(draw(GPUS_PER_NODE), name="draft"))
        out.append((deployment(*engines, name=f"d{k}"), draw(st.integers(1, 6))))
    return out


@settings(max_examples=150, deadline=None)
@given(snapshot=fleets(), asked=deployments())
def test_the_free_room_check_gives_the_plain_walks_answers(
    snapshot: FleetSnapshot, asked: list[tuple[ModelDeployment, int]]
) -> None:
    assert _run(snapshot, asked, indexed=True) == _run(snapshot, asked, indexed=False)


def test_full_clusters_known_to_the_cache_are_stepped_over_not_tried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    snapshot = fleet(*(simple_cluster(f"c{i}", nodes=1) for i in range(5)))
    cache = LedgerCache()
    existing: list[ModelReplica] = []
    for k in range(3):  # fills c0, c1 and c2, one replica each, booked
        result = place(deployment(name=f"d{k}"), snapshot, existing, ledger_cache=cache)
        existing += result.placed
    assert [r.spec.cluster_name for r in existing] == ["c0", "c1", "c2"]

    def unbooked(result: Placement) -> None:
        for replica in result.placed:
            cache.pop(replica.spec.cluster_name, None)

    # A placement short of room charges every cluster into the cache; it is not booked.
    result = place(deployment(name="probe", replicas=3), snapshot, existing, ledger_cache=cache)
    assert len(result.placed) == 2
    unbooked(result)
    assert sorted(cache) == ["c0", "c1", "c2"]
    assert all(cache.exhausted(c) for c in cache)

    tried: list[str] = []
    real_try = fill_module._try_cluster

    def counting(cluster: Any, *args: Any) -> Any:
        tried.append(cluster.name)
        return real_try(cluster, *args)

    monkeypatch.setattr(fill_module, "_try_cluster", counting)
    result = place(deployment(name="new"), snapshot, existing, ledger_cache=cache)
    assert [r.spec.cluster_name for r in result.placed] == ["c3"]
    assert tried == ["c3"]  # c0-c2 are full and the cache says so
    unbooked(result)

    tried.clear()
    result = place(deployment(name="wide", replicas=3), snapshot, existing, ledger_cache=cache)
    # Nothing for the third replica: the stepped-over clusters are tried for their reasons.
    assert [r.spec.cluster_name for r in result.placed] == ["c3", "c4"]
    assert sorted(result.rejections) == ["c0", "c1", "c2", "c3", "c4"]
    assert result.rejections["c0"] == result.rejections["c4"]
    assert "gpu" in result.rejections["c0"]
    # c3 and c4 win the first two; for the third every cluster is full, each tried once, in
    # spread order (the clusters holding one of this deployment's replicas last).
    assert tried == ["c3", "c4", "c0", "c1", "c2", "c3", "c4"]
    # Booked into the cache as a fresh charge would have it: both now full.
    assert cache.exhausted("c3")
    assert cache.exhausted("c4")


def test_the_cache_follows_a_placement_only_when_that_equals_a_fresh_charge() -> None:
    snapshot = fleet(cluster("c0", pool("gpu", 2, gpu(8))), cluster("c1", pool("gpu", 2, gpu(8))))
    cache = LedgerCache()
    existing: list[ModelReplica] = []
    for dep in (
        deployment(standalone(4), name="big"),
        deployment(standalone(2), name="small"),  # sorts after 4-GPU pods: charged on
        deployment(standalone(4), name="big-again"),  # sorts before the 2-GPU pod: dropped
    ):
        before = dict(cache)
        result = place(dep, snapshot, existing, ledger_cache=cache)
        existing += result.placed
        (won,) = {r.spec.cluster_name for r in result.placed}
        if dep.name == "big-again":
            assert won not in cache
        elif dep.name == "small":
            assert won in before  # charged on from its entry, not recharged
            assert cache[won] == _fresh_charge(snapshot, existing, won)


def _fresh_charge(
    snapshot: FleetSnapshot, replicas: list[ModelReplica], name: str
) -> dict[str, PoolLedger]:
    index = fleet_index(snapshot)
    on = {name: [r for r in replicas if r.spec.cluster_name == name]}
    ledger = build_ledger(index, on, EVALUATOR)
    return {
        p.name: ledger.pool((name, p.name), p.shape.capacity, p.nodes)
        for p in index.by_name[name].pools
    }


@pytest.mark.parametrize(
    ("pool_state", "group", "may"),
    [
        (PoolLedger((8,), 0, [[1]]), PodGroup((1,), 3, False), True),  # one pod fits: unsure
        (PoolLedger((8,), 0, [[1]]), PodGroup((2,), 1, False), False),
        (PoolLedger((8,), 1, []), PodGroup((8,), 5, False), True),
        (PoolLedger((8,), 1, []), PodGroup((9,), 1, False), False),  # larger than a node
        (PoolLedger((8,), 1, [[8]]), PodGroup((8,), 2, True), False),  # gang: untouched only
        (PoolLedger((8,), 2, []), PodGroup((8,), 2, True), True),
        (PoolLedger((8,), 0, []), PodGroup((0,), 4, False), True),  # claimless
    ],
)
def test_may_take_is_false_only_when_take_falls_short(
    pool_state: PoolLedger, group: PodGroup, may: bool
) -> None:
    assert pool_state.may_take(group) is may
    if not may:
        assert pool_state.copy().take(group) < group.pods


@settings(max_examples=300, deadline=None)
@given(
    nodes=st.integers(0, 3),
    before=st.lists(st.tuples(st.integers(0, 8), st.integers(1, 4)), max_size=4),
    demand=st.integers(0, 9),
    pods=st.integers(0, 4),
    whole_node=st.booleans(),
)
def test_may_take_never_rules_out_a_group_that_fits(
    nodes: int, before: list[tuple[int, int]], demand: int, pods: int, whole_node: bool
) -> None:
    state = PoolLedger.empty((8,), nodes)
    for d, n in before:
        state.take(PodGroup((d,), n, False))
    group = PodGroup((demand,), pods, whole_node)
    if not state.may_take(group):
        assert state.copy().take(group) < group.pods
