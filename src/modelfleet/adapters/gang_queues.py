"""How many GPUs a cluster's gang-scheduler queue can still admit, read from the scheduler's own
objects, for the probe:

- KAI: the Queue (``scheduling.run.ai/v2``, cluster-scoped): its cap is
  ``spec.resources.gpu.limit``, else ``quota`` (-1: none); what it holds is
  ``status.allocated["nvidia.com/gpu"]``.
- Kueue: the ClusterQueue (``kueue.x-k8s.io/v1beta1``): its cap is the sum of the
  ``nvidia.com/gpu`` ``nominalQuota`` over its flavors; what it holds is the sum of
  ``status.flavorsUsage[].resources[nvidia.com/gpu].total``.

The interpretation (:func:`kai_capacity`, :func:`kueue_capacity`) is pure; :func:`observe_queue`
reads the object through :class:`~modelfleet.adapters.kube_client.KubeCluster`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modelfleet.adapters.kube_client import KubeCluster
from modelfleet.api.schedulers import GangScheduler, SchedulerType
from modelfleet.cel.quantity import Quantity
from modelfleet.scheduling.snapshot import QueueCapacity

GPU = "nvidia.com/gpu"
KAI_QUEUE = ("scheduling.run.ai/v2", "Queue")
KUEUE_CLUSTER_QUEUE = ("kueue.x-k8s.io/v1beta1", "ClusterQueue")


def _count(value: Any) -> int:
    """A GPU count from a quantity (``16``, ``"16"``); 0 when it is not one."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    try:
        return int(Quantity.parse(str(value)).value)
    except (TypeError, ValueError, ArithmeticError):
        return 0


def kai_capacity(name: str, obj: Mapping[str, Any]) -> QueueCapacity:
    gpu = ((obj.get("spec") or {}).get("resources") or {}).get("gpu") or {}
    limit = _count(gpu.get("limit", -1)) if "limit" in gpu else -1
    cap = limit if limit >= 0 else (_count(gpu["quota"]) if "quota" in gpu else -1)
    allocated = ((obj.get("status") or {}).get("allocated") or {}).get(GPU, 0)
    return QueueCapacity(
        scheduler=SchedulerType.KAI.value,
        name=name,
        total_gpus=cap if cap >= 0 else None,
        used_gpus=_count(allocated),
    )


def kueue_capacity(name: str, obj: Mapping[str, Any]) -> QueueCapacity:
    total = 0
    for group in (obj.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for resource in flavor.get("resources") or []:
                if resource.get("name") == GPU:
                    total += _count(resource.get("nominalQuota"))
    used = 0
    for flavor in (obj.get("status") or {}).get("flavorsUsage") or []:
        for resource in flavor.get("resources") or []:
            if resource.get("name") == GPU:
                used += _count(resource.get("total"))
    return QueueCapacity(
        scheduler=SchedulerType.KUEUE.value, name=name, total_gpus=total, used_gpus=used
    )


def observe_queue(cluster: KubeCluster, scheduler: GangScheduler) -> QueueCapacity | None:
    """The queue ``scheduler`` names, as the cluster reports it now; None without a queue.
    A queue that cannot be read admits nothing, and says why."""
    if scheduler.type is SchedulerType.KAI and scheduler.kai is not None:
        name, kind, read = scheduler.kai.queue, KAI_QUEUE, kai_capacity
        what = "KAI Queue"
    elif scheduler.type is SchedulerType.KUEUE and scheduler.kueue is not None:
        name, kind, read = scheduler.kueue.cluster_queue, KUEUE_CLUSTER_QUEUE, kueue_capacity
        what = "Kueue ClusterQueue"
    else:
        return None
    if not cluster.serves(*kind):
        return QueueCapacity(
            scheduler=scheduler.type.value,
            name=name,
            problem=f"the cluster does not serve {kind[0]} {kind[1]}",
        )
    found = cluster.get(*kind, name)
    if found is None:
        return QueueCapacity(
            scheduler=scheduler.type.value, name=name, problem=f"{what} {name} not found"
        )
    return read(name, found)
