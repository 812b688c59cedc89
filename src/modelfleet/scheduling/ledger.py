"""Capacity accounting per pool, per node, per device: what is still free after every replica
in the fleet has been charged.

Modelplane charges a whole node for every pod that claims anything, which strands GPUs
(upstream issue #172). Here a pod that needs k of a node's n devices of a kind shares the node
with other such pods (n // k of them per node, across replicas and deployments), while gang
pods (Leader/Worker) still take whole, untouched nodes because a multi-node engine assumes it
owns the node's interconnect. Claimless pods cost nothing.

Nodes of a pool are identical, so untouched nodes are just a count and only partially used
nodes are tracked one by one. The ledger never overcommits: a pod is charged to a node only
when every device it needs is free there, and a charge that cannot be honoured is counted as
overflow instead of being forced in.

Layer rule: pure (no I/O, no Temporal, no SDKs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

# Devices one pod needs, one slot per device of the pool (0 for devices it does not claim).
Demand = tuple[int, ...]
PoolKey = tuple[str, str]  # (cluster, pool)


@dataclass(frozen=True, slots=True)
class PodGroup:
    """``pods`` identical pods, each needing ``demand`` on a single node."""

    demand: Demand
    pods: int
    whole_node: bool

    @property
    def claims(self) -> bool:
        return any(self.demand)


@dataclass(slots=True)
class PoolLedger:
    capacity: Demand  # devices per node
    pristine: int  # nodes nothing runs on
    partial: list[list[int]] = field(default_factory=list)  # free devices of shared nodes
    overflow: int = 0  # pods that were charged but did not fit (a shrunken pool)
    # The charge order key of the last group charged, and whether every charge so far came in
    # that order: then charging one more group in order (``charge_after``) gives the state a
    # fresh charge of them all would.
    last_charge: tuple[bool, int] | None = None
    in_order: bool = True

    @classmethod
    def empty(cls, capacity: Demand, nodes: int) -> PoolLedger:
        return cls(capacity, max(nodes, 0))

    def copy(self) -> PoolLedger:
        return PoolLedger(
            self.capacity,
            self.pristine,
            [list(n) for n in self.partial],
            self.overflow,
            self.last_charge,
            self.in_order,
        )

    def charge(self, group: PodGroup) -> None:
        """Record a group already running (or decided) here; what does not fit is overflow."""
        self.overflow += group.pods - self.take(group)
        key = _charge_order(group)
        if self.last_charge is not None and key < self.last_charge:
            self.in_order = False
        self.last_charge = key

    def charge_after(self, group: PodGroup) -> bool:
        """Charge ``group`` if that leaves the state a fresh, sorted charge of everything charged
        here plus it gives (it sorts at or after every group charged so far, and those came in
        order); else change nothing and return False."""
        if not self.in_order or (
            self.last_charge is not None and _charge_order(group) < self.last_charge
        ):
            return False
        self.charge(group)
        return True

    @property
    def exhausted(self) -> bool:
        """No free device on any node (shared nodes left with nothing are dropped)."""
        return not self.partial and (self.pristine <= 0 or not any(self.capacity))

    def may_take(self, group: PodGroup) -> bool:
        """False only when ``take(group)`` surely places fewer than ``group.pods`` pods: a
        cheap, read-only test on the pool as it stands (no copy). True says nothing."""
        if not group.claims or group.pods <= 0:
            return True
        if group.whole_node:
            return self.pristine >= group.pods
        demand = group.demand
        if self.pristine > 0 and all(d <= c for d, c in zip(demand, self.capacity, strict=True)):
            return True
        return any(all(f >= d for f, d in zip(free, demand, strict=True)) for free in self.partial)

    def take(self, group: PodGroup, limit: int | None = None) -> int:
        """Place up to ``group.pods`` pods (or ``limit``) and return how many fit."""
        wanted = group.pods if limit is None else min(group.pods, limit)
        if not group.claims:
            return wanted
        if group.whole_node:
            taken = min(wanted, self.pristine)
            self.pristine -= taken
            return taken
        placed = 0
        while placed < wanted and self._take_partial(group.demand):
            placed += 1
        if placed < wanted:
            placed += self._take_pristine(group.demand, wanted - placed)
        return placed

    def _take_partial(self, demand: Demand) -> bool:
        # Best fit: the shared node left with the least free capacity, so that large gaps stay
        # available for large pods. Ties go to the oldest node, which keeps this deterministic.
        best = -1
        best_slack = -1
        for i, free in enumerate(self.partial):
            if all(f >= d for f, d in zip(free, demand, strict=True)):
                slack = sum(free) - sum(demand)
                if best < 0 or slack < best_slack:
                    best, best_slack = i, slack
        if best < 0:
            return False
        node = self.partial[best]
        for slot, d in enumerate(demand):
            node[slot] -= d
        if not any(node):
            del self.partial[best]
        return True

    def _take_pristine(self, demand: Demand, pods: int) -> int:
        """Open untouched nodes for ``pods`` pods that no shared node can take. Each new node
        is filled before the next is opened (the shared nodes had no room for this shape, so
        best fit would pick the new node every time); done in bulk, not pod by pod."""
        if self.pristine <= 0 or any(d > c for d, c in zip(demand, self.capacity, strict=True)):
            return 0
        per_node = min(c // d for c, d in zip(self.capacity, demand, strict=True) if d)
        full_nodes = min(pods // per_node, self.pristine)
        self.pristine -= full_nodes
        left = [c - per_node * d for c, d in zip(self.capacity, demand, strict=True)]
        if any(left):
            self.partial.extend(list(left) for _ in range(full_nodes))
        placed = full_nodes * per_node
        rest = pods - placed
        if 0 < rest < per_node and self.pristine > 0:
            self.pristine -= 1
            node = [c - rest * d for c, d in zip(self.capacity, demand, strict=True)]
            if any(node):
                self.partial.append(node)
            placed += rest
        return placed


def _charge_order(group: PodGroup) -> tuple[bool, int]:
    # Whole nodes first, then the largest shared pods: first-fit decreasing packs the pods that
    # are already running at least as tightly as they were placed.
    return (not group.whole_node, -sum(group.demand))


def _merged(groups: list[PodGroup]) -> Iterator[PodGroup]:
    """Runs of equal groups (same demand and kind) as one group of all their pods: taking
    ``a + b`` pods at once leaves the pool as taking ``a`` then ``b`` does (``take`` is
    specified pod by pod, and a pod that does not fit leaves the pool unchanged, so the pods
    after it do not fit either). Charging a cluster's hundred replicas of one shape so costs
    one take, not a hundred. Only neighbours merge, so the charge order is kept."""
    run: PodGroup | None = None
    for group in groups:
        if run is not None and group.demand == run.demand and group.whole_node == run.whole_node:
            run = PodGroup(run.demand, run.pods + group.pods, run.whole_node)
            continue
        if run is not None:
            yield run
        run = group
    if run is not None:
        yield run


class Ledger:
    """Free capacity of every pool in the fleet, built lazily: the first time a pool of a
    cluster is looked at, ``load_cluster`` is asked to charge what runs on that cluster, and
    each pool's charges are replayed when that pool is first looked at. A pass that places one
    replica on one of a thousand clusters so never reads the other clusters' replicas."""

    def __init__(
        self,
        load_cluster: Callable[[Ledger, str], None] | None = None,
        known_cluster: Callable[[str], Mapping[str, PoolLedger] | None] | None = None,
        known_exhausted: Callable[[str], bool | None] | None = None,
    ) -> None:
        self._pools: dict[PoolKey, PoolLedger] = {}
        self._pending: dict[PoolKey, list[PodGroup]] = {}
        self._load_cluster = load_cluster
        # Where a cluster not loaded yet may already be charged (the caller's cache): read by
        # ``peek`` only, never modified.
        self._known_cluster = known_cluster
        self._known_exhausted = known_exhausted
        self._loaded: set[str] = set()

    def charge(self, key: PoolKey, groups: Iterable[PodGroup]) -> None:
        """Record pods already running (or decided) on a pool."""
        claiming = [g for g in groups if g.claims and g.pods > 0]
        if not claiming:
            return
        if key in self._pools:
            pool = self._pools[key]
            for group in sorted(claiming, key=_charge_order):
                pool.charge(group)
        else:
            self._pending.setdefault(key, []).extend(claiming)

    def pool(self, key: PoolKey, capacity: Demand, nodes: int) -> PoolLedger:
        """The current state of a pool (``capacity``/``nodes`` describe it when first seen)."""
        pool = self._pools.get(key)
        if pool is None:
            cluster = key[0]
            if self._load_cluster is not None and cluster not in self._loaded:
                self._loaded.add(cluster)
                self._load_cluster(self, cluster)
                # The loader may have settled this pool itself (from a cache).
                pool = self._pools.get(key)
                if pool is not None:
                    return pool
            pool = PoolLedger.empty(capacity, nodes)
            for group in _merged(sorted(self._pending.pop(key, ()), key=_charge_order)):
                pool.charge(group)
            self._pools[key] = pool
        return pool

    def peek(self, key: PoolKey) -> PoolLedger | None:
        """The pool as it stands if that is known without loading or charging anything, else
        None. Read-only: the caller must not modify what it gets."""
        pool = self._pools.get(key)
        if pool is not None:
            return pool
        cluster = key[0]
        if cluster in self._loaded or self._known_cluster is None:
            return None
        known = self._known_cluster(cluster)
        return None if known is None else known.get(key[1])

    def exhausted(self, cluster: str) -> bool:
        """True when ``cluster``, not loaded yet, is known to have no free device in any pool
        (the caller's cache says so); False when it has room or nothing is known."""
        if cluster in self._loaded or self._known_exhausted is None:
            return False
        return self._known_exhausted(cluster) is True

    def replace(self, key: PoolKey, pool: PoolLedger) -> None:
        """Commit a trial copy of a pool."""
        self._pools[key] = pool
