"""Small builders of ModelReplicas for the rendering tests.

Replicas are built the way they arrive on the wire: a camelCase document validated by
``ModelReplica.model_validate``. Each builder returns a plain dict first so a test can tweak any
field before validating.
"""

from __future__ import annotations

import copy
from typing import Any

from modelfleet.api.deployments import ModelReplica

VLLM_IMAGE = "vllm/vllm-openai:v0.11.0"
H100 = 'device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA H100")'
H100_MEMORY = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("79Gi")) >= 0'


def gpus(count: int, name: str = "gpu", *selectors: str) -> dict[str, Any]:
    """A DRA device request for ``count`` NVIDIA GPUs."""
    return {
        "name": name,
        "deviceClassName": "gpu.nvidia.com",
        "count": count,
        "selectors": [{"cel": cel} for cel in (selectors or (H100,))],
    }


def container(
    args: list[str] | None = None,
    *,
    command: list[str] | None = None,
    env: list[dict[str, Any]] | None = None,
    image: str = VLLM_IMAGE,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": "engine", "image": image}
    if command is not None:
        spec["command"] = command
    if args is not None:
        spec["args"] = args
    if env is not None:
        spec["env"] = env
    return spec


def member(
    role: str = "Standalone",
    *,
    pool: str = "h100",
    requests: list[dict[str, Any]] | None = None,
    args: list[str] | None = None,
    command: list[str] | None = None,
    env: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    pull_secrets: list[str] | None = None,
    nodes: int | None = None,
    image: str = VLLM_IMAGE,
) -> dict[str, Any]:
    engine = container(args, command=command, env=env, image=image)
    template: dict[str, Any] = {"spec": {"containers": [engine]}}
    if labels or annotations:
        template["metadata"] = {"labels": labels or {}, "annotations": annotations or {}}
    if pull_secrets:
        template["spec"]["imagePullSecrets"] = [{"name": n} for n in pull_secrets]
    doc: dict[str, Any] = {"role": role, "nodePoolName": pool, "template": template}
    if requests:
        doc["deviceRequests"] = requests
    if nodes is not None:
        doc["worker"] = {"nodes": nodes}
    return doc


def engine(
    name: str, *members: dict[str, Any], copies: int = 1, phase: str | None = None
) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": name, "copies": copies, "members": list(members)}
    if phase is not None:
        doc["phase"] = phase
    return doc


def standalone(name: str = "main", *, copies: int = 1, **member_kw: Any) -> dict[str, Any]:
    member_kw.setdefault("requests", [gpus(1)])
    return engine(name, member("Standalone", **member_kw), copies=copies)


def gang(
    name: str = "main",
    *,
    nodes: int = 1,
    leader: dict[str, Any] | None = None,
    worker: dict[str, Any] | None = None,
    copies: int = 1,
    phase: str | None = None,
) -> dict[str, Any]:
    """A Leader + Worker engine; both claim 8 GPUs unless overridden."""
    leader_kw = {"requests": [gpus(8)], **(leader or {})}
    worker_kw = {"requests": [gpus(8)], **(worker or {})}
    return engine(
        name,
        member("Leader", **leader_kw),
        member("Worker", nodes=nodes, **worker_kw),
        copies=copies,
        phase=phase,
    )


def replica_doc(
    *engines: dict[str, Any],
    name: str = "qwen-5ab63",
    namespace: str = "ml-team",
    deployment: str = "qwen",
    cluster: str = "gke-us-central",
    mode: str = "Unified",
) -> dict[str, Any]:
    return {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "ModelReplica",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "clusterName": cluster,
            "deployment": deployment,
            "index": 0,
            "serving": {"mode": mode},
            "engines": list(copy.deepcopy(engines) or [standalone()]),
        },
    }


def replica(*engines: dict[str, Any], **kw: Any) -> ModelReplica:
    return ModelReplica.model_validate(replica_doc(*engines, **kw))


def prefill_decode(
    *,
    prefill: dict[str, Any] | None = None,
    decode: dict[str, Any] | None = None,
    **kw: Any,
) -> ModelReplica:
    """A PrefillDecode replica; by default a 1-GPU prefill engine and a 1-GPU decode engine
    serving on --port=8200."""
    prefill = prefill or engine(
        "prefill",
        member("Standalone", requests=[gpus(1)], args=["--model=Qwen/Qwen3-8B"]),
        phase="Prefill",
    )
    decode = decode or engine(
        "decode",
        member("Standalone", requests=[gpus(1)], args=["--model=Qwen/Qwen3-8B", "--port=8200"]),
        phase="Decode",
    )
    return replica(prefill, decode, mode="PrefillDecode", **kw)


