"""The gang schedulers' objects as the simulated cluster knows them: KAI's PodGroups and Queues,
Kueue's Workloads, ClusterQueues and LocalQueues (their API versions, labels and annotations),
and the Workload a Kueue-managed owner gets (named as Kueue names it).

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from modelfleet.sim.controllers.context import meta_of
from modelfleet.sim.controllers.object_helpers import owner_reference

KAI_SCHEDULER = "kai-scheduler"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
POD_GROUP_ANNOTATION = "pod-group-name"
PODGROUP = ("scheduling.run.ai/v2alpha2", "PodGroup")
KAI_QUEUE = ("scheduling.run.ai/v2", "Queue")

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE = "kueue.x-k8s.io/v1beta1"
WORKLOAD = (KUEUE, "Workload")
CLUSTER_QUEUE = (KUEUE, "ClusterQueue")
LOCAL_QUEUE = (KUEUE, "LocalQueue")
KUEUE_MANAGER = "kueue-controller-manager"
KAI_MANAGER = "kai-scheduler"

GPU = "nvidia.com/gpu"
# The API groups whose changes may change an admission decision.
GANG_GROUPS = frozenset({"scheduling.run.ai", "kueue.x-k8s.io"})


def is_gpu_driver(driver: str) -> bool:
    return "gpu" in driver.split(".")


def int_or(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


OWNED = "sim.modelfleet.dev/kueue-workload"


def resource_version(obj: Mapping[str, Any]) -> int:
    return int_or(meta_of(obj).get("resourceVersion"), 0)


def workload_name(kind: str, name: str, uid: str) -> str:
    digest = hashlib.sha256(f"{name}/{uid}".encode()).hexdigest()[:5]
    return f"{kind}-{name}"[:57] + f"-{digest}"


def new_workload(
    owner: Mapping[str, Any],
    namespace: str,
    name: str,
    queue: str,
    pod_sets: list[dict[str, Any]],
    origin: Mapping[str, str],
) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {OWNED: "true"},
            "annotations": {f"sim.modelfleet.dev/{k}": v for k, v in origin.items()},
            "ownerReferences": [owner_reference(owner)],
        },
        "spec": {"queueName": queue, "podSets": pod_sets, "active": True},
    }


def gpu_flavors(cluster_queue: Mapping[str, Any]) -> list[tuple[str, int]]:
    out = []
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for resource in flavor.get("resources") or []:
                if resource.get("name") == GPU:
                    out.append((str(flavor.get("name")), int_or(resource.get("nominalQuota"), 0)))
    return out


__all__ = [
    "CLUSTER_QUEUE",
    "GANG_GROUPS",
    "GPU",
    "KAI_MANAGER",
    "KAI_QUEUE",
    "KAI_QUEUE_LABEL",
    "KAI_SCHEDULER",
    "KUEUE",
    "KUEUE_MANAGER",
    "KUEUE_QUEUE_LABEL",
    "LOCAL_QUEUE",
    "OWNED",
    "PODGROUP",
    "POD_GROUP_ANNOTATION",
    "WORKLOAD",
    "gpu_flavors",
    "int_or",
    "is_gpu_driver",
    "new_workload",
    "resource_version",
    "workload_name",
]
