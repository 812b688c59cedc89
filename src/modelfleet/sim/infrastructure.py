"""The infrastructure objects of a simulated GPU cluster, built from an InferenceCluster and its
InferenceClasses: Nodes per pool, the ResourceSlices a DRA driver would publish for them, the
DeviceClasses, and the serving stack a real install has (namespace ``modelfleet-system``, a
GatewayClass and the ``inference-gateway`` Gateway with a fake address).

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure: builds
JSON-like dicts and reads the api models; no I/O, no asyncio, no network.

Choices worth knowing:
- Pool nodes are named ``<cluster>-<pool>-<i>`` and labelled ``<pool label>=<pool>``, the label
  the cluster declares for the pool (``modelfleet.dev/pool`` unless it says otherwise);
  GPU pools carry ``nvidia.com/gpu.present=true`` and the taint ``nvidia.com/gpu=present:
  NoSchedule`` (what GKE puts on GPU node pools).
- Every cluster also has one untainted CPU node ``<cluster>-system-0`` with no pool label, as
  every real cluster has a default/system pool; it is where claimless pods such as the
  endpoint picker run.
- Every cluster has a default StorageClass ``standard-rwx`` (ReadWriteMany, Immediate binding),
  plus the class an Existing cluster names in ``existing.cache.storageClassName``; a claim of
  any other class stays Pending, as on a real cluster without that provisioner.
- The InferenceCluster's ``spec.taints`` are fleet-level placement taints (they steer the
  scheduler between clusters) and are not put on nodes.
- Only ``claim: DRA`` devices are published. Synthetic devices have no driver on the cluster.
- The NVIDIA driver always publishes ``type`` and ``uuid``; they are added for ``gpu.nvidia.com``
  devices when the class does not set them, so upstream DeviceClass selectors keep working.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from modelfleet.api.classes import ClassDevice, DeviceAttribute, DeviceClaim, InferenceClass
from modelfleet.api.clusters import InferenceCluster, NodePool
from modelfleet.api.naming import LABEL_MANAGED_BY, LABEL_POOL, short_hash
from modelfleet.rendering.cluster_settings import cluster_facts
from modelfleet.sim.controllers.pod_status import node_ip
from modelfleet.sim.gang_stack import gang_scheduler_manifests
from modelfleet.sim.kubernetes_version import KUBERNETES_VERSION

__all__ = [
    "DEFAULT_STORAGE_CLASS",
    "GATEWAY_CLASS",
    "GATEWAY_NAME",
    "GPU_PRESENT_LABEL",
    "GPU_TAINT",
    "NVIDIA_GPU_DRIVER",
    "SYSTEM_NAMESPACE",
    "PoolLayout",
    "cluster_layout",
    "device_class_manifests",
    "gateway_address",
    "infrastructure_manifests",
    "node_manifest",
    "resource_slice_manifests",
    "stack_manifests",
]

SYSTEM_NAMESPACE = "modelfleet-system"
GATEWAY_NAME = "inference-gateway"
GATEWAY_CLASS = "modelfleet-sim"
GATEWAY_CONTROLLER = "sim.modelfleet.dev/gateway-controller"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
GPU_TAINT: dict[str, str] = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
NVIDIA_GPU_DRIVER = "gpu.nvidia.com"
SIM_MANAGER = "modelfleet-sim"
# Upstream's gpu.nvidia.com DeviceClass selects on the device type as well as the driver.
_NVIDIA_CLASS_SELECTORS = {
    "gpu.nvidia.com": "device.driver == 'gpu.nvidia.com' && "
    "device.attributes['gpu.nvidia.com'].type == 'gpu'",
}
_SYSTEM_POOL = "system"
DEFAULT_STORAGE_CLASS = "standard-rwx"
STORAGE_PROVISIONER = "sim.modelfleet.dev/rwx"
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"


def _is_gpu(device: ClassDevice) -> bool:
    return "gpu" in device.driver.split(".")


@dataclass(frozen=True)
class PoolLayout:
    """One node pool as simulated: its nodes and what each node carries."""

    pool: NodePool
    klass: InferenceClass | None
    nodes: tuple[str, ...]
    # The node label that carries the pool's name (the cluster may name its own per pool).
    label: str = LABEL_POOL

    @property
    def gpu(self) -> bool:
        return self.klass is not None and any(_is_gpu(d) for d in self.klass.spec.devices)

    @property
    def gpus_per_node(self) -> int:
        if self.klass is None:
            return 0
        return sum(d.count for d in self.klass.spec.devices if _is_gpu(d))

    @property
    def dra_devices(self) -> list[ClassDevice]:
        if self.klass is None:
            return []
        return [d for d in self.klass.spec.devices if d.claim is DeviceClaim.DRA]


def cluster_layout(
    cluster: InferenceCluster, classes: Mapping[str, InferenceClass]
) -> list[PoolLayout]:
    """Pools in declared order, each with ``capacity_nodes`` nodes. A pool whose class is unknown
    still gets its nodes (without devices): validation elsewhere reports the dangling name."""
    layouts = []
    facts = cluster_facts(cluster)
    for pool in cluster.spec.node_pools:
        nodes = tuple(f"{cluster.name}-{pool.name}-{i}" for i in range(pool.capacity_nodes))
        label = facts.pool_label(pool.name)
        layouts.append(PoolLayout(pool, classes.get(pool.class_name), nodes, label))
    return layouts


def system_node_name(cluster: str) -> str:
    return f"{cluster}-{_SYSTEM_POOL}-0"


def _labels(cluster: str) -> dict[str, str]:
    return {LABEL_MANAGED_BY: SIM_MANAGER, "sim.modelfleet.dev/cluster": cluster}


def node_manifest(
    cluster: str,
    name: str,
    *,
    layout: PoolLayout | None,
    zone: str = "sim-a",
) -> dict[str, Any]:
    """A Ready Node; ``layout`` None makes the untainted system node."""
    labels = {
        **_labels(cluster),
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "topology.kubernetes.io/zone": zone,
    }
    taints: list[dict[str, str]] = []
    allocatable = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    if layout is not None:
        labels[layout.label] = layout.pool.name
        labels["sim.modelfleet.dev/class"] = layout.pool.class_name
        allocatable = {"cpu": "96", "memory": "1000Gi", "pods": "110", "ephemeral-storage": "2Ti"}
        if layout.gpu:
            labels[GPU_PRESENT_LABEL] = "true"
            taints.append(dict(GPU_TAINT))
            allocatable["nvidia.com/gpu"] = str(layout.gpus_per_node)
    else:
        labels["sim.modelfleet.dev/pool"] = _SYSTEM_POOL
    spec: dict[str, Any] = {"providerID": f"sim://{cluster}/{name}"}
    if taints:
        spec["taints"] = taints
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {
            "capacity": dict(allocatable),
            "allocatable": allocatable,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                }
            ],
            "nodeInfo": {
                "kubeletVersion": KUBERNETES_VERSION,
                "containerRuntimeVersion": "containerd://2.0.0",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "osImage": "Simulated Linux (modelfleet)",
                "kernelVersion": "6.8.0-sim",
            },
            # The InternalIP is the hostIP the kubelet reports for the node's pods.
            "addresses": [
                {"type": "InternalIP", "address": node_ip(name)},
                {"type": "Hostname", "address": name},
            ],
        },
    }


def _attribute(value: DeviceAttribute) -> dict[str, Any]:
    return value.model_dump(exclude_none=True)


def _device(node: str, device: ClassDevice, index: int) -> dict[str, Any]:
    attributes = {name: _attribute(v) for name, v in device.attributes.items()}
    if device.driver == NVIDIA_GPU_DRIVER:
        attributes.setdefault("type", {"string": "gpu"})
        # Deterministic, so that a rebuilt fleet publishes the same devices.
        uid = short_hash(f"{node}/{device.name}/{index}", 32)
        attributes.setdefault(
            "uuid", {"string": f"GPU-{uid[:8]}-{uid[8:12]}-{uid[12:16]}-{uid[16:20]}-{uid[20:]}"}
        )
    out: dict[str, Any] = {"name": f"{device.name}-{index}", "attributes": attributes}
    if device.capacity:
        out["capacity"] = {name: {"value": c.value} for name, c in device.capacity.items()}
    return out


def resource_slice_manifests(cluster: str, node: str, layout: PoolLayout) -> list[dict[str, Any]]:
    """One ResourceSlice per DRA driver on ``node``, pooled by node as kubelet plugins do."""
    by_driver: dict[str, list[dict[str, Any]]] = {}
    for device in layout.dra_devices:
        devices = by_driver.setdefault(device.driver, [])
        devices.extend(_device(node, device, i) for i in range(device.count))
    slices = []
    for driver, devices in by_driver.items():
        slices.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {
                    "name": f"{node}-{driver}",
                    "labels": {**_labels(cluster), layout.label: layout.pool.name},
                },
                "spec": {
                    "driver": driver,
                    "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices,
                },
            }
        )
    return slices


def device_class_manifests(classes: Mapping[str, InferenceClass]) -> list[dict[str, Any]]:
    """A DeviceClass per device class name the classes' DRA devices use."""
    seen: dict[str, str] = {}
    for klass in classes.values():
        for device in klass.spec.devices:
            if device.claim is DeviceClaim.DRA:
                seen.setdefault(device.device_class_name or device.driver, device.driver)
    out = []
    for name, driver in sorted(seen.items()):
        expression = _NVIDIA_CLASS_SELECTORS.get(name, f"device.driver == '{driver}'")
        spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
        if name == NVIDIA_GPU_DRIVER:
            spec["extendedResourceName"] = "nvidia.com/gpu"
        out.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": spec,
            }
        )
    return out


