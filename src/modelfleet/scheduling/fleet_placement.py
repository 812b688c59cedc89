"""Placement against the live fleet: the entry point the Fleet workflow calls on every ``place``
Update. It turns what the Fleet knows of each cluster (its spec and what its workflow last
observed) into a scheduler snapshot and runs :func:`~modelfleet.scheduling.placement.place`.

Live capacity is what each cluster's workflow observed (ready nodes per pool, never more than
declared, with the devices their ResourceSlices report), falling back to the declared capacity
until a cluster has been probed. A draining cluster repels and evicts like a NoExecute taint. A
deployment that references a ModelCache gets new replicas only where that cache is staged or
being staged, Ready clusters first (as the cache's workflow reported it; ``cache_rule``).
Clusters NotReady past their grace period are left out, so their replicas are re-placed
elsewhere. A cluster whose last probe failed gets no new replica even while it still counts as
Ready (NotReady waits for several failed probes), and says so in the rejections even when every
replica fits elsewhere: a surge placed there would wait out its progress deadline.

Layer rule: pure (no I/O, no Temporal, no SDKs) and deterministic, so it can run inside a
workflow. The caller maps its own payloads onto these types; this module knows no activity or
workflow contract.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster, Taint, TaintEffect
from modelfleet.api.deployments import ModelDeployment, ModelReplica
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.scheduling.charging import LedgerCache
from modelfleet.scheduling.explain import UNREACHABLE, avoided_reason
from modelfleet.scheduling.observed_devices import DeviceReport, published_devices
from modelfleet.scheduling.placement import Placement, Standing, place
from modelfleet.scheduling.snapshot import (
    ClusterSnapshot,
    FleetSnapshot,
    MissingClass,
    PoolSnapshot,
    QueueCapacity,
)

DRAINING_TAINT = Taint(key="modelfleet.dev/draining", value="true", effect=TaintEffect.NO_EXECUTE)


@dataclass(frozen=True, slots=True)
class ObservedCluster:
    """What the Fleet knows of one cluster: its declared spec and its last observation."""

    spec: InferenceCluster
    ready: bool
    gateway_address: str | None = None
    # False when its last probe failed (its workflow reported it unreachable).
    reachable: bool = True
    # Ready nodes per pool as last observed; empty until the cluster was first probed.
    ready_nodes: Mapping[str, int] = field(default_factory=dict)
    # Being deleted: its replicas move elsewhere, or are removed with nowhere else to go.
    draining: bool = False
    # Per pool, the devices its hardware reports (see ``observed_devices``); pools left out
    # are published as their class declares.
    devices: Mapping[str, Sequence[DeviceReport]] = field(default_factory=dict)
    # ModelCaches staged here by ``<namespace>/<name>`` and how each stands (``Ready``, ...).
    caches: Mapping[str, str] = field(default_factory=dict)
    # The gang scheduler's queue as last observed (None: no gang scheduler, or not probed yet).
    queue: QueueCapacity | None = None


def live_snapshot(
    classes: Mapping[str, InferenceClass],
    clusters: Mapping[str, ObservedCluster],
    *,
    gone: Collection[str] = (),
) -> FleetSnapshot:
    """The fleet as the scheduler should see it now, clusters in name order, ``gone`` left out."""
    snapshot = FleetSnapshot()
    for name in sorted(clusters):
        if name in gone:
            continue
        cluster = clusters[name]
        pools: list[PoolSnapshot] = []
        for pool in cluster.spec.spec.node_pools:
            cls = classes.get(pool.class_name)
            if cls is None:
                snapshot.missing_classes.append(
                    MissingClass(cluster=name, pool=pool.name, class_name=pool.class_name)
                )
                continue
            if cluster.ready_nodes:
                nodes = min(cluster.ready_nodes.get(pool.name, 0), pool.capacity_nodes)
            else:
                nodes = pool.capacity_nodes
            pools.append(
                PoolSnapshot(
                    name=pool.name,
                    class_name=pool.class_name,
                    nodes=nodes,
                    devices=published_devices(cls.spec.devices, cluster.devices.get(pool.name)),
                )
            )
        taints = list(cluster.spec.spec.taints)
        if cluster.draining:
            # A drain evicts like a NoExecute taint: replicas move, and with nowhere else to go
            # they are removed (not frozen in place as a bad selector would be).
            taints.append(DRAINING_TAINT)
        snapshot.clusters.append(
            ClusterSnapshot(
                name=name,
                labels=dict(cluster.spec.metadata.labels),
                taints=taints,
                ready=cluster.ready,
                reachable=cluster.reachable,
                gateway_address=cluster.gateway_address,
                pools=pools,
                caches=dict(cluster.caches),
                queue=cluster.queue,
            )
        )
    return snapshot


def place_in_fleet(
    deployment: ModelDeployment,
    *,
    desired: int,
    classes: Mapping[str, InferenceClass],
    clusters: Mapping[str, ObservedCluster],
    replicas: Sequence[ModelReplica],
    gone: Collection[str] = (),
    avoid: Mapping[str, str] | None = None,
    evaluator: SelectorEvaluator | None = None,
    snapshot: FleetSnapshot | None = None,
    indexed: tuple[Sequence[ModelReplica], Mapping[str, Collection[ModelReplica]]] | None = None,
    ledger_cache: LedgerCache | None = None,
    retired: Collection[str] = (),
    standing: Mapping[str, Standing] | None = None,
    borrow: bool = False,
) -> Placement:
    """Where ``deployment``'s ``desired`` replicas run, given every placed replica in the fleet.

    ``gone`` clusters are left out of the fleet (NotReady past their grace period). ``avoid``
    maps clusters that get no new replica of this deployment for now to why; every avoided
    cluster appears in the rejections with that reason, even when all replicas fit elsewhere,
    so the deployment's status can say why it is not used; so does every cluster whose last
    probe failed (``unreachable_rejections``). Pass one ``evaluator`` across calls to reuse
    compiled selectors.

    A caller that keeps ``live_snapshot(classes, clusters, gone=gone)`` between placements
    passes it as ``snapshot`` (its index is cached on it, see ``scheduling.index``), and one that
    keeps its replicas indexed passes ``indexed`` (see ``placement.place``).
    """
    avoid = avoid or {}
    if snapshot is None:
        snapshot = live_snapshot(classes, clusters, gone=gone)
    result = place(
        deployment,
        snapshot,
        replicas,
        desired=desired,
        evaluator=evaluator,
        avoid=avoid,
        indexed=indexed,
        ledger_cache=ledger_cache,
        retired=retired,
        standing=standing,
        borrow=borrow,
    )
    unexplained = {c: avoided_reason(why) for c, why in avoid.items() if c not in result.rejections}
    unexplained.update(
        (c, why)
        for c, why in unreachable_rejections(snapshot).items()
        if c not in result.rejections and c not in unexplained
    )
    if not unexplained:
        return result
    return result.model_copy(update={"rejections": {**result.rejections, **unexplained}})


def unreachable_rejections(snapshot: FleetSnapshot) -> dict[str, str]:
    """The clusters of ``snapshot`` whose last probe failed, each with why it gets no new
    replica: placement skips them (``fill.static_reason``) but reports them only when it ran
    out of clusters, and a user whose surge went elsewhere should see why too."""
    return {c.name: UNREACHABLE for c in snapshot.clusters if not c.reachable}
