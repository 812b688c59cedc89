"""Provisioning alternatives: a pool's ``fallbacks`` (other zones, other classes) tried in order
when the cloud reports a stockout. Pure: which alternative comes next given the attempts so
far, how an attempt is named in the step log, and the cluster as it was really created (a pool
created as a fallback is scheduled as what it is). The workflow carries the decisions out.

Only a stockout moves on: quota, permission or a rejected request would fail the same way
elsewhere (or needs a person), so they end the attempts and the saga compensates as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from modelfleet.api.clusters import InferenceCluster, NodePool
from modelfleet.contracts.cloud_payloads import CloudErrorReason, PoolChoice


def alternatives(pool: NodePool) -> list[NodePool]:
    """The pool itself, then each fallback applied to it (unset fields keep the pool's)."""
    out = [pool]
    for fallback in pool.fallbacks:
        update: dict[str, object] = {"fallbacks": []}
        if fallback.zones is not None:
            update["zones"] = list(fallback.zones)
        if fallback.class_name is not None:
            update["class_name"] = fallback.class_name
        out.append(pool.model_copy(update=update))
    return out


def next_alternative(count: int, outcomes: Sequence[CloudErrorReason | None]) -> int | None:
    """The index of the alternative to try next, of ``count`` in order, given the outcomes of
    the attempts so far (None: created; else the cloud's reason it failed). None when there
    is nothing more to try: one was created, one failed for a reason other than a stockout, or
    every alternative was stocked out."""
    if not outcomes:
        return 0 if count > 0 else None
    last = outcomes[-1]
    if last is not CloudErrorReason.STOCKOUT:
        return None
    following = len(outcomes)
    return following if following < count else None


def attempt_name(word: str, pool: NodePool, alternative: NodePool) -> str:
    """The step of one attempt: ``create node pool gpu`` for a pool without fallbacks (as
    before), else where and as what it is tried, so each attempt is its own line."""
    base = f"create {word} {pool.name}"
    if not pool.fallbacks:
        return base
    where = f" in {', '.join(alternative.zones)}" if alternative.zones else ""
    return f"{base}{where} as {alternative.class_name}"


def choice(pool: NodePool, alternative: NodePool) -> PoolChoice | None:
    """What to remember of a created alternative: None when it is the pool as declared."""
    if alternative.zones == pool.zones and alternative.class_name == pool.class_name:
        return None
    return PoolChoice(zones=list(alternative.zones), class_name=alternative.class_name)


def as_created(spec: InferenceCluster, chosen: Mapping[str, PoolChoice]) -> InferenceCluster:
    """The cluster with each pool created as a fallback shown as what was created (its zones
    and class), for the fleet, which places replicas by a pool's class."""
    if not any(p.name in chosen for p in spec.spec.node_pools):
        return spec
    pools = [
        p.model_copy(update={"zones": list(c.zones), "class_name": c.class_name})
        if (c := chosen.get(p.name)) is not None
        else p
        for p in spec.spec.node_pools
    ]
    return spec.model_copy(update={"spec": spec.spec.model_copy(update={"node_pools": pools})})
