"""What provisioning a GKE or EKS InferenceCluster creates: the cloud cluster reference and one
pool plan per ``nodePools[]`` entry from its class's ``provisioning`` block. Pure and
deterministic (no I/O, no clock), so the workflow only carries the plan out and the plan is
unit-tested on its own.

Conventions (the reference's section 4.2): every pool's nodes carry ``modelfleet.dev/pool=<pool>``
and GPU pools the ``nvidia.com/gpu=present:NoSchedule`` taint; autoscaling bounds come from
min/max; EFA only on EKS pools whose fabric says so; a Capacity Block only on EKS.
"""

from __future__ import annotations

from collections.abc import Mapping

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import ClusterSource, FabricType, InferenceCluster, Taint, TaintEffect
from modelfleet.api.naming import LABEL_POOL
from modelfleet.contracts.cloud_payloads import CloudCluster, PoolPlan

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
    raise ValueError(f"{cluster.ref}: source {access.source.value} has no cloud settings")


def needed_classes(cluster: InferenceCluster) -> list[str]:
    return sorted({p.class_name for p in cluster.spec.node_pools})


def plan_pools(
    cluster: InferenceCluster, classes: Mapping[str, InferenceClass]
) -> tuple[list[PoolPlan], list[str]]:
    """The pools to create in declared order, or the reasons some cannot be planned."""
    source = cluster.spec.cluster.source
    plans: list[PoolPlan] = []
    problems: list[str] = []
    for pool in cluster.spec.node_pools:
        klass = classes.get(pool.class_name)
        where = f"nodePools[{pool.name}]"
        if klass is None:
            problems.append(f"{where}: InferenceClass {pool.class_name} is not in the fleet")
            continue
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
                problems.append(f"{where}: class {klass.name} has no provisioning.gke block")
                continue
            if pool.fabric is not None and pool.fabric.type is FabricType.EFA:
                problems.append(f"{where}: EFA is EKS-only")
                continue
            plans.append(
                base.model_copy(
                    update={
                        "machine_type": prov.gke.machine_type,
                        "disk_size_gb": prov.gke.disk_size_gb,
                        "accelerator_type": prov.gke.accelerator.type,
                        "accelerator_count": prov.gke.accelerator.count,
                    }
                )
            )
        elif source is ClusterSource.EKS:
            if prov is None or prov.eks is None:
                problems.append(f"{where}: class {klass.name} has no provisioning.eks block")
                continue
            plans.append(
                base.model_copy(
                    update={
                        "instance_type": prov.eks.instance_type,
                        "ami_type": prov.eks.ami_type,
                        "disk_size_gb": prov.eks.disk_size_gb,
                        "capacity_reservation_id": (
                            pool.capacity_block.capacity_reservation_id
                            if pool.capacity_block
                            else None
                        ),
                        "efa": pool.fabric is not None and pool.fabric.type is FabricType.EFA,
                    }
                )
            )
        else:
            problems.append(f"{where}: source {source.value} is not provisioned")
    return plans, problems
