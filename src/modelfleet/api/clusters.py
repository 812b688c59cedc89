"""InferenceCluster: a workload cluster that modelfleet provisions (GKE, EKS, AKS) or adopts
(Existing), with its GPU node pools and fleet-level taints. Pure models, no I/O.

Credentials never appear here: an Existing cluster names a kubeconfig that the worker resolves
from its own credentials directory; cloud clusters name a credentials profile the worker owns.
Every shape Modelplane's InferenceCluster accepts is accepted (AKS, Nebius and Vultr sources,
identity secrets, a BYO cache StorageClass); which of them modelfleet acts on is decided in
``api.support``, never by silently dropping a field.
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import Field

from modelfleet.api.meta import DNSLabel, Model, Resource
from modelfleet.api.schedulers import GangScheduler


class ClusterSource(StrEnum):
    GKE = "GKE"
    EKS = "EKS"
    AKS = "AKS"
    NEBIUS = "Nebius"
    VULTR = "Vultr"
    EXISTING = "Existing"


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    NO_EXECUTE = "NoExecute"


class SecretRef(Model):
    """Names a kubeconfig the worker resolves: ``<credentials dir>/<name>.yaml`` or a Secret."""

    name: str = Field(min_length=1, max_length=253)
    key: str = "kubeconfig"


class IdentityType(StrEnum):
    GOOGLE = "GoogleApplicationCredentials"
    AWS_WEB_IDENTITY = "AWSWebIdentityCredentials"
    NEBIUS = "NebiusServiceAccountCredentials"


class IdentitySecretRef(Model):
    """Names cloud-IAM credentials layered over the kubeconfig, resolved on the worker."""

    name: str = Field(min_length=1, max_length=253)
    key: str = "private_key"
    type: IdentityType = IdentityType.GOOGLE


class ExistingCache(Model):
    # A ReadWriteMany StorageClass the cluster's owner provides for ModelCache volumes.
    storage_class_name: str = Field(min_length=1, max_length=253)


class ExistingCluster(Model):
    # Defaults to a kubeconfig named after the cluster in the worker's credentials directory.
    secret_ref: SecretRef | None = None
    identity_secret_ref: IdentitySecretRef | None = None
    cache: ExistingCache | None = None


class CredentialsType(StrEnum):
    PROVIDER_CONFIG = "ProviderConfig"
    CLUSTER_PROVIDER_CONFIG = "ClusterProviderConfig"


class Credentials(Model):
    """A credentials profile resolved on the worker (never the credentials themselves).

    ``type`` is Modelplane's (which Crossplane config kind holds them); modelfleet resolves the
    profile by ``name`` either way."""

    type: CredentialsType = CredentialsType.CLUSTER_PROVIDER_CONFIG
    name: str = Field(default="default", min_length=1, max_length=253)


class GKECluster(Model):
    # Optional as in Modelplane: when absent the worker takes the project from the credentials
    # profile (the service account key's project_id, or the environment's default project).
    project: str | None = Field(default=None, min_length=1, max_length=63)
    region: str = Field(min_length=1)
    kubernetes_version: str = "1.35"
    credentials: Credentials = Field(default_factory=Credentials)


class EKSCluster(Model):
    region: str = Field(min_length=1)
    kubernetes_version: str = "1.36"
    credentials: Credentials = Field(default_factory=Credentials)


class AKSCluster(Model):
    location: str = Field(min_length=1)
    kubernetes_version: str = "1.34"
    credentials: Credentials = Field(default_factory=Credentials)


class NebiusCluster(Model):
    # Project and region come from the credentials profile, so the block may be empty.
    kubernetes_version: str = "1.34"
    credentials: Credentials = Field(default_factory=Credentials)


class VultrCluster(Model):
    region: str = Field(min_length=1)
    kubernetes_version: str = "v1.36.1+3"
    credentials: Credentials = Field(default_factory=Credentials)


class ClusterAccess(Model):
    source: ClusterSource
    existing: ExistingCluster | None = None
    gke: GKECluster | None = None
    eks: EKSCluster | None = None
    aks: AKSCluster | None = None
    nebius: NebiusCluster | None = None
    vultr: VultrCluster | None = None

    def block(self, source: ClusterSource) -> Model | None:
        """The sibling block that belongs to ``source``."""
        return {
            ClusterSource.EXISTING: self.existing,
            ClusterSource.GKE: self.gke,
            ClusterSource.EKS: self.eks,
            ClusterSource.AKS: self.aks,
            ClusterSource.NEBIUS: self.nebius,
            ClusterSource.VULTR: self.vultr,
        }[source]


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


class PoolFallback(Model):
    """Where else (zones) or as what else (className) to create a pool when the cloud reports a
    stockout: an unset field keeps the pool's own. Tried in the order listed."""

    zones: list[str] | None = Field(default=None, min_length=1, max_length=8)
    class_name: str | None = Field(default=None, min_length=1, max_length=63)


class NodePool(Model):
    name: DNSLabel = Field(max_length=40)
    class_name: str = Field(min_length=1, max_length=63)
    node_count: int = Field(default=1, ge=0)
    min_node_count: int | None = Field(default=None, ge=0)
    max_node_count: int | None = Field(default=None, ge=1)
    zones: list[str] = Field(default_factory=list)
    capacity_block: CapacityBlock | None = None
    fabric: Fabric | None = None
    # Alternatives when creating the pool meets a stockout (modelfleet's own field; provisioned
    # sources only): each replaces the pool's zones and/or class, tried in order.
    fallbacks: list[PoolFallback] = Field(default_factory=list, max_length=8)
    # The node label whose value is this pool's name; workloads pin to the pool with it. When
    # unset: ``modelplane.ai/pool`` in a modelplane.ai document, else ``modelfleet.dev/pool``.
    node_label: str | None = Field(default=None, min_length=1, max_length=316)

    @property
    def capacity_nodes(self) -> int:
        """Nodes the scheduler may count on when nothing is observed: max, else the count."""
        return self.max_node_count if self.max_node_count is not None else self.node_count


class NamespaceMode(StrEnum):
    # Every fleet namespace gets its own workload namespace ``mf-<ns>`` (the default).
    PER_TENANT = "PerTenant"
    # Workloads go into a namespace named like the deployment's own.
    DEPLOYMENT = "Deployment"


class GatewayRef(Model):
    name: str = Field(min_length=1, max_length=253)
    namespace: DNSLabel


class WorkloadSettings(Model):
    """How modelfleet lays out workloads on this cluster (modelfleet's own block, optional).

    Unset fields take the defaults of the document's API group, so a cluster prepared for
    Modelplane (gateway in ``modelplane-system``) works unchanged; see docs/modelplane.md."""

    namespace_mode: NamespaceMode = NamespaceMode.PER_TENANT
    gateway: GatewayRef | None = None


class InferenceClusterSpec(Model):
    cluster: ClusterAccess
    taints: list[Taint] = Field(default_factory=list)
    node_pools: list[NodePool] = Field(min_length=1, max_length=8)
    workloads: WorkloadSettings | None = None
    # The gang scheduler that admits this cluster's workloads (None: the default scheduler).
    scheduler: GangScheduler | None = None


class InferenceCluster(Resource):
    KIND: ClassVar[str] = "InferenceCluster"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("ic",)
    kind: Literal["InferenceCluster"] = "InferenceCluster"
    spec: InferenceClusterSpec
