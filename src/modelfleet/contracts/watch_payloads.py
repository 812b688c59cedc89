"""Payloads of the per-cluster replica watch (issue 11): a Ready ModelReplica registers with its
InferenceCluster workflow, which scans the cluster with one ``kube.scan_replicas`` activity per
probe and signals only the replicas whose health changed.

Layer rule: data only (WireModel, tolerant of unknown fields); workflows, activities and the
pure judge (``rollout.cluster_watch``) import them.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from modelfleet.contracts.kube_payloads import KubeconfigRef, ObjectRef
from modelfleet.contracts.wire import WireModel
from modelfleet.rendering.readiness import ReadinessRule

# Signal names: replica -> cluster, cluster -> replica.
WATCH_REPLICA = "watch_replica"
UNWATCH_REPLICA = "unwatch_replica"
REPLICA_HEALTH = "replica_health"


class WatchedReplica(WireModel):
    """One replica the cluster watches. The replica sends the first four fields (its
    registration); the cluster keeps the rest between scans and across continue-as-new."""

    key: str  # "<namespace>/<replica>"
    workflow_id: str
    # What the replica applied (no Namespace) and what must report Available.
    refs: list[ObjectRef]
    rules: list[ReadinessRule]
    # Consecutive failed scans before the replica is told it is unhealthy.
    threshold: int = Field(default=3, ge=1)
    # The replica's phase when it registered: Ready (True) or Degraded after a repair (False).
    healthy: bool = True
    # metadata.generation of each ref (aligned; 0: none) at the first scan after registering;
    # empty: not taken yet. A generation that moves means someone edited the spec.
    generations: list[int] = []
    # The last scan's observation digest ("" none yet) and the judge's count.
    digest: str = ""
    failed_scans: int = 0


class ScanRequest(WireModel):
    cluster: str
    kubeconfig: KubeconfigRef | None = None
    replicas: list[WatchedReplica]


class ReplicaScan(WireModel):
    """What one scan saw of one replica (``adapters.kube_scan.observe``)."""

    key: str
    ready: bool
    reason: str = ""
    # The readiness condition is False on the object (the cluster says so), not just absent.
    reported: bool = False
    missing: list[str] = []  # "Kind ns/name" of refs not found (or being deleted)
    drifted: list[str] = []  # refs whose generation moved since the baseline
    generations: list[int] = []
    digest: str = ""


class ScanResult(WireModel):
    # Only replicas whose observation changed or is not healthy: an idle, healthy fleet
    # answers with an empty list.
    changed: list[ReplicaScan] = []


class NewsKind(StrEnum):
    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"
    # Objects missing or edited outside modelfleet: compare and re-apply (drift repair).
    REPAIR = "repair"


class HealthNews(WireModel):
    kind: NewsKind
    reason: str = ""
