"""Why a replica did not fit, in words: one reason per cluster, and a kube-scheduler-style
summary such as ``0/5 clusters fit: 3 no pool satisfies device 'gpu' of engine 'decode'; 1 pool
'h200' has 1 free node, needs 2; 1 untolerated taint maintenance=true:NoSchedule``.

Reasons never contain the cluster's own name, so equal reasons aggregate in the summary.

Layer rule: pure (no I/O, no Temporal, no SDKs).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from modelfleet.scheduling.index import PoolShape
from modelfleet.scheduling.ledger import PodGroup, PoolLedger
from modelfleet.scheduling.snapshot import QueueCapacity

NOT_SELECTED = "not selected by clusterSelector"
NOT_READY = "not Ready"
# Its last probe failed: it may still count as Ready (NotReady takes several failed probes) but
# a new replica there would wait on an API nobody can reach.
UNREACHABLE = "unreachable: its last probe failed"
NO_GATEWAY = "no gateway address"


def cache_reason(cache: str, state: str | None) -> str:
    """A cluster where the deployment's ModelCache is not Ready (``state``: how it stands)."""
    if state is None:
        return f"model cache {cache} not staged on this cluster (its clusterSelector leaves it out)"
    return f"model cache {cache} not ready on this cluster ({state})"


def avoided_reason(why: str) -> str:
    """A cluster this deployment avoids for now, e.g. after a replica failed there."""
    return f"avoided for a while: {why}"


def queue_reason(queue: QueueCapacity, taken: int, needs: int) -> str | None:
    """Why a replica needing ``needs`` GPUs does not fit the cluster's gang-scheduler queue,
    of which this placement pass already took ``taken``; None when it fits."""
    if queue.problem:
        return f"queue {queue.name}: {queue.problem}"
    free = queue.free_gpus
    if free is None or needs <= free - taken:
        return None
    left = max(0, free - taken)
    return f"queue {queue.name}: {left} of {queue.total_gpus} GPUs free, needs {needs}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def describe_demand(demand: Sequence[int], shape: PoolShape) -> str:
    """``2 'gpu' + 16 'efa'``: what one pod claims, by device name."""
    parts = [f"{n} {shape.devices[slot].name!r}" for slot, n in enumerate(demand) if n]
    return " + ".join(parts) or "nothing"


def capacity_reason(
    pool: str, shape: PoolShape, state: PoolLedger, groups: Sequence[PodGroup]
) -> str:
    """Why ``groups`` (one engine's pods) do not fit in ``state``, the pool as it stands."""
    claiming = [g for g in groups if g.claims and g.pods]
    whole = [g for g in claiming if g.whole_node or tuple(g.demand) == shape.capacity]
    if len(whole) == len(claiming):
        needed = sum(g.pods for g in whole)
        return f"pool {pool!r} has {_plural(state.pristine, 'free node')}, needs {needed}"
    trial = state.copy()
    for group in claiming:
        room = trial.take(group)
        if room < group.pods:
            return (
                f"pool {pool!r} has room for {_plural(room, 'more pod')} of "
                f"{describe_demand(group.demand, shape)}, needs {group.pods}"
            )
    # Unreachable when the caller saw the engine fail, but stay truthful if it did not.
    return f"pool {pool!r} has too little free capacity"


def summarize(total: int, fitting: int, reasons: Mapping[str, str]) -> str:
    """``fitting/total clusters fit: <count> <reason>; ...``, most common reason first."""
    counts = Counter(reasons.values())
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    detail = "; ".join(f"{n} {reason}" for reason, n in ordered)
    head = f"{fitting}/{total} clusters fit"
    return f"{head}: {detail}" if detail else head
