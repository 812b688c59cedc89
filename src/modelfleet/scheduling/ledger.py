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

from collections.abc import Iterable
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

    @classmethod
    def empty(cls, capacity: Demand, nodes: int) -> PoolLedger:
        return cls(capacity, max(nodes, 0))

    def copy(self) -> PoolLedger:
        return PoolLedger(
            self.capacity, self.pristine, [list(n) for n in self.partial], self.overflow
        )

    def take(self, group: PodGroup, limit: int | None = None) -> int:
        """Place up to ``group.pods`` pods (or ``limit``) and return how many fit."""
        wanted = group.pods if limit is None else min(group.pods, limit)
        if not group.claims:
            return wanted
        if group.whole_node:
            taken = min(wanted, self.pristine)
            self.pristine -= taken
            return taken
        for placed in range(wanted):
            if not self._take_shared(group.demand):
                return placed
        return wanted

    def room_for(self, group: PodGroup, limit: int) -> int:
        """How many of ``group``'s pods (at most ``limit``) would fit, without taking them."""
        return self.copy().take(group, limit)

    def _take_shared(self, demand: Demand) -> bool:
        # Best fit: the shared node left with the least free capacity, so that large gaps stay
        # available for large pods. Ties go to the oldest node, which keeps this deterministic.
        best = -1
        best_slack = -1
        for i, free in enumerate(self.partial):
            if all(f >= d for f, d in zip(free, demand, strict=True)):
                slack = sum(free) - sum(demand)
                if best < 0 or slack < best_slack:
                    best, best_slack = i, slack
        if best >= 0:
            node = self.partial[best]
            for slot, d in enumerate(demand):
                node[slot] -= d
            if not any(node):
                del self.partial[best]
            return True
        if self.pristine <= 0 or any(d > c for d, c in zip(demand, self.capacity, strict=True)):
            return False
        self.pristine -= 1
        rest = [c - d for c, d in zip(self.capacity, demand, strict=True)]
        if any(rest):
            self.partial.append(rest)
        return True

    @property
    def free_nodes(self) -> int:
        return self.pristine

    def used_devices(self, nodes: int) -> Demand:
        """Devices in use per slot, given the pool's published ``nodes``."""
        free = [self.pristine * c for c in self.capacity]
        for node in self.partial:
            for slot, f in enumerate(node):
                free[slot] += f
        return tuple(max(nodes, 0) * c - f for c, f in zip(self.capacity, free, strict=True))


def _charge_order(group: PodGroup) -> tuple[bool, int]:
    # Whole nodes first, then the largest shared pods: first-fit decreasing packs the pods that
    # are already running at least as tightly as they were placed.
    return (not group.whole_node, -sum(group.demand))


class Ledger:
    """Free capacity of every pool in the fleet, built lazily: charges are recorded per pool
    and only replayed when the scheduler first looks at that pool."""

    def __init__(self) -> None:
        self._pools: dict[PoolKey, PoolLedger] = {}
        self._pending: dict[PoolKey, list[PodGroup]] = {}

    def charge(self, key: PoolKey, groups: Iterable[PodGroup]) -> None:
        """Record pods already running (or decided) on a pool."""
        claiming = [g for g in groups if g.claims and g.pods > 0]
        if not claiming:
            return
        if key in self._pools:
            pool = self._pools[key]
            for group in sorted(claiming, key=_charge_order):
                pool.overflow += group.pods - pool.take(group)
        else:
            self._pending.setdefault(key, []).extend(claiming)

    def pool(self, key: PoolKey, capacity: Demand, nodes: int) -> PoolLedger:
        """The current state of a pool (``capacity``/``nodes`` describe it when first seen)."""
        pool = self._pools.get(key)
        if pool is None:
            pool = PoolLedger.empty(capacity, nodes)
            for group in sorted(self._pending.pop(key, ()), key=_charge_order):
                pool.overflow += group.pods - pool.take(group)
            self._pools[key] = pool
        return pool

    def replace(self, key: PoolKey, pool: PoolLedger) -> None:
        """Commit a trial copy of a pool."""
        self._pools[key] = pool
