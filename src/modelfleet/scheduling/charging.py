"""Charging the ledger: what each replica already running takes from its cluster's pools (per
pool, in charge order, from a replica or from its template's shape and pools), a ledger that
charges clusters as a fill looks at them, and the cache (``LedgerCache``) a caller such as the
Fleet keeps of charged clusters between placements, brought up to date as placed replicas are
booked.

Layer rule: pure (no I/O, no Temporal, no SDKs). It may touch the API's models, the CEL evaluator
(to stamp selectors onto pool shapes) and the scheduling layer's index, ledger and matching.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

from modelfleet.api.deployments import ModelReplica, Role
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.scheduling.index import FleetIndex, IndexedCluster
from modelfleet.scheduling.ledger import Ledger, PodGroup, PoolLedger
from modelfleet.scheduling.matching import stamped_demand

__all__ = ["LedgerCache", "book_into_cache", "build_ledger", "replica_groups", "shape_groups"]


class LedgerCache(dict[str, dict[str, PoolLedger]]):
    """Per cluster, its pools charged with every replica on it: a caller that keeps these
    between placements (the Fleet) drops a cluster's entry whenever a replica is added to or
    removed from it, and all of them whenever the snapshot changes. Entries are never modified
    in place (readers copy them), only replaced or dropped.

    It also answers, per entry, whether the cluster is exhausted (no free device in any pool):
    the free-room index that lets a fill step over full clusters in O(1). The answer is kept
    with the entry it was computed for, so a dropped or replaced entry is never answered for."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._exhausted: dict[str, tuple[dict[str, PoolLedger], bool]] = {}

    def exhausted(self, cluster: str) -> bool | None:
        """Whether ``cluster``'s cached pools have no free device at all; None when not cached."""
        entry = self.get(cluster)
        if entry is None:
            return None
        known = self._exhausted.get(cluster)
        if known is not None and known[0] is entry:
            return known[1]
        answer = all(pool.exhausted for pool in entry.values())
        self._exhausted[cluster] = (entry, answer)
        return answer

    def clear(self) -> None:
        super().clear()
        self._exhausted.clear()


def build_ledger(
    fleet: FleetIndex,
    replicas_by_cluster: Mapping[str, Collection[ModelReplica]],
    evaluator: SelectorEvaluator,
    *,
    cache: LedgerCache | None = None,
    uncacheable: Collection[str] = (),
) -> Ledger:
    """A ledger that charges every replica's stamped shape to its pinned pools, cluster by
    cluster as the fill looks at them. Replicas on pools no longer published use nothing.

    With a ``cache``, a cluster charged once is copied from it afterwards instead of charged
    again; ``uncacheable`` clusters (where ``replicas_by_cluster`` is not everything running
    there, e.g. without this deployment's removed replicas) neither read nor fill it. A cached
    pool is the same state a fresh charge gives, so placements do not depend on the cache."""

    def load_cluster(ledger: Ledger, name: str) -> None:
        cacheable = cache is not None and name not in uncacheable
        cached = cache.get(name) if cache is not None and cacheable else None
        if cached is not None:
            for pool_name, state in cached.items():
                ledger.replace((name, pool_name), state.copy())
            return
        _charge_cluster(ledger, name)
        if cache is not None and cacheable:
            cluster = fleet.by_name[name]
            cache[name] = {
                p.name: ledger.pool((name, p.name), p.shape.capacity, p.nodes).copy()
                for p in cluster.pools
            }

    def _charge_cluster(ledger: Ledger, name: str) -> None:
        cluster = fleet.by_name[name]
        for replica in replicas_by_cluster.get(name, ()):
            for pool_name, group in replica_groups(replica, cluster, evaluator):
                ledger.charge((name, pool_name), (group,))

    def known_cluster(name: str) -> Mapping[str, PoolLedger] | None:
        if cache is None or name in uncacheable:
            return None
        return cache.get(name)

    def exhausted(name: str) -> bool | None:
        # A plain dict (an older caller) is a cache without the index.
        if not isinstance(cache, LedgerCache) or name in uncacheable:
            return None
        return cache.exhausted(name)

    return Ledger(load_cluster, known_cluster, exhausted)


def replica_groups(
    replica: ModelReplica, cluster: IndexedCluster, evaluator: SelectorEvaluator
) -> Iterator[tuple[str, PodGroup]]:
    """What ``replica`` (placed on ``cluster``) charges, per pool, in charge order: its own
    template as the shape, with the pools its members were placed on."""
    pools = [m.node_pool_name for e in replica.spec.engines for m in e.members]
    return shape_groups(replica, pools, cluster, evaluator)


def shape_groups(
    shape: ModelReplica,
    pools: Sequence[str],
    cluster: IndexedCluster,
    evaluator: SelectorEvaluator,
) -> Iterator[tuple[str, PodGroup]]:
    """What a replica charges, as ``replica_groups``, given as its template's ``shape`` (any
    replica of it) and ``pools``, one per member in engine and member order (the Fleet's compact
    row): no replica object is built."""
    pool_names = iter(pools)
    for engine in shape.spec.engines:
        for member in engine.members:
            pool_name = next(pool_names, "")
            if not member.device_requests:
                continue
            pool = cluster.pools_by_name.get(pool_name)
            if pool is None:
                continue
            demand = stamped_demand(member.device_requests, pool.shape, evaluator)
            pods = member.pods * engine.copies
            yield pool.name, PodGroup(demand, pods, member.role is not Role.STANDALONE)


def book_into_cache(
    cache: LedgerCache,
    fleet: FleetIndex,
    placed: Sequence[ModelReplica],
    evaluator: SelectorEvaluator,
    *,
    uncacheable: Collection[str] = (),
) -> None:
    """Bring ``cache`` up to date with ``placed`` replicas that the caller books: each cluster
    that got one has its entry charged further where that gives exactly the state a fresh
    charge of all its replicas would (the new pods sort after everything charged there, see
    ``PoolLedger.charge_after``), and dropped otherwise. Saves recharging the cluster that
    just won a replica (typically the one the next placement tries first)."""
    by_cluster: dict[str, list[ModelReplica]] = {}
    for replica in placed:
        by_cluster.setdefault(replica.spec.cluster_name, []).append(replica)
    for name, replicas in by_cluster.items():
        entry = cache.pop(name, None)
        cluster = fleet.by_name.get(name)
        if entry is None or cluster is None or name in uncacheable:
            continue
        pools = {pool_name: state.copy() for pool_name, state in entry.items()}
        in_order = True
        for replica in replicas:
            for pool_name, group in replica_groups(replica, cluster, evaluator):
                if not group.claims or group.pods <= 0:
                    continue  # a fresh charge skips these too
                state = pools.get(pool_name)
                if state is None or not state.charge_after(group):
                    in_order = False
                    break
            if not in_order:
                break
        if in_order:
            cache[name] = pools
