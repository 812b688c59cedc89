"""The contract between workflows and activities: activity names, task queue and the pydantic
payloads they exchange. Pure: no SDK imports, no I/O, so workflows may import it freely.

Payloads name clusters, never carry credentials: the worker resolves a cluster's kubeconfig
from its own credentials directory inside the activity.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelDeployment, ModelReplica
from modelfleet.api.meta import Condition, Model
from modelfleet.rendering.replica_manifests import ReadinessRule

TASK_QUEUE = "modelfleet"

# Activity names: dotted, so the Temporal UI timeline reads as the rollout's steps.
KUBE_APPLY = "kube.apply"
KUBE_DELETE = "kube.delete"
KUBE_WAIT_READY = "kube.wait_ready"
KUBE_CHECK_READY = "kube.check_ready"
KUBE_PROBE = "kube.probe"
FLEET_PLACE = "fleet.place"
FLEET_RELEASE = "fleet.release"
FLEET_PUBLISH_CLUSTER = "fleet.publish_cluster"
FLEET_REPLICAS_ON = "fleet.replicas_on"


class ObjectRef(Model):
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


class ApplyRequest(Model):
    cluster: str
    manifests: list[dict[str, Any]]


class ApplyResult(Model):
    applied: list[ObjectRef]


class DeleteRequest(Model):
    cluster: str
    objects: list[ObjectRef]


class DeleteResult(Model):
    deleted: int
    absent: int


class WaitReadyRequest(Model):
    cluster: str
    rules: list[ReadinessRule]
    # Absolute, so a retried activity (worker crash) keeps the original deadline.
    deadline: datetime
    poll_seconds: float = Field(default=1.0, gt=0)


class ReadyResult(Model):
    ready: bool
    reason: str


class ProbeRequest(Model):
    cluster: str


class PoolObservation(Model):
    nodes: int
    ready_nodes: int


class ProbeResult(Model):
    reachable: bool
    reason: str = ""
    version: str = ""
    gateway_address: str | None = None
    pools: dict[str, PoolObservation] = Field(default_factory=dict)


# --- Fleet: placement and release run as Updates on the Fleet workflow -----------------------


class PlaceRequest(Model):
    # Deterministic per caller step, so a retried activity does not place twice.
    request_id: str
    deployment: ModelDeployment
    desired: int
    # Clusters this deployment should not get new replicas on (recent failures there).
    avoid_clusters: list[str] = Field(default_factory=list)
    # Why, per avoided cluster: the replica that failed there and its reason.
    avoid_reasons: dict[str, str] = Field(default_factory=dict)


class Victim(Model):
    replica: ModelReplica
    reason: str


class PlaceResponse(Model):
    kept: list[ModelReplica] = Field(default_factory=list)
    placed: list[ModelReplica] = Field(default_factory=list)
    victims: list[Victim] = Field(default_factory=list)
    conditions: list[Condition] = Field(default_factory=list)
    rejections: dict[str, str] = Field(default_factory=dict)
    summary: str = ""


class ReleaseRequest(Model):
    namespace: str
    replicas: list[str]


class ClusterReport(Model):
    """What an InferenceCluster workflow publishes to the Fleet about its cluster."""

    name: str
    ready: bool
    reason: str = ""
    gateway_address: str | None = None
    observed_pools: dict[str, PoolObservation] = Field(default_factory=dict)
    since: datetime | None = None
    # Being deleted: its replicas are moved elsewhere before it leaves the fleet.
    draining: bool = False


class PublishRequest(Model):
    """What an InferenceCluster workflow tells the Fleet: a spec, a report, or a removal."""

    spec: InferenceCluster | None = None
    report: ClusterReport | None = None
    remove: str | None = None
