"""A synthetic fleet for the Fleet-at-scale test: N clusters x 8 pools of two classes, and
one-GPU deployments. Deterministic."""

from __future__ import annotations

from typing import Any

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelDeployment
from modelfleet.contracts.fleet_state import ClusterEntry

GPU = "gpu.nvidia.com"
API = "modelfleet.dev/v1alpha1"
# class -> GPUs per node
CLASS_GPUS = {"l40s-x4": 4, "h100-x8": 8}
POOLS = 8
NODES_PER_POOL = 2


def inference_class(name: str, gpus: int) -> InferenceClass:
    return InferenceClass.model_validate(
        {
            "apiVersion": API,
            "kind": "InferenceClass",
            "metadata": {"name": name},
            "spec": {
                "devices": [
                    {
                        "name": "gpu",
                        "driver": GPU,
                        "deviceClassName": GPU,
                        "count": gpus,
                        "attributes": {"productName": {"string": name}},
                        "capacity": {"memory": {"value": "80Gi"}},
                    }
                ]
            },
        }
    )


def classes() -> dict[str, InferenceClass]:
    return {name: inference_class(name, gpus) for name, gpus in CLASS_GPUS.items()}


def pool_class(pool: int) -> str:
    return "l40s-x4" if pool % 2 else "h100-x8"


def inference_cluster(name: str, region: str, nodes: int = NODES_PER_POOL) -> InferenceCluster:
    return InferenceCluster.model_validate(
        {
            "apiVersion": API,
            "kind": "InferenceCluster",
            "metadata": {"name": name, "labels": {"region": region}},
            "spec": {
                "cluster": {"source": "Existing"},
                "nodePools": [
                    {"name": f"gpu-{p}", "className": pool_class(p), "nodeCount": nodes}
                    for p in range(POOLS)
                ],
            },
        }
    )


def cluster_name(i: int) -> str:
    return f"c-{i:04d}"


def cluster_entries(count: int, nodes: int = NODES_PER_POOL) -> dict[str, ClusterEntry]:
    """Ready clusters with gateways (``nodes`` per pool), as the Fleet carries them."""
    out = {}
    for i in range(count):
        name = cluster_name(i)
        spec = inference_cluster(name, ("us-east", "us-west", "eu")[i % 3], nodes)
        out[name] = ClusterEntry(
            spec=spec.model_dump(mode="json", by_alias=True, exclude_defaults=True),
            ready=True,
            reason="probed",
            gateway=f"gateway.{name}.invalid",
        )
    return out


def capacity_gpus(clusters: int) -> dict[tuple[str, str], int]:
    return {
        (cluster_name(c), f"gpu-{p}"): NODES_PER_POOL * CLASS_GPUS[pool_class(p)]
        for c in range(clusters)
        for p in range(POOLS)
    }


def one_gpu_deployment(name: str, namespace: str, replicas: int = 1) -> ModelDeployment:
    member: dict[str, Any] = {
        "role": "Standalone",
        "nodeSelector": {
            "devices": [
                {
                    "name": "gpu",
                    "count": 1,
                    "selectors": [
                        {"cel": f'device.capacity["{GPU}"].memory.compareTo(quantity("40Gi")) >= 0'}
                    ],
                }
            ]
        },
        "template": {"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai"}]}},
    }
    return ModelDeployment.model_validate(
        {
            "apiVersion": API,
            "kind": "ModelDeployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "replicas": replicas,
                "template": {"spec": {"engines": [{"name": "vllm", "members": [member]}]}},
            },
        }
    )
