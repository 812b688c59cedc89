"""Whether replicas a scheduler proposed for one cluster still fit there: the Fleet's capacity
check when it commits a proposal computed elsewhere (issue 22). The cluster's pools are charged
with what runs on it, then each new replica's pods are taken in the order the scheduler took
them (``fill._try_cluster``), so a proposal made on the same state passes exactly.

Layer rule: pure (no I/O, no Temporal, no SDKs). Costs the replicas on the one cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from modelfleet.api.deployments import ModelReplica
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.scheduling.charging import shape_groups
from modelfleet.scheduling.index import FleetIndex
from modelfleet.scheduling.ledger import Ledger

# A new replica as the check charges it: its name, its template's shape (any replica of it)
# and its pool per member in engine and member order (the Fleet's compact row).
NewReplica = tuple[str, ModelReplica, Sequence[str]]


def shortfall(
    index: FleetIndex,
    cluster: str,
    running: Iterable[tuple[ModelReplica, Sequence[str]]],
    new: Sequence[ModelReplica],
    evaluator: SelectorEvaluator,
) -> str | None:
    """Why ``new`` replicas do not all fit on ``cluster`` beside ``running`` ones (everything
    that stays there, each as its template's shape and its pools: see ``charging.shape_groups``),
    or None when they do."""
    return shortfall_of(
        index,
        cluster,
        running,
        [(r.name, r, [m.node_pool_name for e in r.spec.engines for m in e.members]) for r in new],
        evaluator,
    )


def shortfall_of(
    index: FleetIndex,
    cluster: str,
    running: Iterable[tuple[ModelReplica, Sequence[str]]],
    new: Sequence[NewReplica],
    evaluator: SelectorEvaluator,
) -> str | None:
    """``shortfall`` with the new replicas in their compact form (no replica object built)."""
    indexed = index.by_name.get(cluster)
    if indexed is None:
        return f"cluster {cluster} is not in the fleet"
    # A row must name a pool per member: one short would charge nothing for the rest.
    for name, shape, pools in new:
        if len(pools) != sum(len(e.members) for e in shape.spec.engines):
            return f"{name} names {len(pools)} pools for a template of other members"
    ledger = Ledger()
    for shape, pools in running:
        for pool_name, group in shape_groups(shape, pools, indexed, evaluator):
            ledger.charge((cluster, pool_name), (group,))
    for name, shape, pools in new:
        for pool_name, group in shape_groups(shape, pools, indexed, evaluator):
            pool = indexed.pools_by_name[pool_name]
            state = ledger.pool((cluster, pool_name), pool.shape.capacity, pool.nodes)
            if state.take(group) < group.pods:
                return f"pool {cluster}/{pool_name} has no room left for {name}"
    # A replica naming a pool the cluster does not publish charges nothing: refused, since
    # the scheduler never proposes one.
    for name, shape, pools in new:
        members = (m for e in shape.spec.engines for m in e.members)
        for member, pool_name in zip(members, pools, strict=True):
            if member.device_requests and pool_name not in indexed.pools_by_name:
                return f"{name} names pool {pool_name}, not on {cluster}"
    return None
