"""The per-node, per-device ledger on its own."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from modelfleet.scheduling.ledger import Ledger, PodGroup, PoolLedger


def test_whole_node_pods_take_untouched_nodes_only() -> None:
    pool = PoolLedger.empty((8,), 3)
    assert pool.take(PodGroup((1,), 1, whole_node=False)) == 1
    assert pool.take(PodGroup((8,), 3, whole_node=True)) == 2
    assert pool.pristine == 0


def test_shared_pods_fill_the_tightest_node_first() -> None:
    pool = PoolLedger.empty((8,), 2)
    pool.take(PodGroup((6,), 1, whole_node=False))  # node 1: 2 free
    pool.take(PodGroup((3,), 1, whole_node=False))  # node 2: 5 free
    # Best fit puts a 2-GPU pod on node 1 (leaves 0) rather than node 2 (would leave 3).
    assert pool.take(PodGroup((2,), 1, whole_node=False)) == 1
    assert pool.partial == [[5]]
    assert pool.take(PodGroup((5,), 1, whole_node=False)) == 1
    assert pool.partial == []


def test_every_device_of_a_pod_must_fit_on_one_node() -> None:
    pool = PoolLedger.empty((8, 2), 2)
    assert pool.take(PodGroup((1, 2), 1, whole_node=False)) == 1
    # GPUs are left on node 1, but its NICs are gone: the next pod needs a second node.
    assert pool.take(PodGroup((1, 1), 1, whole_node=False)) == 1
    assert pool.pristine == 0
    assert pool.partial == [[7, 0], [7, 1]]
    assert pool.take(PodGroup((7, 0), 3, whole_node=False)) == 2
    assert pool.partial == [[0, 1]]


def test_pods_larger_than_a_node_never_fit() -> None:
    assert PoolLedger.empty((4,), 5).take(PodGroup((8,), 1, whole_node=False)) == 0


def test_claimless_pods_are_free() -> None:
    pool = PoolLedger.empty((8,), 0)
    assert pool.take(PodGroup((0,), 5, whole_node=True)) == 5


def test_copy_is_independent() -> None:
    pool = PoolLedger.empty((8,), 1)
    trial = pool.copy()
    trial.take(PodGroup((1,), 1, whole_node=False))
    assert (pool.pristine, pool.partial) == (1, [])
    assert (trial.pristine, trial.partial) == (0, [[7]])


def test_ledger_replays_charges_lazily_and_counts_overflow() -> None:
    ledger = Ledger()
    ledger.charge(("a", "p"), [PodGroup((8,), 3, whole_node=True)])
    ledger.charge(("a", "p"), [PodGroup((0,), 9, whole_node=True)])  # claimless: ignored
    pool = ledger.pool(("a", "p"), (8,), 2)
    assert pool.pristine == 0
    assert pool.overflow == 1
    # Charges after materialisation apply at once.
    ledger.charge(("a", "p"), [PodGroup((1,), 1, whole_node=False)])
    assert ledger.pool(("a", "p"), (8,), 2).overflow == 2


def test_ledger_charges_whole_nodes_before_shared_pods() -> None:
    ledger = Ledger()
    ledger.charge(("a", "p"), [PodGroup((1,), 1, whole_node=False)])
    ledger.charge(("a", "p"), [PodGroup((8,), 1, whole_node=True)])
    pool = ledger.pool(("a", "p"), (8,), 2)
    assert (pool.pristine, pool.partial, pool.overflow) == (0, [[7]], 0)


def _reference_take(pool: PoolLedger, demand: tuple[int, ...], pods: int) -> int:
    """Pod by pod, as the ledger is specified: best-fit shared node, else a fresh node."""
    for placed in range(pods):
        fitting = [
            (sum(f) - sum(demand), i)
            for i, f in enumerate(pool.partial)
            if all(x >= d for x, d in zip(f, demand, strict=True))
        ]
        if fitting:
            _, i = min(fitting)
            pool.partial[i] = [x - d for x, d in zip(pool.partial[i], demand, strict=True)]
            if not any(pool.partial[i]):
                del pool.partial[i]
        elif pool.pristine > 0 and all(d <= c for d, c in zip(demand, pool.capacity, strict=True)):
            pool.pristine -= 1
            rest = [c - d for c, d in zip(pool.capacity, demand, strict=True)]
            if any(rest):
                pool.partial.append(rest)
        else:
            return placed
    return pods


demand_st = st.tuples(st.integers(0, 8), st.integers(0, 3)).filter(any)


@settings(max_examples=200, deadline=None)
@given(
    nodes=st.integers(0, 5),
    steps=st.lists(st.tuples(demand_st, st.integers(1, 12)), min_size=1, max_size=8),
)
def test_bulk_take_matches_pod_by_pod(nodes: int, steps: list[tuple[tuple[int, int], int]]) -> None:
    fast, slow = PoolLedger.empty((8, 2), nodes), PoolLedger.empty((8, 2), nodes)
    for demand, pods in steps:
        group = PodGroup(demand, pods, whole_node=False)
        assert fast.take(group) == _reference_take(slow, demand, pods)
        assert (fast.pristine, fast.partial) == (slow.pristine, slow.partial)
