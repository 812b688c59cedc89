"""The per-node, per-device ledger on its own."""

from __future__ import annotations

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


def test_room_for_does_not_take() -> None:
    pool = PoolLedger.empty((8,), 1)
    assert pool.room_for(PodGroup((3,), 5, whole_node=False), 5) == 2
    assert pool.pristine == 1


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
