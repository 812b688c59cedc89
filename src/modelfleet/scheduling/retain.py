"""Retain and scale down: which of a deployment's existing replicas stay where they are.

A healthy replica is never moved. One is dropped (and so re-placed by the fill) only when its
cluster is gone or no longer selected, when another replica already holds its (cluster, index),
when its cluster carries an untolerated NoExecute taint, when the deployment's engines or member
roles changed, or when its pinned pool no longer satisfies the current selectors. Drift in a
pool's attributes while it still matches does not evict, and a degraded cluster (not Ready, no
gateway) keeps its replicas. Scale-down removes the replica that serves least first, by its
:class:`Standing` as the deployment reports it (failed, then not Ready, then of an older template,
then serving the current one); among equals the one with the largest (replicas of this deployment
on its cluster, cluster name, index), Modelplane's order.

Layer rule: pure (no I/O, no Temporal, no SDKs).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from modelfleet.api.deployments import Engine, ModelDeployment, ModelReplica, PlacedEngine
from modelfleet.api.meta import Model
from modelfleet.scheduling.index import FleetIndex, IndexedCluster, IndexedPool
from modelfleet.scheduling.matching import EnginePlan, Matcher, MemberMatch
from modelfleet.scheduling.stamp import EngineChoice
from modelfleet.scheduling.standing import REMOVE_FIRST, Standing
from modelfleet.scheduling.tolerations import EVICTS, describe_taint, first_untolerated


class VictimReason(StrEnum):
    SCALE_DOWN = "ScaleDown"
    CLUSTER_GONE = "ClusterGone"
    CLUSTER_NOT_SELECTED = "ClusterNotSelected"
    DUPLICATE_INDEX = "DuplicateIndex"
    NO_EXECUTE_TAINT = "NoExecuteTaint"
    SHAPE_CHANGED = "ShapeChanged"
    POOL_MISMATCH = "PoolMismatch"


class Victim(Model):
    """A replica of the deployment that should be removed, and why."""

    replica: ModelReplica
    reason: VictimReason
    message: str


@dataclass(frozen=True, slots=True)
class Retained:
    replica: ModelReplica  # as observed (the ledger charges this stamped shape)
    cluster: IndexedCluster
    choices: tuple[EngineChoice, ...]  # re-resolved against the current template

    @property
    def index(self) -> int:
        return self.replica.spec.index

    @property
    def cluster_name(self) -> str:
        return self.cluster.name


class _DroppedError(Exception):
    def __init__(self, reason: VictimReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def retain(
    deployment: ModelDeployment,
    plans: Sequence[EnginePlan],
    ours: Sequence[ModelReplica],
    fleet: FleetIndex,
    selected: Collection[str],
    matcher: Matcher,
) -> tuple[list[Retained], list[Victim]]:
    """Split ``ours`` (sorted by name, so the first name wins a collision) into the replicas
    that stay and the ones to remove."""
    tolerations = deployment.spec.template.spec.tolerations
    engines = deployment.spec.template.spec.engines
    kept: list[Retained] = []
    victims: list[Victim] = []
    holders: dict[tuple[str, int], str] = {}
    for replica in ours:
        try:
            cluster = _pinned_cluster(replica, fleet, selected)
            slot = (cluster.name, replica.spec.index)
            if slot in holders:
                raise _DroppedError(
                    VictimReason.DUPLICATE_INDEX,
                    f"replica index {slot[1]} on cluster {slot[0]!r} is already held by "
                    f"{holders[slot]}",
                )
            taint = first_untolerated(cluster.snapshot.taints, tolerations, EVICTS)
            if taint is not None:
                raise _DroppedError(
                    VictimReason.NO_EXECUTE_TAINT, f"untolerated taint {describe_taint(taint)}"
                )
            choices = _re_resolve(replica, cluster, engines, plans, matcher)
        except _DroppedError as drop:
            victims.append(Victim(replica=replica, reason=drop.reason, message=drop.message))
            continue
        holders[slot] = replica.name
        kept.append(Retained(replica, cluster, choices))
    return kept, victims


def scale_down(
    kept: list[Retained], desired: int, standing: Mapping[str, Standing] | None = None
) -> list[Victim]:
    """Remove replicas from ``kept`` until at most ``desired`` remain; return the victims.

    ``standing`` ranks replicas by name (absent: serving the current template): the least
    serving go first, so a scale-down or the scale-back after a failed surge never removes a
    healthy replica while a failed, not-Ready or outdated one remains. Ties keep Modelplane's
    order (the most loaded cluster, then the largest cluster name and index)."""
    standing = standing or {}
    load = Counter(r.cluster_name for r in kept)
    victims = []
    while len(kept) > max(desired, 0):
        victim = max(
            kept,
            key=lambda r: (
                -REMOVE_FIRST[standing.get(r.replica.name, Standing.SERVING)],
                load[r.cluster_name],
                r.cluster_name,
                r.index,
            ),
        )
        kept.remove(victim)
        load[victim.cluster_name] -= 1
        victims.append(
            Victim(
                replica=victim.replica,
                reason=VictimReason.SCALE_DOWN,
                message=f"scaled down to {desired} replicas",
            )
        )
    return victims


def _pinned_cluster(
    replica: ModelReplica, fleet: FleetIndex, selected: Collection[str]
) -> IndexedCluster:
    name = replica.spec.cluster_name
    cluster = fleet.by_name.get(name)
    if cluster is None:
        raise _DroppedError(
            VictimReason.CLUSTER_GONE, f"cluster {name!r} is no longer in the fleet"
        )
    if name not in selected:
        raise _DroppedError(
            VictimReason.CLUSTER_NOT_SELECTED,
            f"cluster {name!r} no longer matches the clusterSelector",
        )
    return cluster


def _shape_change(placed: Sequence[PlacedEngine], engines: Sequence[Engine]) -> str | None:
    if len(placed) != len(engines):
        return f"the template has {len(engines)} engines, the replica {len(placed)}"
    by_name = {e.name: e for e in placed}
    for engine in engines:
        old = by_name.get(engine.name)
        if old is None:
            return f"engine {engine.name!r} is not on the replica"
        was = sorted(m.role.value for m in old.members)
        now = sorted(m.role.value for m in engine.members)
        if was != now:
            return f"engine {engine.name!r} members changed from {'+'.join(was)} to {'+'.join(now)}"
    return None


def _re_resolve(
    replica: ModelReplica,
    cluster: IndexedCluster,
    engines: Sequence[Engine],
    plans: Sequence[EnginePlan],
    matcher: Matcher,
) -> tuple[EngineChoice, ...]:
    """The replica's pinned pools, checked against the current template."""
    change = _shape_change(replica.spec.engines, engines)
    if change is not None:
        raise _DroppedError(VictimReason.SHAPE_CHANGED, change)
    placed = {e.name: e for e in replica.spec.engines}
    choices = []
    for plan in plans:
        pinned = {m.role: m.node_pool_name for m in placed[plan.name].members}
        pools: list[IndexedPool] = []
        matches: list[MemberMatch] = []
        for member in plan.members:
            pool = cluster.pools_by_name.get(pinned[member.role])
            if pool is None:
                raise _DroppedError(
                    VictimReason.POOL_MISMATCH,
                    f"pool {pinned[member.role]!r} is no longer published on cluster "
                    f"{cluster.name!r}",
                )
            match = matcher.member(member.requests, pool.shape)
            if not match.ok:
                raise _DroppedError(
                    VictimReason.POOL_MISMATCH,
                    f"pool {pool.name!r} no longer satisfies device {match.failed_request!r} "
                    f"of engine {plan.name!r}",
                )
            pools.append(pool)
            matches.append(match)
        if not any(m.claims for m in matches):
            raise _DroppedError(
                VictimReason.POOL_MISMATCH,
                f"engine {plan.name!r} would claim no device on its pinned pools",
            )
        choices.append(EngineChoice(tuple(pools), tuple(matches)))
    return tuple(choices)
