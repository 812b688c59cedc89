"""Fill: placing the replicas a deployment is missing, one at a time, against the ledger.

For each missing replica every schedulable cluster is tried against a trial copy of its pools;
among the clusters that fit, the one with the fewest replicas of this deployment wins, then the
smallest name (spread, then pack); for a deployment mounting a ModelCache, clusters where the
cache is Ready come before those where it is still being staged (``cache_rule``). Within a
cluster each engine goes whole onto the first pool, in declared order, that satisfies every
member and has room; later engines see what earlier ones took. The replica gets the lowest
index free on its cluster.

Trying clusters in (load, name) order and stopping at the first fit gives the same answer as
trying them all. A cluster that failed once keeps failing for the rest of the pass (matching
does not change and only the chosen cluster loses capacity), so its reason is kept and it is
not tried again; when nothing fits, those reasons are the explanation.

What replicas already running take from the pools (the ledger's charges and its cache) is
``charging``'s. Layer rule: pure (no I/O, no Temporal, no SDKs).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from modelfleet.api.deployments import ModelDeployment
from modelfleet.api.naming import replica_name
from modelfleet.scheduling.cache_rule import CacheRank, cache_rank
from modelfleet.scheduling.explain import (
    NO_GATEWAY,
    NOT_READY,
    NOT_SELECTED,
    UNREACHABLE,
    avoided_reason,
    cache_reason,
    capacity_reason,
    queue_reason,
)
from modelfleet.scheduling.index import FleetIndex, IndexedCluster, PoolShape
from modelfleet.scheduling.ledger import Ledger, PoolLedger
from modelfleet.scheduling.matching import EngineOptions, EnginePlan, Matcher
from modelfleet.scheduling.stamp import EngineChoice
from modelfleet.scheduling.tolerations import REPELS_NEW, describe_taint, first_untolerated

# A replica's engines placed on a cluster, that cluster's pools as they would be after, and the
# GPUs the replica claims there (what a gang scheduler's queue must admit).
_Fit = tuple[tuple[EngineChoice, ...], dict[str, PoolLedger], int]


@dataclass(frozen=True, slots=True)
class NewReplica:
    cluster: str
    index: int
    choices: tuple[EngineChoice, ...]


@dataclass(frozen=True, slots=True)
class FillResult:
    placed: list[NewReplica]
    # Per cluster, why the last replica that was tried did not fit; empty when all fit.
    rejections: dict[str, str]


def static_reason(
    cluster: IndexedCluster,
    deployment: ModelDeployment,
    selected: Collection[str],
    avoid: Mapping[str, str],
) -> str | None:
    """Why no new replica of ``deployment`` can go to ``cluster`` whatever its capacity."""
    if cluster.name not in selected:
        return NOT_SELECTED
    tolerations = deployment.spec.template.spec.tolerations
    taint = first_untolerated(cluster.snapshot.taints, tolerations, REPELS_NEW)
    if taint is not None:
        return f"untolerated taint {describe_taint(taint)}"
    why_avoided = avoid.get(cluster.name)
    if why_avoided is not None:
        return avoided_reason(why_avoided)
    if not cluster.snapshot.reachable:
        return UNREACHABLE
    if not cluster.snapshot.ready:
        return NOT_READY
    if not cluster.snapshot.gateway_address:
        return NO_GATEWAY
    return _cache_problem(cluster, deployment)


def _cache_state(cluster: IndexedCluster, deployment: ModelDeployment) -> tuple[str, str | None]:
    """The deployment's ModelCache and how it stands on ``cluster``; ("", None) when the
    deployment mounts none or the snapshot does not know (an offline plan)."""
    ref = deployment.spec.template.spec.model_cache_ref
    caches = cluster.snapshot.caches
    if ref is None or caches is None:
        return "", None
    return ref.name, caches.get(f"{deployment.namespace}/{ref.name}")


def _cache_problem(cluster: IndexedCluster, deployment: ModelDeployment) -> str | None:
    """A deployment that mounts a ModelCache goes only where the cache is staged or being
    staged (``cache_rule``): elsewhere its replicas would never get weights."""
    cache, state = _cache_state(cluster, deployment)
    if not cache or cache_rank(state) is not None:
        return None
    return cache_reason(cache, state)


def _cache_order(cluster: IndexedCluster, deployment: ModelDeployment) -> CacheRank:
    """Where the cache is Ready comes before where it is still being staged."""
    cache, state = _cache_state(cluster, deployment)
    return (cache_rank(state) or CacheRank.READY) if cache else CacheRank.READY


def fill(
    deployment: ModelDeployment,
    *,
    plans: Sequence[EnginePlan],
    missing: int,
    fleet: FleetIndex,
    selected: Collection[str],
    avoid: Mapping[str, str],
    taken: Iterable[tuple[str, int]],
    load: Counter[str],
    ledger: Ledger,
    matcher: Matcher,
    skip_full: bool = True,
    retired: Collection[str] = (),
) -> FillResult:
    """Place up to ``missing`` replicas of ``deployment``, whose engines ``plans`` describes, on
    the ``selected`` clusters of ``fleet``, except those in ``avoid`` (cluster -> why).
    ``taken`` holds the (cluster, index) pairs already in use; ``load`` counts this
    deployment's replicas per cluster. ``load`` and ``ledger`` are updated as replicas are
    placed.

    ``skip_full`` (the free-room check): a cluster whose charged pools are already known (the
    caller's ledger cache, or charged earlier in this pass) and surely lack room for some
    engine is stepped over without copying its pools or building its reason; only when no
    cluster fits is it tried for real, for its reason. Capacity only shrinks during a pass and
    only on the cluster that wins, so such a cluster never fits later in the pass either: the
    answer is the one the plain walk gives (``skip_full=False``), which the tests check.

    Each new replica takes the lowest index free on its cluster whose name is not ``retired``
    (replicas of this deployment that left lately: a name is never given to a new replica
    while logs and links by that name still mean the one before)."""
    retired = frozenset(retired)
    occupied: dict[str, set[int]] = {}
    for cluster_name, index in taken:
        occupied.setdefault(cluster_name, set()).add(index)
    rejected: dict[str, str] = {}
    full: set[str] = set()  # stepped over: no room, reason not built yet
    claims: dict[int, bool] = {}
    placed: list[NewReplica] = []
    # GPUs this pass placed per cluster, against what its gang scheduler's queue can admit.
    queued: Counter[str] = Counter()

    def attempt(cluster: IndexedCluster) -> _Fit | str:
        outcome = _try_cluster(cluster, plans, ledger, matcher)
        queue = cluster.snapshot.queue
        if isinstance(outcome, str) or queue is None:
            return outcome
        # The queue's usage lags: replicas placed earlier but not admitted yet are not in it.
        # Whichever is larger counts, what it reported plus this pass's placements or every
        # GPU modelfleet's own replicas hold on the cluster, so the lag never overbooks it.
        own = _charged_gpus(cluster, ledger) - queue.used_gpus
        return queue_reason(queue, max(queued[cluster.name], own), outcome[2]) or outcome

    for _ in range(missing):
        chosen: tuple[IndexedCluster, _Fit] | None = None
        for cluster in _by_preference(fleet, load, deployment):
            if cluster.name in rejected or cluster.name in full:
                continue
            why = static_reason(cluster, deployment, selected, avoid)
            if why is None and skip_full and _surely_full(cluster, plans, ledger, matcher, claims):
                full.add(cluster.name)
                continue
            outcome = why or attempt(cluster)
            if isinstance(outcome, str):
                rejected[cluster.name] = outcome
                continue
            chosen = (cluster, outcome)
            break
        else:
            # Nothing with room fits: try the stepped-over clusters for real, in the same
            # order, so that each gets its reason (and, were the check ever wrong, one that
            # fits would still be used).
            for cluster in _by_preference(fleet, load, deployment):
                if cluster.name not in full:
                    continue
                full.discard(cluster.name)
                outcome = attempt(cluster)
                if isinstance(outcome, str):
                    rejected[cluster.name] = outcome
                    continue
                chosen = (cluster, outcome)
                break
        if chosen is None:
            # Every cluster was tried (or ruled out) for this replica, so each has a reason.
            return FillResult(placed, {c.name: rejected[c.name] for c in fleet.clusters})
        cluster, (choices, trial, gpus) = chosen
        queued[cluster.name] += gpus
        for pool_name, state in trial.items():
            ledger.replace((cluster.name, pool_name), state)
        used = occupied.setdefault(cluster.name, set())
        index = next(
            i
            for i in itertools.count()
            if i not in used
            and (
                not retired
                or replica_name(deployment.namespace, deployment.name, cluster.name, i)
                not in retired
            )
        )
        used.add(index)
        load[cluster.name] += 1
        placed.append(NewReplica(cluster.name, index, choices))
    return FillResult(placed, {})


def _surely_full(
    cluster: IndexedCluster,
    plans: Sequence[EnginePlan],
    ledger: Ledger,
    matcher: Matcher,
    claims: dict[int, bool],
) -> bool:
    """True when some engine has pools that match but none of them, as the ledger already
    knows them, has room for it (``PoolLedger.may_take``). False when unsure: a pool not
    charged yet, or an engine with no matching pool at all (its reason is static and cheap).

    A cluster the cache knows as exhausted is decided without looking at its pools: every
    engine option claims a device somewhere (``Matcher`` offers none otherwise), so none fits.
    """
    engines = [matcher.engine(number, plan, cluster) for number, plan in enumerate(plans)]
    if any(not options.options for options in engines):
        return False
    if ledger.exhausted(cluster.name) and any(_claims(o, claims) for o in engines):
        return True
    for options in engines:
        room = False
        for option in options.options:
            state = ledger.peek((cluster.name, cluster.pools[option.position].name))
            if state is None:
                return False
            if all(state.may_take(group) for group in option.groups):
                room = True
                break
        if not room:
            return True
    return False


def _claims(options: EngineOptions, memo: dict[int, bool]) -> bool:
    """Whether every option of an engine needs at least one free device. ``memo`` is by
    identity: the matcher hands out one EngineOptions per cluster shape for the whole pass."""
    known = memo.get(id(options))
    if known is None:
        known = memo[id(options)] = all(
            any(g.claims and g.pods > 0 for g in o.groups) for o in options.options
        )
    return known


def _by_preference(
    fleet: FleetIndex, load: Counter[str], deployment: ModelDeployment
) -> Iterator[IndexedCluster]:
    """Clusters by (load, name), except that for a deployment mounting a ModelCache those where
    the cache is Ready all come before those where it is still being staged."""
    if deployment.spec.template.spec.model_cache_ref is None:
        yield from _by_load_then_name(fleet, load)
        return
    later: list[IndexedCluster] = []
    for cluster in _by_load_then_name(fleet, load):
        if _cache_order(cluster, deployment) is CacheRank.READY:
            yield cluster
        else:
            later.append(cluster)
    yield from later


def _by_load_then_name(fleet: FleetIndex, load: Counter[str]) -> Iterator[IndexedCluster]:
    """Clusters by (replicas of this deployment on them, name), without sorting the fleet:
    the few clusters that hold a replica go last, in their own order."""
    loaded = sorted((n for n, count in load.items() if count > 0), key=lambda n: (load[n], n))
    for cluster in fleet.in_name_order:
        if not load[cluster.name]:
            yield cluster
    for name in loaded:
        yield fleet.by_name[name]


def _try_cluster(
    cluster: IndexedCluster, plans: Sequence[EnginePlan], ledger: Ledger, matcher: Matcher
) -> _Fit | str:
    """The replica's engines placed on ``cluster``, and the pools as they would be after; or
    the reason it does not fit."""
    trial: dict[str, PoolLedger] = {}
    choices: list[EngineChoice] = []
    gpus = 0
    for number, plan in enumerate(plans):
        options = matcher.engine(number, plan, cluster)
        if not options.options:
            return options.reason or "no pool fits"
        shortage: str | None = None
        for option in options.options:
            pool = cluster.pools[option.position]
            state = trial.get(pool.name)
            if state is None:
                state = ledger.pool((cluster.name, pool.name), pool.shape.capacity, pool.nodes)
            attempt = state.copy()
            if all(attempt.take(group) == group.pods for group in option.groups):
                trial[pool.name] = attempt
                members = len(option.matches)
                choices.append(EngineChoice((pool,) * members, option.matches))
                slots = _gpu_slots(pool.shape)
                gpus += sum(g.demand[i] * g.pods for g in option.groups if g.claims for i in slots)
                break
            if shortage is None:
                shortage = capacity_reason(pool.name, pool.shape, state, option.groups)
        else:
            return shortage or "no pool fits"
    return tuple(choices), trial, gpus


def _charged_gpus(cluster: IndexedCluster, ledger: Ledger) -> int:
    """GPUs the ledger has handed out on ``cluster``: every replica placed there so far."""
    total = 0
    for pool in cluster.pools:
        slots = _gpu_slots(pool.shape)
        if not slots:
            continue
        state = ledger.pool((cluster.name, pool.name), pool.shape.capacity, pool.nodes)
        for slot in slots:
            per_node = pool.shape.capacity[slot]
            free = max(0, state.pristine) * per_node + sum(node[slot] for node in state.partial)
            total += max(0, per_node * pool.nodes - free)
    return total


def _gpu_slots(shape: PoolShape) -> tuple[int, ...]:
    """The device slots of ``shape`` that are GPUs (a DeviceClass such as ``gpu.nvidia.com``):
    what a gang scheduler's queue counts."""
    return tuple(
        slot
        for slot, device in enumerate(shape.devices)
        if device.claimable and "gpu" in device.device_class_name.split(".")
    )
