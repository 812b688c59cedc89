"""Modelplane's internal kinds (group ``infrastructure.modelplane.ai``): the per-cloud cluster
kinds (GKECluster, EKSCluster, AKSCluster, NebiusCluster, VultrCluster) and ServingStack. An
InferenceCluster composes them in Modelplane; modelfleet provisions and prepares clusters from the
InferenceCluster itself, so these documents are validated, listed and reported as not acted upon
(``api.support``), never silently dropped. Pure models, no I/O.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import Field

from modelfleet.api.clusters import CapacityBlock, Credentials, Fabric
from modelfleet.api.meta import (
    INFRASTRUCTURE_API_VERSION,
    INFRASTRUCTURE_API_VERSIONS,
    Model,
    Resource,
)

# AKS pool names: a lowercase letter then up to 11 lowercase letters or digits.
AKS_POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")


class PoolRole(StrEnum):
    SYSTEM = "System"
    GPU = "GPU"


class PoolGpu(Model):
    accelerator_type: str = Field(min_length=1, max_length=63)


class CloudPoolBase(Model):
    """What every cloud's node pool has; each cloud adds its machine field."""

    name: str = Field(min_length=1, max_length=40)
    role: PoolRole = PoolRole.GPU
    node_count: int = Field(default=1, ge=0)
    min_node_count: int | None = Field(default=None, ge=0)
    max_node_count: int | None = Field(default=None, ge=1)
    gpu: PoolGpu | None = None
    zones: list[str] = Field(default_factory=list)


class GKEPool(CloudPoolBase):
    machine_type: str = Field(min_length=1)
    disk_size_gb: int = Field(default=100, ge=10)


class EKSPool(CloudPoolBase):
    instance_type: str = Field(min_length=1)
    disk_size_gb: int = Field(default=100, ge=10)
    capacity_block: CapacityBlock | None = None
    fabric: Fabric | None = None


class AKSPool(CloudPoolBase):
    name: str = Field(pattern=AKS_POOL_NAME.pattern)
    vm_size: str = Field(min_length=1)
    disk_size_gb: int = Field(default=100, ge=10)
    fabric: Fabric | None = None


class NebiusPool(CloudPoolBase):
    platform: str = Field(min_length=1)
    preset: str = Field(min_length=1)
    disk_size_gb: int = Field(default=100, ge=10)
    drivers_preset: str | None = None
    fabric: Fabric | None = None


class VultrPool(CloudPoolBase):
    plan: str = Field(min_length=1)


class GKENetworking(Model):
    pod_cidr: str = "10.1.0.0/16"
    service_cidr: str = "10.2.0.0/16"
    node_cidr: str = "10.0.0.0/24"


class EKSNetworking(Model):
    vpc_cidr: str = "10.0.0.0/16"
    subnet_cidrs: list[str] = Field(default_factory=list, max_length=3)


class AKSNetworking(Model):
    vnet_cidr: str = "10.0.0.0/16"
    subnet_cidr: str = "10.0.0.0/20"


class InfrastructureResource(Resource):
    """A namespaced document of the infrastructure group."""

    API_VERSIONS: ClassVar[tuple[str, ...]] = INFRASTRUCTURE_API_VERSIONS
    NAMESPACED: ClassVar[bool] = True
    api_version: str = INFRASTRUCTURE_API_VERSION


class GKEClusterSpec(Model):
    region: str = Field(min_length=1)
    project: str | None = Field(default=None, min_length=1, max_length=63)
    kubernetes_version: str = "1.35"
    credentials: Credentials = Field(default_factory=Credentials)
    networking: GKENetworking = Field(default_factory=GKENetworking)
    node_pools: list[GKEPool] = Field(default_factory=list, max_length=9)


class GKEClusterResource(InfrastructureResource):
    KIND: ClassVar[str] = "GKECluster"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("gke",)
    kind: Literal["GKECluster"] = "GKECluster"
    spec: GKEClusterSpec


class EKSClusterSpec(Model):
    region: str = Field(min_length=1)
    kubernetes_version: str = "1.36"
    credentials: Credentials = Field(default_factory=Credentials)
    networking: EKSNetworking = Field(default_factory=EKSNetworking)
    node_pools: list[EKSPool] = Field(default_factory=list, max_length=9)


