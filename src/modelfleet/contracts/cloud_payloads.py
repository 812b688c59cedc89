"""The contract between the InferenceCluster workflow and the cloud activities (GKE, EKS, AKS):
activity names, the pool plans it sends and the references it gets back. Pure: no SDK imports,
no I/O, so workflows may import it freely.

Payloads name clusters, projects, regions and credentials *profiles* only. Tokens, keys and
kubeconfigs are made and kept on the worker (see ``modelfleet.adapters.cloud_config``).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import Field

from modelfleet.api.clusters import Taint
from modelfleet.contracts import error_types
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
GKE_LIST_NODE_POOLS = "gke.list_node_pools"
GKE_UPDATE_NODE_POOL = "gke.update_node_pool"
EKS_LIST_NODEGROUPS = "eks.list_nodegroups"
EKS_UPDATE_NODEGROUP = "eks.update_nodegroup"
AKS_CREATE_CLUSTER = "aks.create_cluster"
AKS_CREATE_AGENT_POOL = "aks.create_agent_pool"
AKS_DELETE_AGENT_POOL = "aks.delete_agent_pool"
AKS_DELETE_CLUSTER = "aks.delete_cluster"
AKS_KUBECONFIG = "aks.write_kubeconfig"
AKS_LIST_AGENT_POOLS = "aks.list_agent_pools"
AKS_UPDATE_AGENT_POOL = "aks.update_agent_pool"
FLEET_CLASSES = "fleet.classes"

# The label every node of a provisioned pool carries, and the owner tag/label on cloud
# resources, so a retried create can tell its own cluster from someone else's.
OWNER_LABEL = "modelfleet-dev_owner"


class CloudErrorReason(StrEnum):
    """Why a cloud call failed; each is an activity error type (``Cloud<reason>``)."""

    QUOTA_EXCEEDED = "QuotaExceeded"
    # Out of capacity in the zone (GCE ZONE_RESOURCE_POOL_EXHAUSTED, EC2
    # InsufficientInstanceCapacity): permanent for this attempt, gone later or elsewhere.
    STOCKOUT = "Stockout"
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


_ERROR_TYPES = {
    CloudErrorReason.QUOTA_EXCEEDED: error_types.CLOUD_QUOTA_EXCEEDED,
    CloudErrorReason.STOCKOUT: error_types.CLOUD_STOCKOUT,
    CloudErrorReason.PERMISSION_DENIED: error_types.CLOUD_PERMISSION_DENIED,
    CloudErrorReason.UNAUTHENTICATED: error_types.CLOUD_UNAUTHENTICATED,
    CloudErrorReason.INVALID_ARGUMENT: error_types.CLOUD_INVALID_ARGUMENT,
    CloudErrorReason.ALREADY_EXISTS: error_types.CLOUD_ALREADY_EXISTS,
    CloudErrorReason.NOT_FOUND: error_types.CLOUD_NOT_FOUND,
    CloudErrorReason.THROTTLED: error_types.CLOUD_THROTTLED,
    CloudErrorReason.UNAVAILABLE: error_types.CLOUD_UNAVAILABLE,
    CloudErrorReason.OPERATION_RUNNING: error_types.CLOUD_OPERATION_RUNNING,
    CloudErrorReason.RESOURCE_IN_USE: error_types.CLOUD_RESOURCE_IN_USE,
    CloudErrorReason.OPERATION_FAILED: error_types.CLOUD_OPERATION_FAILED,
}


def error_type(reason: CloudErrorReason) -> str:
    """The ApplicationError type an activity raises for ``reason`` (``Cloud<reason>``)."""
    return _ERROR_TYPES[reason]


def reason_of(error_type_: str | None) -> CloudErrorReason | None:
    """The reason an activity's error type stands for, or None when it is not a cloud's."""
    for reason, known in _ERROR_TYPES.items():
        if known == error_type_:
            return reason
    return None


# How the clouds word a stockout (GCE's ZONE_RESOURCE_POOL_EXHAUSTED[_WITH_DETAILS] and
# "does not have enough resources available"; EC2's InsufficientInstanceCapacity and EKS's
# "insufficient capacity"; Azure's SkuNotAvailable and AllocationFailed codes), lower case.
_STOCKOUT_WORDS = (
    "zone_resource_pool_exhausted",
    "does not have enough resources available",
    "insufficientinstancecapacity",
    "insufficient capacity",
    "skunotavailable",
    "allocationfailed",
    "overconstrainedallocationrequest",
)


def is_stockout(text: str) -> bool:
    """Whether a cloud's error text says it is out of capacity (not out of quota)."""
    lowered = text.lower()
    return any(word in lowered for word in _STOCKOUT_WORDS)


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
    # AKS
    vm_size: str | None = None
    # "Install" (AKS installs the NVIDIA driver on GPU VM sizes) or "None" (the image's own).
    gpu_driver: str | None = None


class PoolShape(WireModel):
    """A pool's size as the cloud holds it: a node count, and autoscaling bounds when the pool
    autoscales (GKE) or its scaling range (EKS; always set there)."""

    name: str
    node_count: int
    min_node_count: int | None = None
    max_node_count: int | None = None


def eks_scaling(plan: PoolPlan) -> tuple[int, int, int]:
    """(minSize, maxSize, desiredSize) of the node group a plan says; EKS wants max >= 1."""
    low = plan.min_node_count if plan.min_node_count is not None else plan.node_count
    high = plan.max_node_count if plan.max_node_count is not None else plan.node_count
    return low, max(high, 1), plan.node_count


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


class PoolChoice(WireModel):
    """What a pool was created as when its own zones or class were stocked out: the fallback's
    zones and class, which the fleet then schedules on."""

    zones: list[str] = []
    class_name: str


class ProvisioningState(WireModel):
    """What provisioning created so far; carried in the workflow input across continue-as-new."""

    cloud: CloudCluster | None = None
    created: list[CreatedRef] = []
    provisioned: bool = False
    # The steps so far, oldest first (bounded: see cluster/steps.py).
    steps: list[ClusterStep] = []
    # The nodePools[] (wire form) the cloud pools were last made to match; a spec whose pools
    # differ is reconciled. None: as provisioned (runs from before pool changes).
    pools_applied: list[dict[str, Any]] | None = None
    # Pools created as one of their fallbacks (by pool name); a pool absent here is as declared.
    chosen: dict[str, PoolChoice] = {}