# --- golden cases --------------------------------------------------------------------------------


def single_gpu_standalone() -> ModelReplica:
    return replica(standalone(args=["--model=Qwen/Qwen3-0.6B"]))


def eight_gpu_standalone() -> ModelReplica:
    """No cache: ``--model`` names the Hugging Face repo and passes through untouched."""
    return replica(
        standalone(
            requests=[gpus(8, "gpu", H100, H100_MEMORY)],
            args=["--model=Qwen/Qwen3-235B-A22B-FP8", "--tensor-parallel-size=8"],
            env=[
                {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}
            ],
            pull_secrets=["registry-creds"],
        ),
        deployment="qwen-235b",
        name="qwen-235b-0c1d2",
    )


def gang_two_by_eight() -> ModelReplica:
    """A Leader + 1 Worker, each on a node with 8 GPUs; the commands are passed verbatim."""
    return replica(
        gang(
            "llama",
            nodes=1,
            leader={
                "command": ["sh", "-c"],
                "args": [
                    "ray start --head --port=6379 && vllm serve meta-llama/Llama-3.1-405B "
                    "--tensor-parallel-size 8 --pipeline-parallel-size 2"
                ],
            },
            worker={
                "command": ["sh", "-c"],
                "args": ["ray start --address=$(MODELPLANE_LEADER_ADDRESS):6379 --block"],
            },
        ),
        deployment="llama-405b",
        name="llama-405b-9f3e1",
    )


def claimless_leader() -> ModelReplica:
    """The leader only coordinates (no devices); two workers carry 8 GPUs each."""
    return replica(
        engine(
            "main",
            member("Leader", args=["--coordinator"]),
            member("Worker", nodes=2, requests=[gpus(8)], args=["--worker"]),
        ),
        name="coord-4d2a7",
        deployment="coord",
    )


def copies_standalone() -> ModelReplica:
    return replica(standalone(copies=3, args=["--model=Qwen/Qwen3-8B"]))


def prefill_decode_gang_decode() -> ModelReplica:
    """Prefill on single pods; decode on a 2-node gang serving on the default port 8001."""
    return prefill_decode(
        prefill=engine(
            "fill",
            member(
                "Standalone",
                requests=[gpus(2)],
                args=[
                    "--model=Qwen/Qwen3-32B",
                    "--block-size=32",
                    '--kv-transfer-config={"kv_connector":"NixlConnector","kv_role":"kv_producer"}',
                ],
            ),
            copies=2,
            phase="Prefill",
        ),
        decode=gang(
            "gen",
            nodes=1,
            phase="Decode",
            leader={
                "args": [
                    "--model=Qwen/Qwen3-32B",
                    "--block-size",
                    "64",
                    '--kv-transfer-config={"kv_connector":"NixlConnector","kv_role":"kv_consumer"}',
                ]
            },
            worker={"args": ["--worker"]},
        ),
        name="qwen-pd-7c0b2",
        deployment="qwen-pd",
    )


def multiple_device_requests() -> ModelReplica:
    """The deployment asked for GPUs, a DRA RDMA NIC and a synthetic EFA device; the scheduler
    dropped the synthetic one, so only the two DRA requests reach the replica."""
    nic = {
        "name": "rdma",
        "deviceClassName": "rdma.mellanox.com",
        "count": 1,
        "selectors": [{"cel": 'device.attributes["rdma.mellanox.com"].linkType == "infiniband"'}],
    }
    return replica(
        standalone(requests=[gpus(8), nic], args=["--model=Qwen/Qwen3-32B"]),
        name="qwen-rdma-2b9d4",
        deployment="qwen-rdma",
    )


GOLDEN_CASES = {
    "single-gpu-standalone": single_gpu_standalone,
    "eight-gpu-standalone": eight_gpu_standalone,
    "gang-2x8": gang_two_by_eight,
    "claimless-leader": claimless_leader,
    "copies": copies_standalone,
    "prefill-decode-gang-decode": prefill_decode_gang_decode,
    "multiple-device-requests": multiple_device_requests,
}