class EKSClusterResource(InfrastructureResource):
    KIND: ClassVar[str] = "EKSCluster"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("eks",)
    kind: Literal["EKSCluster"] = "EKSCluster"
    spec: EKSClusterSpec


class AKSClusterSpec(Model):
    location: str = Field(min_length=1)
    kubernetes_version: str = "1.34"
    credentials: Credentials = Field(default_factory=Credentials)
    networking: AKSNetworking = Field(default_factory=AKSNetworking)
    node_pools: list[AKSPool] = Field(default_factory=list, max_length=9)


class AKSClusterResource(InfrastructureResource):
    KIND: ClassVar[str] = "AKSCluster"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("aks",)
    kind: Literal["AKSCluster"] = "AKSCluster"
    spec: AKSClusterSpec


class NebiusClusterSpec(Model):
    kubernetes_version: str = "1.34"
    credentials: Credentials = Field(default_factory=Credentials)
    node_pools: list[NebiusPool] = Field(default_factory=list, max_length=9)


class NebiusClusterResource(InfrastructureResource):
    KIND: ClassVar[str] = "NebiusCluster"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("mk8s",)
    kind: Literal["NebiusCluster"] = "NebiusCluster"
    spec: NebiusClusterSpec


class VultrClusterSpec(Model):
    region: str = Field(min_length=1)
    kubernetes_version: str = "v1.36.1+3"
    credentials: Credentials = Field(default_factory=Credentials)
    node_pools: list[VultrPool] = Field(default_factory=list, max_length=9)


class VultrClusterResource(InfrastructureResource):
    KIND: ClassVar[str] = "VultrCluster"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("vke",)
    kind: Literal["VultrCluster"] = "VultrCluster"
    spec: VultrClusterSpec


# --- ServingStack -------------------------------------------------------------------------------


class StackSecretType(StrEnum):
    KUBECONFIG = "Kubeconfig"
    GOOGLE = "GoogleApplicationCredentials"
    AWS_WEB_IDENTITY = "AWSWebIdentityCredentials"
    NEBIUS = "NebiusServiceAccountCredentials"


class StackSecret(Model):
    type: StackSecretType
    name: str = Field(min_length=1, max_length=253)
    key: str = Field(min_length=1, max_length=253)
    namespace: str = Field(min_length=1, max_length=63)


class StackVersions(Model):
    gateway_api: str = "v1.5.1"
    cert_manager: str = "v1.17.1"
    envoy_gateway: str = "v1.8.1"
    prometheus: str = "72.6.2"
    leader_worker_set: str = "v0.8.0"
    node_feature_discovery: str = "0.18.3"
    nvidia_dra_driver: str = "0.4.0"


class ListenerProtocol(StrEnum):
    HTTP = "HTTP"
    TCP = "TCP"


class Listener(Model):
    name: str = Field(min_length=1, max_length=253)
    port: int = Field(ge=1, le=65535)
    protocol: ListenerProtocol = ListenerProtocol.HTTP


def _default_listeners() -> list[Listener]:
    return [Listener(name="http", port=80)]


class StackGateway(Model):
    class_name: str = Field(default="envoy", min_length=1, max_length=253)
    listeners: list[Listener] = Field(default_factory=_default_listeners, min_length=1)


class ServingStackSpec(Model):
    secrets: list[StackSecret] = Field(min_length=1, max_length=8)
    nvidia_driver_root: str = "/"
    versions: StackVersions = Field(default_factory=StackVersions)
    gateway: StackGateway = Field(default_factory=StackGateway)


class ServingStack(InfrastructureResource):
    KIND: ClassVar[str] = "ServingStack"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("ss",)
    kind: Literal["ServingStack"] = "ServingStack"
    spec: ServingStackSpec


CLOUD_CLUSTER_KINDS: tuple[type[InfrastructureResource], ...] = (
    GKEClusterResource,
    EKSClusterResource,
    AKSClusterResource,
    NebiusClusterResource,
    VultrClusterResource,
)
