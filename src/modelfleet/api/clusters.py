"""InferenceCluster: a workload cluster that modelfleet provisions (GKE, EKS) or adopts
(Existing), with its GPU node pools and fleet-level taints. Pure models, no I/O.

Credentials never appear here: an Existing cluster names a kubeconfig that the worker resolves
from its own credentials directory; cloud clusters name a credentials profile the worker owns.
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import Field

from modelfleet.api.meta import DNSLabel, Model, Resource


class ClusterSource(StrEnum):
    GKE = "GKE"
    EKS = "EKS"
    EXISTING = "Existing"


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    NO_EXECUTE = "NoExecute"


class SecretRef(Model):
    """Names a kubeconfig the worker resolves: ``<credentials dir>/<name>.yaml`` or a Secret."""

    name: str = Field(min_length=1, max_length=253)
    key: str = "kubeconfig"


class ExistingCluster(Model):
    # Defaults to a kubeconfig named after the cluster in the worker's credentials directory.
    secret_ref: SecretRef | None = None


class Credentials(Model):
    """A credentials profile resolved on the worker (never the credentials themselves)."""

    name: str = Field(default="default", min_length=1, max_length=253)


class GKECluster(Model):
    project: str = Field(min_length=1, max_length=63)
    region: str = Field(min_length=1)
    kubernetes_version: str = "1.35"
    credentials: Credentials = Field(default_factory=Credentials)


class EKSCluster(Model):
    region: str = Field(min_length=1)
    kubernetes_version: str = "1.36"
    credentials: Credentials = Field(default_factory=Credentials)


class ClusterAccess(Model):
    source: ClusterSource
    existing: ExistingCluster | None = None
    gke: GKECluster | None = None
    eks: EKSCluster | None = None


class Taint(Model):
    key: str = Field(min_length=1, max_length=316)
    value: str = Field(default="", max_length=63)
    effect: TaintEffect


class CapacityBlock(Model):
    capacity_reservation_id: str = Field(pattern=r"^cr-[0-9a-f]+$", min_length=4, max_length=64)


class FabricType(StrEnum):
    NONE = "None"
    EFA = "EFA"
    INFINIBAND = "InfiniBand"


class InfiniBand(Model):
    fabric: str = Field(min_length=1)


class Fabric(Model):
    type: FabricType = FabricType.NONE
    infiniband: InfiniBand | None = None


class NodePool(Model):
    name: DNSLabel = Field(max_length=40)
    class_name: str = Field(min_length=1, max_length=63)
    node_count: int = Field(default=1, ge=0)
    min_node_count: int | None = Field(default=None, ge=0)
    max_node_count: int | None = Field(default=None, ge=1)
    zones: list[str] = Field(default_factory=list)
    capacity_block: CapacityBlock | None = None
    fabric: Fabric | None = None

    @property
    def capacity_nodes(self) -> int:
        """Nodes the scheduler may count on when nothing is observed: max, else the count."""
        return self.max_node_count if self.max_node_count is not None else self.node_count


class InferenceClusterSpec(Model):
    cluster: ClusterAccess
    taints: list[Taint] = Field(default_factory=list)
    node_pools: list[NodePool] = Field(min_length=1, max_length=8)


class InferenceCluster(Resource):
    KIND: ClassVar[str] = "InferenceCluster"
    kind: Literal["InferenceCluster"] = "InferenceCluster"
    spec: InferenceClusterSpec