def gateway_address(index: int) -> str:
    """The fake address of the gateway of the ``index``-th cluster of a fleet (0-based).

    Data only: nothing ever listens there."""
    return f"10.{(index % 250) + 1}.0.1"


def stack_manifests(
    address: str,
    *,
    now: str,
    port: int = 80,
    gateway_name: str = GATEWAY_NAME,
    gateway_namespace: str = SYSTEM_NAMESPACE,
) -> list[dict[str, Any]]:
    """The serving stack a real install would have, status included (``now`` stamps the
    conditions; this module reads no clock). The Gateway sits where the cluster says (a
    cluster prepared for Modelplane has it in ``modelplane-system``)."""
    ready = {"status": "True", "lastTransitionTime": now}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": gateway_namespace}},
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": GATEWAY_CLASS},
            "spec": {"controllerName": GATEWAY_CONTROLLER},
            "status": {
                "conditions": [
                    {**ready, "type": "Accepted", "reason": "Accepted", "message": "simulated"}
                ]
            },
        },
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": gateway_name, "namespace": gateway_namespace},
            "spec": {
                "gatewayClassName": GATEWAY_CLASS,
                "listeners": [
                    {
                        "name": "http",
                        # Where the gateway listens: 80 on a real install, the simulated
                        # gateway's loopback port in a simulated fleet.
                        "port": port,
                        "protocol": "HTTP",
                        "allowedRoutes": {"namespaces": {"from": "All"}},
                    }
                ],
            },
            "status": {
                "addresses": [{"type": "IPAddress", "value": address}],
                "conditions": [
                    {**ready, "type": "Accepted", "reason": "Accepted", "message": "simulated"},
                    {**ready, "type": "Programmed", "reason": "Programmed", "message": "simulated"},
                ],
            },
        },
    ]


