"""The gang scheduler a simulated cluster runs when its InferenceCluster says so
(``spec.scheduler``): the CustomResourceDefinitions a KAI or Kueue install serves, and the
objects the cluster's owner would have created (a KAI Queue, or a Kueue ResourceFlavor and
ClusterQueue) with a GPU quota of every GPU the cluster has. Admission itself is
:mod:`.controllers.gang_admission`.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure: builds
JSON-like dicts from the api models; no I/O.
"""

from __future__ import annotations

from typing import Any

from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.schedulers import SchedulerType

__all__ = [
    "GPU_RESOURCE",
    "KAI_GROUP",
    "KUEUE_FLAVOR",
    "KUEUE_GROUP",
    "gang_scheduler_manifests",
]

KAI_GROUP = "scheduling.run.ai"
KUEUE_GROUP = "kueue.x-k8s.io"
GPU_RESOURCE = "nvidia.com/gpu"
# One flavor for every GPU of the cluster: the sim does not steer pods by flavor.
KUEUE_FLAVOR = "gpu"


def _crd(group: str, version: str, kind: str, plural: str, *, namespaced: bool) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced" if namespaced else "Cluster",
            "names": {
                "plural": plural,
                "singular": kind.lower(),
                "kind": kind,
                "listKind": f"{kind}List",
            },
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                    "subresources": {"status": {}},
                }
            ],
        },
    }


def _kai(queue: str, gpus: int) -> list[dict[str, Any]]:
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    return [
        _crd(KAI_GROUP, "v2alpha2", "PodGroup", "podgroups", namespaced=True),
        _crd(KAI_GROUP, "v2", "Queue", "queues", namespaced=False),
        {
            "apiVersion": f"{KAI_GROUP}/v2",
            "kind": "Queue",
            "metadata": {"name": queue},
            "spec": {
                "resources": {
                    # Hard quota: KAI's limit caps what the queue may hold at once.
                    "gpu": {"quota": gpus, "limit": gpus, "overQuotaWeight": 1},
                    "cpu": dict(unlimited),
                    "memory": dict(unlimited),
                }
            },
        },
    ]


def _kueue(cluster_queue: str, gpus: int) -> list[dict[str, Any]]:
    version = f"{KUEUE_GROUP}/v1beta1"
    return [
        _crd(KUEUE_GROUP, "v1beta1", "ResourceFlavor", "resourceflavors", namespaced=False),
        _crd(KUEUE_GROUP, "v1beta1", "ClusterQueue", "clusterqueues", namespaced=False),
        _crd(KUEUE_GROUP, "v1beta1", "LocalQueue", "localqueues", namespaced=True),
        _crd(KUEUE_GROUP, "v1beta1", "Workload", "workloads", namespaced=True),
        {"apiVersion": version, "kind": "ResourceFlavor", "metadata": {"name": KUEUE_FLAVOR}},
        {
            "apiVersion": version,
            "kind": "ClusterQueue",
            "metadata": {"name": cluster_queue},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": [GPU_RESOURCE],
                        "flavors": [
                            {
                                "name": KUEUE_FLAVOR,
                                "resources": [{"name": GPU_RESOURCE, "nominalQuota": gpus}],
                            }
                        ],
                    }
                ],
            },
        },
    ]


def gang_scheduler_manifests(cluster: InferenceCluster, gpus: int) -> list[dict[str, Any]]:
    """CRDs first, then the queue objects; nothing for a cluster without a gang scheduler."""
    scheduler = cluster.spec.scheduler
    if scheduler is None:
        return []
    if scheduler.type is SchedulerType.KAI and scheduler.kai is not None:
        return _kai(scheduler.kai.queue, gpus)
    if scheduler.type is SchedulerType.KUEUE and scheduler.kueue is not None:
        return _kueue(scheduler.kueue.cluster_queue, gpus)
    return []
