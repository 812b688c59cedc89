"""Free devices per cluster and pool, as placement sees them: the live snapshot (ready nodes,
never more than declared; draining clusters included) charged with every replica in the fleet
through the same ledger the scheduler fills. ``get clusters`` shows this as FREE, so what the
table says is free is exactly what the next placement could use.

Layer rule: pure (no I/O, no Temporal, no SDKs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from modelfleet.api.classes import InferenceClass
from modelfleet.api.deployments import ModelReplica
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.scheduling.charging import build_ledger
from modelfleet.scheduling.fleet_placement import ObservedCluster, live_snapshot
from modelfleet.scheduling.index import fleet_index


@dataclass(frozen=True, slots=True)
class DeviceCount:
    device: str  # the class's device name, e.g. "gpu"
    free: int
    total: int


def free_devices(
    classes: Mapping[str, InferenceClass],
    clusters: Mapping[str, ObservedCluster],
    replicas: Sequence[ModelReplica],
    evaluator: SelectorEvaluator | None = None,
) -> dict[str, dict[str, list[DeviceCount]]]:
    """Per cluster, per pool: free and total claimable devices of each kind. Pools whose class
    the fleet lacks are left out (placement cannot use them either)."""
    index = fleet_index(live_snapshot(classes, clusters))
    by_cluster: dict[str, list[ModelReplica]] = {}
    for replica in replicas:
        by_cluster.setdefault(replica.spec.cluster_name, []).append(replica)
    ledger = build_ledger(index, by_cluster, evaluator or SelectorEvaluator())
    out: dict[str, dict[str, list[DeviceCount]]] = {}
    for cluster in index.clusters:
        pools: dict[str, list[DeviceCount]] = {}
        for pool in cluster.pools:
            state = ledger.pool((cluster.name, pool.name), pool.shape.capacity, pool.nodes)
            counts = []
            for slot, device in enumerate(pool.shape.devices):
                if not device.claimable:
                    continue
                per_node = pool.shape.capacity[slot]
                free = state.pristine * per_node + sum(node[slot] for node in state.partial)
                counts.append(DeviceCount(device.name, free, per_node * pool.nodes))
            pools[pool.name] = counts
        out[cluster.name] = pools
    return out


def summed(pools: Mapping[str, Sequence[DeviceCount]]) -> list[DeviceCount]:
    """Free and total per device kind across ``pools``, kinds in first-seen order."""
    totals: dict[str, tuple[int, int]] = {}
    for counts in pools.values():
        for c in counts:
            free, total = totals.get(c.device, (0, 0))
            totals[c.device] = (free + c.free, total + c.total)
    return [DeviceCount(name, free, total) for name, (free, total) in totals.items()]
