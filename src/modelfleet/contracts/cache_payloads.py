"""Payloads of the ModelCache workflow and its activities (``cache.*``): the per-cluster state the
workflow keeps, what an observation of one cluster found, the stage and clean-up requests, the
status ``get modelcaches`` shows and the facts the Fleet places by.

Payloads name clusters, caches and Secrets, never carry a credential: the auth token is read on
the worker inside ``cache.stage`` and goes straight into the cluster's Secret. Every model is a
:class:`~modelfleet.contracts.wire.WireModel` (see there); fields added later need a default.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import Field

from modelfleet.contracts.wire import WireModel

CACHE_STAGE = "cache.stage"
CACHE_OBSERVE = "cache.observe"
CACHE_CLEAN = "cache.clean"
CACHE_TARGETS = "cache.targets"
CACHE_REPORT = "cache.report"
CACHE_READINESS = "cache.readiness"


def cache_id(namespace: str, name: str) -> str:
    """The ModelCache workflow's ID."""
    return f"cache/{namespace}/{name}"


# What the Fleet records for a cluster where the cache is staged: placement needs exactly this.
READY = "Ready"


class CachePhase(StrEnum):
    PENDING = "Pending"
    HYDRATING = "Hydrating"
    READY = "Ready"
    FAILED = "Failed"
    DELETING = "Deleting"


class ClusterCache(WireModel):
    """The workflow's record of the cache on one cluster (small: a few strings and counters)."""

    cluster: str
    # The workload namespace on the cluster the volume lives in.
    namespace: str = ""
    phase: CachePhase = CachePhase.PENDING
    message: str = ""
    # The source digest being hydrated, and the one the volume holds (empty: nothing complete).
    digest: str = ""
    staged: str = ""
    bytes_done: int = 0
    bytes_total: int = 0
    # Failed attempts for ``digest`` and when the next may start.
    attempts: int = 0
    retry_at: datetime | None = None
    # The hydration Job created last (a revision change deletes the old one).
    job: str = ""
    updated: datetime | None = None

    @property
    def percent(self) -> int:
        if self.bytes_total <= 0:
            return 0
        return min(100, self.bytes_done * 100 // self.bytes_total)

    def summary(self, step: int = 1) -> str:
        """``Ready``, ``Hydrating 40%``, ``Pending: <why>``, ``Failed: <why>``: the words the
        Fleet repeats in a placement rejection and a replica in its wait step. ``step`` rounds
        the percentage down (what the Fleet is told changes less often)."""
        if self.phase is CachePhase.READY:
            return READY
        if self.phase is CachePhase.HYDRATING:
            return f"Hydrating {self.percent // step * step}%"
        return f"{self.phase.value}: {self.message}" if self.message else self.phase.value


class CacheObservation(WireModel):
    """One look at the cache's objects on one cluster."""

    claim: Literal["Absent", "Pending", "Bound", "Lost"] = "Absent"
    claim_message: str = ""
    job: Literal["Absent", "Active", "Succeeded", "Failed"] = "Absent"
    job_message: str = ""
    bytes_done: int = 0
    bytes_total: int = 0
    secret: bool = False
    # Workloads (Deployment/LeaderWorkerSet names) whose pods mount the claim, at most a few.
    mounted_by: list[str] = Field(default_factory=list)


class CacheObjects(WireModel):
    """Where the cache's objects are on one cluster."""

    cluster: str
    namespace: str
    claim: str
    job: str
    secret: str


class ObserveRequest(WireModel):
    objects: CacheObjects


class StageRequest(WireModel):
    """Apply what ``kinds`` names (``claim``, ``job``) from ``manifests``; with ``auth_secret``
    the worker also writes the token Secret (its value read on the worker, never here)."""

    objects: CacheObjects
    manifests: list[dict[str, Any]]
    # The Secret in the cache's namespace, as the worker holds it: ``<ns>/<name>`` and its key.
    auth_secret: str | None = None
    auth_key: str = "HF_TOKEN"
    secret_manifest: dict[str, Any] | None = None


class CleanRequest(WireModel):
    objects: CacheObjects
    # Every hydration Job of the cache on the cluster (any revision), with its pods.
    jobs: bool = False
    secret: bool = False
    claim: bool = False
    # The labels the cache's objects carry (how its Jobs of any revision are found).
    labels: dict[str, str] = Field(default_factory=dict)


class CacheTarget(WireModel):
    """A cluster the cache may be staged on, as the Fleet knows it."""

    cluster: str
    labels: dict[str, str] = Field(default_factory=dict)
    ready: bool = False
    namespace: str = ""
    # The cluster's own class for caches (``existing.cache.storageClassName``), if it names one.
    storage_class: str | None = None


class CacheReport(WireModel):
    """The cache's readiness per cluster, for the Fleet (an absent cluster: not staged there)."""

    namespace: str
    name: str
    clusters: dict[str, str] = Field(default_factory=dict)


class DeleteCache(WireModel):
    # Delete the volumes even where a workload still mounts them.
    force: bool = False


class CacheStatus(WireModel):
    namespace: str
    name: str
    repo: str = ""
    revision: str = ""
    size_gib: int = 0
    phase: str = ""
    ready: int = 0
    total: int = 0
    clusters: list[ClusterCache] = Field(default_factory=list)
    deleting: bool = False
    reason: str = ""


class CacheReadinessRequest(WireModel):
    namespace: str
    name: str
    cluster: str


class CacheReadiness(WireModel):
    ready: bool
    # ``Hydrating 40%`` and the like; ``not found`` when no such cache exists.
    summary: str
