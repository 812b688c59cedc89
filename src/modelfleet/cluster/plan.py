"""What provisioning a GKE, EKS or AKS InferenceCluster creates: the cloud cluster reference and one
pool plan per ``nodePools[]`` entry from its class's ``provisioning`` block. Pure and
deterministic (no I/O, no clock), so the workflow only carries the plan out and the plan is
unit-tested on its own.

Conventions (the reference's section 4.2): every pool's nodes carry ``modelfleet.dev/pool=<pool>``
and GPU pools the ``nvidia.com/gpu=present:NoSchedule`` taint; autoscaling bounds come from
min/max; EFA only on EKS pools whose fabric says so; a Capacity Block only on EKS. An AKS pool
takes the class's VM size, OS disk and GPU driver setting (``Install`` unless the class says
``None``); its InfiniBand fabric comes with the VM size (``api.support`` says what is left to do).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import (
    ClusterSource,
    FabricType,
    InferenceCluster,
    NodePool,
    Taint,
    TaintEffect,
)
from modelfleet.api.naming import LABEL_POOL
from modelfleet.cluster.alternatives import alternatives
from modelfleet.contracts.cloud_payloads import CloudCluster, PoolPlan, PoolShape, eks_scaling
from modelfleet.contracts.kube_payloads import KubeconfigRef, ProbeRequest
from modelfleet.rendering.cluster_settings import cluster_facts, has_own_settings

GPU_TAINT = Taint(key="nvidia.com/gpu", value="present", effect=TaintEffect.NO_SCHEDULE)


def cloud_cluster(cluster: InferenceCluster, owner: str) -> CloudCluster:
    access = cluster.spec.cluster
    if access.source is ClusterSource.GKE and access.gke is not None:
        gke = access.gke
        return CloudCluster(
            name=cluster.name,
            region=gke.region,
            project=gke.project,
            kubernetes_version=gke.kubernetes_version,
            credentials=gke.credentials.name,
            owner=owner,
        )
    if access.source is ClusterSource.EKS and access.eks is not None:
        eks = access.eks
        return CloudCluster(
            name=cluster.name,
            region=eks.region,
            kubernetes_version=eks.kubernetes_version,
            credentials=eks.credentials.name,
            owner=owner,
        )
    if access.source is ClusterSource.AKS and access.aks is not None:
        aks = access.aks
        return CloudCluster(
            name=cluster.name,
            region=aks.location,
            kubernetes_version=aks.kubernetes_version,
            credentials=aks.credentials.name,
            owner=owner,
        )
    raise ValueError(f"{cluster.ref}: source {access.source.value} has no cloud settings")


def needed_classes(cluster: InferenceCluster) -> list[str]:
    """The classes the pools and their fallbacks are built from."""
    names = {p.class_name for p in cluster.spec.node_pools}
    names |= {f.class_name for p in cluster.spec.node_pools for f in p.fallbacks if f.class_name}
    return sorted(names)


def plan_pools(
    cluster: InferenceCluster, classes: Mapping[str, InferenceClass]
) -> tuple[list[PoolPlan], list[str]]:
    """The pools to create in declared order, or the reasons some cannot be planned."""
    plans: list[PoolPlan] = []
    problems: list[str] = []
    for pool in cluster.spec.node_pools:
        planned = _plan_pool(cluster.spec.cluster.source, pool, classes, f"nodePools[{pool.name}]")
        if isinstance(planned, str):
            problems.append(planned)
        else:
            plans.append(planned)
    return plans, problems


def plan_alternatives(
    cluster: InferenceCluster, classes: Mapping[str, InferenceClass]
) -> tuple[dict[str, list[PoolPlan]], list[str]]:
    """Per pool, the plans of its alternatives in the order they are tried (the pool itself
    first, then each of its ``fallbacks``), or the reasons some cannot be planned."""
    out: dict[str, list[PoolPlan]] = {}
    problems: list[str] = []
    for pool in cluster.spec.node_pools:
        options = out.setdefault(pool.name, [])
        for i, alternative in enumerate(alternatives(pool)):
            where = f"nodePools[{pool.name}]" + (f".fallbacks[{i - 1}]" if i else "")
            planned = _plan_pool(cluster.spec.cluster.source, alternative, classes, where)
            if isinstance(planned, str):
                problems.append(planned)
            else:
                options.append(planned)
    return out, problems


def _plan_pool(
    source: ClusterSource, pool: NodePool, classes: Mapping[str, InferenceClass], where: str
) -> PoolPlan | str:
    """One pool's plan, or why it cannot be planned."""
    klass = classes.get(pool.class_name)
    if klass is None:
        return f"{where}: InferenceClass {pool.class_name} is not in the fleet"
    prov = klass.spec.provisioning
    gpu = any("gpu" in d.driver.split(".") for d in klass.spec.devices)
    base = PoolPlan(
        name=pool.name,
        class_name=pool.class_name,
        node_count=pool.node_count,
        min_node_count=pool.min_node_count,
        max_node_count=pool.max_node_count,
        zones=list(pool.zones),
        labels={LABEL_POOL: pool.name},
        taints=[GPU_TAINT] if gpu else [],
    )
    if source is ClusterSource.GKE:
        if prov is None or prov.gke is None:
            return f"{where}: class {klass.name} has no provisioning.gke block"
        if pool.fabric is not None and pool.fabric.type is FabricType.EFA:
            return f"{where}: EFA is EKS-only"
        return base.model_copy(
            update={
                "machine_type": prov.gke.machine_type,
                "disk_size_gb": prov.gke.disk_size_gb,
                "accelerator_type": prov.gke.accelerator.type,
                "accelerator_count": prov.gke.accelerator.count,
            }
        )
    if source is ClusterSource.EKS:
        if prov is None or prov.eks is None:
            return f"{where}: class {klass.name} has no provisioning.eks block"
        return base.model_copy(
            update={
                "instance_type": prov.eks.instance_type,
                "ami_type": prov.eks.ami_type,
                "disk_size_gb": prov.eks.disk_size_gb,
                "capacity_reservation_id": (
                    pool.capacity_block.capacity_reservation_id if pool.capacity_block else None
                ),
                "efa": pool.fabric is not None and pool.fabric.type is FabricType.EFA,
            }
        )
    if source is ClusterSource.AKS:
        if prov is None or prov.aks is None:
            return f"{where}: class {klass.name} has no provisioning.aks block"
        return base.model_copy(
            update={
                "vm_size": prov.aks.vm_size,
                "disk_size_gb": prov.aks.disk_size_gb,
                "gpu_driver": prov.aks.gpu_driver.value if gpu else None,
            }
        )
    return f"{where}: source {source.value} is not provisioned"


