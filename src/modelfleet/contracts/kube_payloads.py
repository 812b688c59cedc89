"""Payloads of the Kubernetes activities (``kube.*``): what to apply, delete or wait for on which
cluster, and what came back.

Payloads name clusters, never carry credentials: the worker resolves a cluster's kubeconfig
from its own credentials directory inside the activity. Every model is a
:class:`~modelfleet.contracts.wire.WireModel`, so old and new workers read each other's payloads
(see there); every field added later needs a default.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from modelfleet.api.classes import DeviceAttribute, DeviceCapacity
from modelfleet.contracts.wire import WireModel
from modelfleet.rendering.facts import ClusterFacts
from modelfleet.rendering.readiness import ReadinessRule
from modelfleet.scheduling.snapshot import QueueCapacity


class ObjectRef(WireModel):
    api_version: str
    kind: str
    name: str
    namespace: str | None = None

    @classmethod
    def of(cls, manifest: dict[str, Any]) -> ObjectRef:
        meta = manifest.get("metadata", {})
        return cls(
            api_version=manifest["apiVersion"],
            kind=manifest["kind"],
            name=meta["name"],
            namespace=meta.get("namespace"),
        )

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


class ApplyRequest(WireModel):
    cluster: str
    manifests: list[dict[str, Any]]


class ApplyResult(WireModel):
    applied: list[ObjectRef]


class DeleteRequest(WireModel):
    cluster: str
    objects: list[ObjectRef]
    # A backstop after ``objects``: also delete every object of the same kinds and namespaces
    # carrying these labels (a replica's label), so an object applied under a name the
    # current renderer no longer produces is not orphaned. Empty: no sweep.
    sweep_labels: dict[str, str] = {}


class DeleteResult(WireModel):
    deleted: int
    absent: int
    # Of ``deleted``, how many only the label sweep found.
    swept: int = 0


class ReplicaSweepRequest(WireModel):
    """``kube.replicas_found`` lists the (namespace, replica) labels on objects of ``kinds``;
    ``kube.sweep_replicas`` deletes every object of ``kinds`` labelled with one of ``replicas``.
    Kinds a cluster does not serve are skipped."""

    cluster: str
    kinds: list[tuple[str, str]]  # (apiVersion, kind)
    replicas: list[tuple[str, str]] = []  # (deployment namespace, replica name)


class WaitReadyRequest(WireModel):
    cluster: str
    rules: list[ReadinessRule]
    # Absolute, so a retried activity (worker crash) keeps the original deadline.
    deadline: datetime
    # A workload whose container restarted this many times in CrashLoopBackOff is not waited
    # for until the deadline: the wait fails at once (0: never, and then neither does an image
    # that cannot be pulled for good).
    crash_loop_restarts: int = 0


class ReadyResult(WireModel):
    ready: bool
    reason: str
    # Not ready because the cluster itself says so (the object's readiness condition is False),
    # as opposed to one sample that found it missing or not yet judged.
    reported: bool = False
    # The most restarts of one container of the workload's pods (explained checks only).
    restarts: int = 0
    # A container of its pods waits in CrashLoopBackOff (explained checks only).
    backing_off: bool = False
    # A container of its pods cannot have its image, for good (the kubelet's words), and when
    # that pod started (explained checks only; "" and None otherwise).
    pull_error: str = ""
    pull_since: datetime | None = None


class KubeconfigRef(WireModel):
    """Names where the worker finds a cluster's kubeconfig (``existing.secretRef``): a file
    ``<name>.yaml`` or a mounted Secret ``<name>/<key>`` in its credentials directory. A name,
    never the credentials."""

    name: str
    key: str = "kubeconfig"


class ProbeRequest(WireModel):
    cluster: str
    # Unset: ``<cluster>.yaml``. The worker remembers it for the cluster's other activities.
    kubeconfig: KubeconfigRef | None = None
    # The cluster's own settings (pool labels, gateway); unset, the worker's defaults.
    facts: ClusterFacts | None = None


class DeviceGroup(WireModel):
    """The devices one DRA driver publishes on each counted node of a pool, as its
    ResourceSlices say: how many per node, and the attributes and capacity every one of them
    reports with the same value (per-device values such as a UUID are left out)."""

    driver: str
    count: int = Field(ge=0)
    attributes: dict[str, DeviceAttribute] = Field(default_factory=dict)
    capacity: dict[str, DeviceCapacity] = Field(default_factory=dict)


class PoolObservation(WireModel):
    nodes: int
    ready_nodes: int
    # Per driver, what the pool's ready, schedulable nodes publish in ResourceSlices. None: not
    # observed (the cluster serves no resource.k8s.io/v1, or an older worker); the class stands.
    devices: list[DeviceGroup] | None = None


class ProbeResult(WireModel):
    reachable: bool
    reason: str = ""
    version: str = ""
    gateway_address: str | None = None
    pools: dict[str, PoolObservation] = Field(default_factory=dict)
    # The gang scheduler's queue (KAI Queue, Kueue ClusterQueue), when the cluster has one.
    queue: QueueCapacity | None = None


class DriftRequest(WireModel):
    """Compare these manifests (as a replica applied them, in apply order) with the cluster."""

    cluster: str
    manifests: list[dict[str, Any]]


class DriftFound(WireModel):
    # Position in the request's manifests, so the caller re-applies exactly that manifest.
    index: int
    ref: ObjectRef
    # "missing", "terminating" or "changed" (``adapters.kube_drift.DriftKind``).
    kind: str
    reason: str


class DriftResult(WireModel):
    # In the request's order; empty: everything stands as applied.
    drifted: list[DriftFound] = []