def storage_class_manifests(cluster: InferenceCluster) -> list[dict[str, Any]]:
    """The default StorageClass, and the one an Existing cluster names for model caches."""
    names = [DEFAULT_STORAGE_CLASS]
    existing = cluster.spec.cluster.existing
    cache = existing.cache if existing is not None else None
    if cache is not None and cache.storage_class_name not in names:
        names.append(cache.storage_class_name)
    out: list[dict[str, Any]] = []
    for name in names:
        metadata: dict[str, Any] = {"name": name, "labels": {LABEL_MANAGED_BY: SIM_MANAGER}}
        if name == DEFAULT_STORAGE_CLASS:
            metadata["annotations"] = {DEFAULT_CLASS_ANNOTATION: "true"}
        out.append(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": metadata,
                "provisioner": STORAGE_PROVISIONER,
                "reclaimPolicy": "Delete",
                "volumeBindingMode": "Immediate",
                "allowVolumeExpansion": True,
            }
        )
    return out


def infrastructure_manifests(
    cluster: InferenceCluster,
    classes: Mapping[str, InferenceClass],
    *,
    address: str,
    now: str,
    gateway_port: int = 80,
) -> list[dict[str, Any]]:
    """Everything a fresh simulated cluster holds before any workload, in creation order."""
    out: list[dict[str, Any]] = list(device_class_manifests(classes))
    out.append(node_manifest(cluster.name, system_node_name(cluster.name), layout=None))
    out.extend(storage_class_manifests(cluster))
    layouts = cluster_layout(cluster, classes)
    for layout in layouts:
        zones = layout.pool.zones or ["sim-a"]
        for i, node in enumerate(layout.nodes):
            out.append(node_manifest(cluster.name, node, layout=layout, zone=zones[i % len(zones)]))
            out.extend(resource_slice_manifests(cluster.name, node, layout))
    facts = cluster_facts(cluster)
    out.extend(
        stack_manifests(
            address,
            now=now,
            port=gateway_port,
            gateway_name=facts.gateway_name,
            gateway_namespace=facts.gateway_namespace,
        )
    )
    gpus = sum(len(layout.nodes) * layout.gpus_per_node for layout in layouts)
    out.extend(gang_scheduler_manifests(cluster, gpus))
    return out
