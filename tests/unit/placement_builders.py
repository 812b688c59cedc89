"""Small builders for placement tests: fleets, deployments and already-placed replicas, written
so that a test reads as its scenario. Not a test module (no ``test_`` prefix)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from modelfleet.api.classes import ClassDevice
from modelfleet.api.clusters import Taint
from modelfleet.api.deployments import ModelDeployment, ModelReplica
from modelfleet.api.naming import replica_name
from modelfleet.scheduling.placement import Placement, place
from modelfleet.scheduling.snapshot import ClusterSnapshot, FleetSnapshot, PoolSnapshot

DRIVER = "gpu.nvidia.com"


def mem_at_least(quantity: str) -> str:
    return f'device.capacity["{DRIVER}"].memory.compareTo(quantity("{quantity}")) >= 0'


def product_is(name: str) -> str:
    return f'device.attributes["{DRIVER}"].productName == "{name}"'


ANY_GPU = mem_at_least("1Gi")


def gpu(
    count: int = 1,
    memory: str = "80Gi",
    product: str = "NVIDIA H100",
    *,
    name: str = "gpu",
    claim: str = "DRA",
    driver: str = DRIVER,
    **attributes: str,
) -> ClassDevice:
    attrs: dict[str, Any] = {"productName": {"string": product}}
    attrs.update({k: {"string": v} for k, v in attributes.items()})
    doc: dict[str, Any] = {
        "name": name,
        "claim": claim,
        "driver": driver,
        "count": count,
        "attributes": attrs,
        "capacity": {"memory": {"value": memory}},
    }
    if claim == "DRA":
        doc["deviceClassName"] = driver
    return ClassDevice.model_validate(doc)


def nic(count: int = 8, link: str = "infiniband", *, claim: str = "Synthetic") -> ClassDevice:
    doc: dict[str, Any] = {
        "name": "nic",
        "claim": claim,
        "driver": "nic.nvidia.com",
        "count": count,
        "attributes": {"linkType": {"string": link}},
    }
    if claim == "DRA":
        doc["deviceClassName"] = "nic.nvidia.com"
    return ClassDevice.model_validate(doc)


NIC_IB = 'device.attributes["nic.nvidia.com"].linkType == "infiniband"'


def pool(name: str, nodes: int, *devices: ClassDevice) -> PoolSnapshot:
    return PoolSnapshot(name=name, class_name=f"{name}-class", nodes=nodes, devices=list(devices))


def cluster(
    name: str,
    *pools: PoolSnapshot,
    labels: dict[str, str] | None = None,
    taints: Sequence[tuple[str, str, str]] = (),
    ready: bool = True,
    gateway: str | None = "10.0.0.1",
) -> ClusterSnapshot:
    return ClusterSnapshot(
        name=name,
        labels=labels or {},
        taints=[Taint.model_validate({"key": k, "value": v, "effect": e}) for k, v, e in taints],
        ready=ready,
        gateway_address=gateway,
        pools=list(pools) or [pool("gpu", 1, gpu())],
    )


def simple_cluster(name: str, nodes: int = 1, **kwargs: Any) -> ClusterSnapshot:
    """A cluster with one pool ``gpu`` of ``nodes`` one-GPU nodes."""
    return cluster(name, pool("gpu", nodes, gpu()), **kwargs)


def fleet(*clusters: ClusterSnapshot) -> FleetSnapshot:
    return FleetSnapshot(clusters=list(clusters))


# --- deployments ------------------------------------------------------------------------------


def device(name: str = "gpu", count: int = 1, *selectors: str) -> dict[str, Any]:
    return {"name": name, "count": count, "selectors": [{"cel": s} for s in selectors or [ANY_GPU]]}


def member(
    *devices: dict[str, Any], role: str = "Standalone", nodes: int | None = None
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "role": role,
        "template": {"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai"}]}},
    }
    if devices:
        doc["nodeSelector"] = {"devices": list(devices)}
    if nodes is not None:
        doc["worker"] = {"nodes": nodes}
    return doc


def engine(
    *members: dict[str, Any], name: str = "vllm", copies: int = 1, phase: str | None = None
) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": name, "copies": copies, "members": list(members)}
    if phase:
        doc["phase"] = phase
    return doc


def standalone(gpus: int = 1, *selectors: str, name: str = "vllm", copies: int = 1) -> dict:
    return engine(member(device("gpu", gpus, *selectors)), name=name, copies=copies)


def gang(
    leader_gpus: int | None = 8,
    worker_gpus: int = 8,
    nodes: int = 1,
    *,
    leader_selectors: Sequence[str] = (),
    worker_selectors: Sequence[str] = (),
    name: str = "vllm",
    copies: int = 1,
) -> dict[str, Any]:
    leader = (
        member(device("gpu", leader_gpus, *leader_selectors), role="Leader")
        if leader_gpus
        else member(role="Leader")
    )
    worker = member(device("gpu", worker_gpus, *worker_selectors), role="Worker", nodes=nodes)
    return engine(leader, worker, name=name, copies=copies)


def deployment(
    *engines: dict[str, Any],
    name: str = "my-model",
    namespace: str = "ml-team",
    replicas: int = 1,
    tolerations: Sequence[dict[str, str]] = (),
    cluster_selector: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    mode: str | None = None,
) -> ModelDeployment:
    spec: dict[str, Any] = {"engines": list(engines) or [standalone()]}
    if tolerations:
        spec["tolerations"] = list(tolerations)
    if cluster_selector is not None:
        spec["clusterSelector"] = {"matchLabels": cluster_selector}
    if mode:
        spec["serving"] = {"mode": mode}
    return ModelDeployment.model_validate(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "ModelDeployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "replicas": replicas,
                "template": {"metadata": {"labels": labels or {}}, "spec": spec},
            },
        }
    )


# --- replicas that already run ----------------------------------------------------------------


def existing(
    dep: ModelDeployment,
    cluster_name: str,
    index: int,
    pool_name: str | Sequence[str] = "gpu",
    *,
    name: str | None = None,
    device_class: str = DRIVER,
) -> ModelReplica:
    """A replica of ``dep``'s current template pinned to ``cluster_name``/``pool_name`` (one pool
    per engine when a sequence), claiming exactly what each member's node selector asks for."""
    pools = [pool_name] * 8 if isinstance(pool_name, str) else list(pool_name)
    engines = []
    for e, pinned in zip(dep.spec.template.spec.engines, pools, strict=False):
        members = []
        for m in e.members:
            doc: dict[str, Any] = {
                "role": m.role.value,
                "nodePoolName": pinned,
                "template": m.template.model_dump(by_alias=True, exclude_none=True),
            }
            if m.worker is not None:
                doc["worker"] = {"nodes": m.worker.nodes}
            if m.node_selector is not None:
                doc["deviceRequests"] = [
                    {
                        "name": d.name,
                        "deviceClassName": device_class,
                        "count": d.count,
                        "selectors": [{"cel": s.cel} for s in d.selectors],
                    }
                    for d in m.node_selector.devices
                ]
            members.append(doc)
        engines.append({"name": e.name, "copies": e.copies, "phase": e.phase, "members": members})
    return ModelReplica.model_validate(
        {
            "metadata": {
                "name": name or replica_name(dep.namespace, dep.name, cluster_name, index),
                "namespace": dep.namespace,
            },
            "spec": {
                "clusterName": cluster_name,
                "deployment": dep.name,
                "index": index,
                "engines": engines,
            },
        }
    )


def where(placement: Placement) -> list[tuple[str, int]]:
    """(cluster, index) of every replica that should run, sorted."""
    return [(r.spec.cluster_name, r.spec.index) for r in placement.replicas]


def placed_at(placement: Placement) -> list[tuple[str, int]]:
    return sorted((r.spec.cluster_name, r.spec.index) for r in placement.placed)


def pools_of(replica: ModelReplica) -> list[list[str]]:
    return [[m.node_pool_name for m in e.members] for e in replica.spec.engines]


def reasons(placement: Placement) -> list[tuple[str, str]]:
    return [(v.replica.name, v.reason.value) for v in placement.victims]


def status(placement: Placement) -> tuple[str, str]:
    condition = placement.condition()
    assert condition is not None
    return condition.status, condition.reason


def fits(dep: ModelDeployment, snapshot: FleetSnapshot) -> bool:
    """Whether every desired replica of ``dep`` fits on an empty ``snapshot``."""
    result = place(dep, snapshot, [])
    return result.scheduled == dep.spec.replicas and status(result)[0] == "True"
