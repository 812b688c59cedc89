"""InferenceClass: a hardware recipe. Its DRA-shaped ``devices[]`` are what deployments' CEL
selectors match against; its optional ``provisioning`` block says how a cloud builds a node of
this class (GKE, EKS, AKS, and Modelplane's Nebius and Vultr shapes, which are validated; building
those two reports ProvisioningNotSupported). Pure models, no I/O.
"""

from __future__ import annotations

import builtins
from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import Field

from modelfleet.api.meta import DNSLabel, Model, Resource


class DeviceClaim(StrEnum):
    DRA = "DRA"
    SYNTHETIC = "Synthetic"


class DeviceAttribute(Model):
    """A typed attribute value; exactly one of the four fields is set."""

    string: str | None = Field(default=None, max_length=253)
    version: str | None = Field(default=None, max_length=32)
    # builtins.*: the field names shadow the types inside the class body.
    bool: builtins.bool | None = None
    int: builtins.int | None = Field(default=None, ge=-(2**63), le=2**63 - 1)


class DeviceCapacity(Model):
    value: str = Field(min_length=1, max_length=32)


class ClassDevice(Model):
    name: DNSLabel
    claim: DeviceClaim = DeviceClaim.DRA
    driver: str = Field(min_length=1, max_length=253)
    device_class_name: str | None = Field(default=None, min_length=1, max_length=253)
    count: int = Field(default=1, ge=1, le=64)
    attributes: dict[str, DeviceAttribute] = Field(default_factory=dict, max_length=32)
    capacity: dict[str, DeviceCapacity] = Field(default_factory=dict, max_length=32)


class Accelerator(Model):
    type: str = Field(min_length=1, max_length=63)
    count: int = Field(ge=1, le=16)


class GKEProvisioning(Model):
    machine_type: str = Field(min_length=1)
    disk_size_gb: int = Field(default=100, ge=10)
    accelerator: Accelerator


class EKSProvisioning(Model):
    instance_type: str = Field(min_length=1)
    disk_size_gb: int = Field(default=100, ge=10)
    ami_type: str = "AL2023_x86_64_NVIDIA"
    # Informational on EKS: the instance type decides the GPUs.
    accelerator: Accelerator | None = None


class GPUDriver(StrEnum):
    # AKS installs the NVIDIA driver on GPU VM sizes (Modelplane's setting).
    INSTALL = "Install"
    # The node image's own driver, or the GPU operator's.
    NONE = "None"


class AKSProvisioning(Model):
    vm_size: str = Field(min_length=1)
    disk_size_gb: int = Field(default=100, ge=10)
    # Informational on AKS: the VM size decides the GPUs.
    accelerator: Accelerator | None = None
    # modelfleet's own field (Modelplane always installs): the agent pool's gpuProfile.driver.
    gpu_driver: GPUDriver = GPUDriver.INSTALL


class NebiusProvisioning(Model):
    # Platform and preset decide the node shape.
    platform: str = Field(min_length=1)
    preset: str = Field(min_length=1)
    disk_size_gb: int = Field(default=100, ge=10)
    drivers_preset: str = "cuda13.0"
    accelerator: Accelerator | None = None


class VultrProvisioning(Model):
    # The plan decides the whole node, disk included.
    plan: str = Field(min_length=1)
    accelerator: Accelerator | None = None


class Provider(StrEnum):
    GKE = "GKE"
    EKS = "EKS"
    AKS = "AKS"
    NEBIUS = "Nebius"
    VULTR = "Vultr"


class Provisioning(Model):
    provider: Provider
    # What one node of this class costs per hour in USD, as your account pays it (on-demand,
    # committed or reserved). Optional; ``modelfleet plan`` prices pools with it before any
    # list price it knows. Informational: nothing is provisioned differently.
    hourly_price: float | None = Field(
        default=None,
        gt=0,
        le=100_000,
        allow_inf_nan=False,
        description="USD per node-hour for this class; `modelfleet plan` uses it first.",
    )
    gke: GKEProvisioning | None = None
    eks: EKSProvisioning | None = None
    aks: AKSProvisioning | None = None
    nebius: NebiusProvisioning | None = None
    vultr: VultrProvisioning | None = None

    def blocks(self) -> dict[Provider, Model | None]:
        """Every provider's sibling block (at most the chosen one may be set)."""
        return {
            Provider.GKE: self.gke,
            Provider.EKS: self.eks,
            Provider.AKS: self.aks,
            Provider.NEBIUS: self.nebius,
            Provider.VULTR: self.vultr,
        }


class InferenceClassSpec(Model):
    description: str = ""
    provisioning: Provisioning | None = None
    devices: list[ClassDevice] = Field(min_length=1, max_length=16)


class InferenceClass(Resource):
    KIND: ClassVar[str] = "InferenceClass"
    PLURAL: ClassVar[str] = "inferenceclasses"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("icl",)
    kind: Literal["InferenceClass"] = "InferenceClass"
    spec: InferenceClassSpec
