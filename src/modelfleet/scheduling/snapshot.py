"""The fleet as the scheduler sees it: clusters, their readiness and taints, and their GPU pools
in declared order with the per-node devices of each pool's class.

Layer rule: ``modelfleet.scheduling`` is pure. No I/O, no Temporal, no SDKs. A snapshot is built
by whoever observes the fleet (the Fleet workflow from published capacity, ``modelfleet plan``
from manifests) and handed in; the scheduler never looks anything up itself.

Snapshots are values: treat them as immutable once built. The scheduler caches derived lookup
tables on a snapshot instance (not on its copies), so change a snapshot with ``model_copy``
rather than in place once it has been scheduled against.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field, PrivateAttr

from modelfleet.api.classes import ClassDevice, InferenceClass
from modelfleet.api.clusters import InferenceCluster, Taint
from modelfleet.api.meta import Model


class PoolSnapshot(Model):
    """One GPU node pool: ``nodes`` identical nodes, each carrying ``devices``."""

    name: str = Field(min_length=1)
    class_name: str = Field(min_length=1)
    # Published node count; a negative count (a bad report) is treated as 0.
    nodes: int = 0
    # Per-node devices, copied from the class.
    devices: list[ClassDevice] = Field(default_factory=list)


class QueueCapacity(Model):
    """The GPUs a cluster's gang-scheduler queue (a KAI Queue, a Kueue ClusterQueue) can admit,
    as its status last said: placement never puts more there than it has free."""

    scheduler: str = Field(min_length=1)  # "KAI" or "Kueue"
    name: str = Field(min_length=1)
    # None: the queue sets no GPU limit.
    total_gpus: int | None = None
    used_gpus: int = 0
    # Why the queue could not be read (not found, kind not served): it admits nothing.
    problem: str = ""

    @property
    def free_gpus(self) -> int | None:
        """GPUs it can still admit; None: no limit."""
        if self.problem:
            return 0
        if self.total_gpus is None:
            return None
        return max(0, self.total_gpus - self.used_gpus)


class ClusterSnapshot(Model):
    name: str = Field(min_length=1)
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)
    ready: bool = True
    # False when its last probe failed (however many more NotReady waits for): no new replicas.
    reachable: bool = True
    # A cluster without a gateway address cannot serve traffic, so it gets no new replicas.
    gateway_address: str | None = None
    pools: list[PoolSnapshot] = Field(default_factory=list)
    # ModelCaches by ``<namespace>/<name>`` and how each stands here (``Ready``, ``Hydrating
    # 40%``); a cache not listed is not staged here. None: unknown (an offline plan), so a
    # deployment's modelCacheRef does not restrict placement.
    caches: dict[str, str] | None = None
    # The gang scheduler's queue, when the cluster has one: GPUs beyond what it can still admit
    # would wait in the queue, so placement does not count them.
    queue: QueueCapacity | None = None

    @property
    def schedulable(self) -> bool:
        """Whether new replicas may go here (existing ones stay either way)."""
        return self.ready and self.reachable and bool(self.gateway_address)


class MissingClass(Model):
    """A pool left out of the snapshot because its InferenceClass does not exist."""

    cluster: str
    pool: str
    class_name: str

    @property
    def message(self) -> str:
        return (
            f"pool {self.pool!r} of cluster {self.cluster!r} references InferenceClass "
            f"{self.class_name!r}, which does not exist; the pool is left out"
        )


class FleetSnapshot(Model):
    clusters: list[ClusterSnapshot] = Field(default_factory=list)
    missing_classes: list[MissingClass] = Field(default_factory=list)

    # (weak reference to the owner, lookup tables) derived by ``scheduling.matching.fleet_index``.
    _derived: Any = PrivateAttr(default=None)


def planned_gateway_address(cluster: str) -> str:
    """A stand-in address for clusters that only exist on paper (``.invalid`` never resolves)."""
    return f"gateway.{cluster}.invalid"


def snapshot_from_manifests(
    classes: Sequence[InferenceClass], clusters: Sequence[InferenceCluster]
) -> FleetSnapshot:
    """The fleet as declared: every cluster Ready, with ``capacity_nodes`` nodes per pool and a
    placeholder gateway address. Pools whose class is missing are reported and left out."""
    by_name = {c.name: c for c in classes}
    snapshot = FleetSnapshot()
    for cluster in clusters:
        pools: list[PoolSnapshot] = []
        for pool in cluster.spec.node_pools:
            cls = by_name.get(pool.class_name)
            if cls is None:
                snapshot.missing_classes.append(
                    MissingClass(cluster=cluster.name, pool=pool.name, class_name=pool.class_name)
                )
                continue
            pools.append(
                PoolSnapshot(
                    name=pool.name,
                    class_name=pool.class_name,
                    nodes=pool.capacity_nodes,
                    devices=[d.model_copy(deep=True) for d in cls.spec.devices],
                )
            )
        snapshot.clusters.append(
            ClusterSnapshot(
                name=cluster.name,
                labels=dict(cluster.metadata.labels),
                taints=[t.model_copy() for t in cluster.spec.taints],
                ready=True,
                gateway_address=planned_gateway_address(cluster.name),
                pools=pools,
            )
        )
    return snapshot