def desired_shape(source: ClusterSource, plan: PoolPlan) -> PoolShape:
    """The shape the cloud reports for a pool created or updated from ``plan``."""
    if source is ClusterSource.EKS:
        low, high, count = eks_scaling(plan)
        return PoolShape(name=plan.name, node_count=count, min_node_count=low, max_node_count=high)
    autoscaled = plan.max_node_count is not None
    return PoolShape(
        name=plan.name,
        node_count=plan.node_count,
        min_node_count=(plan.min_node_count or 0) if autoscaled else None,
        max_node_count=plan.max_node_count if autoscaled else None,
    )


@dataclass
class PoolChanges:
    """What makes the cloud's pools match the declared ones, in the order to do it."""

    create: list[PoolPlan] = field(default_factory=list)
    resize: list[PoolPlan] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.create or self.resize or self.delete)

    def summary(self) -> str:
        parts = [
            f"{verb} {', '.join(names)}"
            for verb, names in (
                ("created", [p.name for p in self.create]),
                ("resized", [p.name for p in self.resize]),
                ("deleted", self.delete),
            )
            if names
        ]
        return "; ".join(parts) or "no change"


def diff_pools(
    source: ClusterSource,
    declared: list[PoolPlan],
    observed: list[PoolShape],
    ours: Collection[str],
) -> PoolChanges:
    """Declared vs observed pools: create the missing, resize those whose size or bounds differ
    (an autoscaled pool's node count is the autoscaler's, so only its bounds count), delete
    pools no longer declared, but only those this cluster created (``ours``)."""
    seen = {shape.name: shape for shape in observed}
    changes = PoolChanges()
    for plan in declared:
        have = seen.get(plan.name)
        if have is None:
            changes.create.append(plan)
            continue
        want = desired_shape(source, plan)
        bounds = (want.min_node_count, want.max_node_count)
        autoscaled = plan.max_node_count is not None
        if bounds != (have.min_node_count, have.max_node_count) or (
            not autoscaled and want.node_count != have.node_count
        ):
            changes.resize.append(plan)
    names = {plan.name for plan in declared}
    changes.delete = sorted(n for n in seen if n not in names and n in ours)
    return changes


def apply_refused(held: InferenceCluster, spec: InferenceCluster) -> str | None:
    """Why an apply to the workflow holding ``held`` is refused before validation, if it is."""
    if spec.name != held.name:
        return f"this workflow holds {held.ref}, not {spec.ref}"
    if spec.spec.cluster.source is not held.spec.cluster.source:
        return "spec.cluster.source cannot change; delete and re-create the cluster"
    return None


def removed_pools(before: InferenceCluster, after: InferenceCluster) -> list[str]:
    kept = {p.name for p in after.spec.node_pools}
    return [p.name for p in before.spec.node_pools if p.name not in kept]


def removal_refused(removed: list[str], replicas: Mapping[str, list[str]]) -> str | None:
    """Why removing ``removed`` pools is refused (the replicas still on them), or None."""
    busy = [(pool, sorted(replicas[pool])) for pool in removed if replicas.get(pool)]
    if not busy:
        return None
    listed = "; ".join(f"pool {pool} runs {', '.join(names)}" for pool, names in busy)
    return (
        f"node pools cannot be removed while replicas run on them: {listed}. Scale those "
        "deployments down or move them (a clusterSelector or nodeSelector) first"
    )


def probe_request(spec: InferenceCluster) -> ProbeRequest:
    """How the worker reaches and probes the cluster: its kubeconfig secretRef and its own
    settings (pool labels, gateway), so the cluster is probed as the spec describes it."""
    existing = spec.spec.cluster.existing
    ref = existing.secret_ref if existing is not None else None
    return ProbeRequest(
        cluster=spec.name,
        kubeconfig=KubeconfigRef(name=ref.name, key=ref.key) if ref is not None else None,
        facts=cluster_facts(spec) if has_own_settings(spec) else None,
    )
