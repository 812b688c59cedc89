"""The contract between the InferenceCluster workflow and the cloud activities (GKE, EKS):
activity names, the pool plans it sends and the references it gets back. Pure: no SDK imports,
no I/O, so workflows may import it freely.

Payloads name clusters, projects, regions and credentials *profiles* only. Tokens, keys and
kubeconfigs are made and kept on the worker (see ``modelfleet.adapters.cloud_config``).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field

from modelfleet.api.clusters import Taint
from modelfleet.contracts.wire import WireModel

# Activity names: dotted, so the Temporal UI timeline reads as the provisioning steps.
GKE_CREATE_CLUSTER = "gke.create_cluster"
GKE_CREATE_NODE_POOL = "gke.create_node_pool"
GKE_DELETE_NODE_POOL = "gke.delete_node_pool"
GKE_DELETE_CLUSTER = "gke.delete_cluster"
GKE_KUBECONFIG = "gke.write_kubeconfig"
EKS_CREATE_CLUSTER = "eks.create_cluster"
EKS_CREATE_NODEGROUP = "eks.create_nodegroup"
EKS_DELETE_NODEGROUP = "eks.delete_nodegroup"
EKS_DELETE_CLUSTER = "eks.delete_cluster"
EKS_KUBECONFIG = "eks.write_kubeconfig"
FLEET_CLASSES = "fleet.classes"

# The label every node of a provisioned pool carries, and the owner tag/label on cloud
# resources, so a retried create can tell its own cluster from someone else's.
OWNER_LABEL = "modelfleet-dev_owner"


class CloudErrorReason(StrEnum):
    """Why a cloud call failed; each is an activity error type (``Cloud<reason>``)."""

    QUOTA_EXCEEDED = "QuotaExceeded"
    PERMISSION_DENIED = "PermissionDenied"
    UNAUTHENTICATED = "Unauthenticated"
    INVALID_ARGUMENT = "InvalidArgument"
    ALREADY_EXISTS = "AlreadyExists"
    NOT_FOUND = "NotFound"
    THROTTLED = "Throttled"
    UNAVAILABLE = "Unavailable"
    OPERATION_RUNNING = "OperationRunning"
    RESOURCE_IN_USE = "ResourceInUse"
    OPERATION_FAILED = "OperationFailed"


# Retryable with backoff; everything else is permanent (retrying cannot help).
RETRYABLE_REASONS = frozenset(
    {
        CloudErrorReason.THROTTLED,
        CloudErrorReason.UNAVAILABLE,
        CloudErrorReason.OPERATION_RUNNING,
        CloudErrorReason.RESOURCE_IN_USE,
    }
)


def error_type(reason: CloudErrorReason) -> str:
    """The ApplicationError type an activity raises for ``reason``."""
    return f"Cloud{reason.value}"


class CloudCluster(WireModel):
    """Where a cloud cluster lives and which worker-side credentials profile reaches it."""

    name: str
    region: str
    project: str | None = None
    kubernetes_version: str
    credentials: str = "default"
    # Who owns it (the workflow ID): stamped on the cloud resource as a label/tag.
    owner: str


class PoolPlan(WireModel):
    """One node pool / node group to create, fully decided by the workflow's plan."""

    name: str
    class_name: str
    node_count: int = Field(ge=0)
    min_node_count: int | None = None
    max_node_count: int | None = None
    zones: list[str] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)
    disk_size_gb: int = 100
    # GKE
    machine_type: str | None = None
    accelerator_type: str | None = None
    accelerator_count: int | None = None
    # EKS
    instance_type: str | None = None
    ami_type: str | None = None
    capacity_reservation_id: str | None = None
    efa: bool = False


class PoolRequest(WireModel):
    cluster: CloudCluster
    pool: PoolPlan


class PoolRef(WireModel):
    cluster: CloudCluster
    pool: str


class CreateResult(WireModel):
    """What a create step made: ``created`` False means it already existed and is ours."""

    name: str
    created: bool
    status: str
    nodes: int = 0


class DeleteOutcome(WireModel):
    name: str
    existed: bool


class CreatedRef(WireModel):
    """Something the provisioning saga asked the cloud to create (recorded before the call)."""

    kind: str  # "cluster" or "pool"
    name: str


class ClusterStep(WireModel):
    """One step of bringing a cluster up (a cloud create or delete, the kubeconfig, the serving
    stack), with when it ran: what ``describe cluster`` and ``rollout status`` show."""

    name: str
    started: datetime
    finished: datetime | None = None
    # Why it failed ("" when it succeeded or still runs).
    error: str = ""


class ProvisioningState(WireModel):
    """What provisioning created so far; carried in the workflow input across continue-as-new."""

    cloud: CloudCluster | None = None
    created: list[CreatedRef] = []
    provisioned: bool = False
    # The steps so far, oldest first (bounded: see workflows/cluster_steps.py).
    steps: list[ClusterStep] = []
