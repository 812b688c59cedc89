"""Payloads of the per-cluster replica watch (issue 11): a Ready ModelReplica registers with its
InferenceCluster workflow, which scans the cluster with one ``kube.scan_replicas`` activity per
probe and signals only the replicas whose health changed.

Layer rule: data only (WireModel, tolerant of unknown fields); workflows, activities and the
pure judge (``cluster.watch_decide``) import them.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from modelfleet.contracts.kube_payloads import KubeconfigRef
from modelfleet.contracts.wire import WireModel

# Signal names: replica -> cluster, cluster -> replica.
WATCH_REPLICA = "watch_replica"
UNWATCH_REPLICA = "unwatch_replica"
REPLICA_HEALTH = "replica_health"


class WatchedReplica(WireModel):
    """One replica the cluster watches, compact (a few hundred bytes: the whole map goes into
    every scan's input and the cluster's continue-as-new). The replica sends the first four
    fields (its registration); the cluster keeps the rest. The scan finds a replica's objects by
    its labels, so no object names travel."""

    key: str  # "<namespace>/<replica>", as its objects' namespace and replica labels say
    workflow_id: str
    # How many objects it applied (no Namespace): fewer found means some are missing.
    objects: int = Field(default=0, ge=0)
    # Consecutive failed scans before the replica is told it is unhealthy.
    threshold: int = Field(default=3, ge=1)
    # The replica's phase when it registered: Ready (True) or Degraded after a repair (False).
    healthy: bool = True
    # Digest of its objects (kind, namespace, name, metadata.generation) at the first scan that
    # found them all; "" not taken yet. Another digest later: an object was deleted, re-created
    # or its spec edited outside modelfleet.
    baseline: str = ""
    # The last scan's observation digest ("" none yet) and the judge's count.
    digest: str = ""
    failed_scans: int = 0
    # Whether the replica was told it is watched (the first scan after it registered does).
    acknowledged: bool = False
    # Told its cluster stopped answering (``unreachable`` news): the next scan that sees it
    # tells it what it finds, Ready or not (and clears this).
    unreachable: bool = False


class ScanRequest(WireModel):
    cluster: str
    kubeconfig: KubeconfigRef | None = None
    # The (apiVersion, kind) pairs to list (``cluster.orphans.REPLICA_KINDS`` but pods).
    kinds: list[tuple[str, str]]
    replicas: list[WatchedReplica]


class ReplicaScan(WireModel):
    """What one scan saw of one replica (``adapters.kube_scan.observe``)."""

    key: str
    ready: bool
    reason: str = ""
    # The readiness condition is False on a workload (the cluster says so), not just absent.
    reported: bool = False
    # Objects fewer than it applied (deleted, or being deleted).
    missing: int = 0
    # Its objects differ from the baseline (deleted and re-created, or spec edited).
    changed: bool = False
    # The baseline to keep: the entry's, or taken by this scan.
    baseline: str = ""
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
    # The first scan after a registration saw it: the replica is watched (no news otherwise).
    WATCHING = "watching"
    # The cluster's API stopped answering: nobody can tell how the replica is (Unknown).
    UNREACHABLE = "unreachable"


class HealthNews(WireModel):
    kind: NewsKind
    reason: str = ""
