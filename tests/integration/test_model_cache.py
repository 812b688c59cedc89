"""ModelCache staging end to end (issue 14, items 1-3): a cache on two simulated clusters hydrates
with visible progress, survives a worker SIGKILL mid-hydration and an injected download failure
(retried after its back-off), and a deployment referencing it is placed only where the cache is
staged or being staged (a replica on the hydrating cluster waits in ``wait-model-cache``), mounts
it read-only and becomes Ready after it. The token goes from the worker's secrets
directory into the clusters' Secret and nowhere else, and is removed once the cache is Ready;
deleting the cache keeps the volumes while the deployment mounts them.

Runs in a ``crash_env`` of its own: the worker is a process that is killed."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from crash_env import CrashEnv, all_ready, crash_env, tolerant
from integration_support import wait_for

from modelfleet.api.caches import ModelCache
from modelfleet.api.deployments import ModelDeployment
from modelfleet.api.kinds import parse_resource
from modelfleet.cache.workflow import CacheWorkflow
from modelfleet.cli import columns
from modelfleet.cli.apply import apply_resource
from modelfleet.cli.resources import fetch
from modelfleet.contracts.cache_payloads import CacheStatus, DeleteCache, cache_id
from modelfleet.contracts.ids import replica_id
from modelfleet.contracts.status import ReplicaProgress, ReplicaStep
from modelfleet.rendering.model_cache import auth_secret_name, claim_name
from modelfleet.sim.simulated_fleet import SimulatedFleet

NS = "cache-it"
WORKLOADS = f"mf-{NS}"
TOKEN = "hf_sEcReT-cache-it-123"
SLOW, FAILING, LEFT_OUT = "h200-west", "h100-east", "l4-dev"


def _cache() -> ModelCache:
    cache = parse_resource(
        {
            "apiVersion": "modelplane.ai/v1alpha1",
            "kind": "ModelCache",
            "metadata": {"name": "coder", "namespace": NS},
            "spec": {
                "source": "HuggingFace",
                "huggingFace": {
                    "repo": "Qwen/Qwen3-8B",
                    "revision": "b968826",
                    "sizeGiB": 6,
                    "authSecret": {"name": "hf-token"},
                },
                "clusterSelector": {"matchLabels": {"tier": "prod"}},
            },
        }
    )
    assert isinstance(cache, ModelCache)
    return cache


def _deployment() -> ModelDeployment:
    member = {
        "role": "Standalone",
        "nodeSelector": {
            "devices": [
                {
                    "name": "gpu",
                    "count": 1,
                    "selectors": [{"cel": 'device.driver == "gpu.nvidia.com"'}],
                }
            ]
        },
        "template": {
            "spec": {
                "containers": [
                    {"name": "engine", "image": "vllm/vllm-openai:v0.23.0", "args": ["/mnt/models"]}
                ]
            }
        },
    }
    dep = parse_resource(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "ModelDeployment",
            "metadata": {"name": "coder", "namespace": NS},
            "spec": {
                "replicas": 2,
                "template": {
                    "spec": {
                        "modelCacheRef": {"name": "coder"},
                        "tolerations": [{"key": "frontier-only", "operator": "Exists"}],
                        "engines": [{"name": "vllm", "members": [member]}],
                    }
                },
            },
        }
    )
    assert isinstance(dep, ModelDeployment)
    return dep


def _worker_secret(fleet: SimulatedFleet) -> None:
    path = fleet.kubeconfig_dir / "secrets" / NS / "hf-token" / "HF_TOKEN"
    path.parent.mkdir(parents=True)
    path.write_text(TOKEN + "\n")


async def _cache_status(env: CrashEnv) -> CacheStatus | None:
    async def query() -> CacheStatus:
        handle = env.temporal.get_workflow_handle(cache_id(NS, "coder"))
        status: CacheStatus = await handle.query(CacheWorkflow.status)
        return status

    return await tolerant(query)


async def _wait_cache(env: CrashEnv, check: Any, limit: float, what: str) -> CacheStatus:
    seen: list[CacheStatus] = []

    async def probe() -> CacheStatus | None:
        status = await _cache_status(env)
        if status is None:
            return None
        seen[:] = [status]
        return status if check(status) else None

    try:
        return await wait_for(probe, limit, what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last: {seen[0] if seen else None}") from None


def _on(status: CacheStatus, cluster: str) -> str:
    return next((c.summary() for c in status.clusters if c.cluster == cluster), "absent")


def _objects(env: CrashEnv, cluster: str, kind: str) -> list[dict[str, Any]]:
    store = env.fleet.store(cluster)
    rt = next(rt for rt in store.registry if rt.kind == kind)
    return store.list_objects(rt, namespace=WORKLOADS).items


async def test_a_cache_hydrates_through_a_crash_and_a_failure_and_gates_its_deployment(
    tmp_path: Path,
) -> None:
    async with crash_env(tmp_path, startup_seconds=0.3, before_worker=_worker_secret) as env:
        # 6 GiB at 512 MiB/s: ~12 s on the slow cluster; the other fails half-way at first.
        env.fleet.set_faults(SLOW, {"download_mib_per_second": 512})
        env.fleet.set_faults(
            FAILING, {"download_mib_per_second": 4096, "fail_downloads": ["*hydrate*"]}
        )
        await apply_resource(env.temporal, _cache())
        await apply_resource(env.temporal, _deployment())

        # Replicas go where the cache is being staged and wait there, in their step
        # wait-model-cache, for the weights; the left-out cluster never gets one.
        async def waiting() -> ReplicaProgress | None:
            status = await env.status(NS, "coder")
            for r in status.replicas:
                handle = env.temporal.get_workflow_handle(replica_id(NS, r.name))
                progress: ReplicaProgress = await handle.query(
                    "progress", result_type=ReplicaProgress
                )
                if progress.step is ReplicaStep.MODEL_CACHE and "Hydrating" in progress.reason:
                    assert r.cluster in {SLOW, FAILING}
                    return progress
            return None

        held = await wait_for(waiting, 30, "a replica waiting in wait-model-cache")
        assert held.reason.startswith("model cache coder: Hydrating")

        def mid_way(s: CacheStatus) -> bool:
            slow = _on(s, SLOW)
            return (
                slow.startswith("Hydrating ")
                and slow != "Hydrating 0%"
                and "Connection reset by peer" in _on(s, FAILING)
            )

        status = await _wait_cache(env, mid_way, 30, "progress on one, a failure on the other")
        assert {c.cluster for c in status.clusters} == {SLOW, FAILING}
        assert "attempt 1 failed" in _on(status, FAILING)

        # The worker wrote the token Secret for the download (still there for the retry).
        secret = next(
            s
            for s in _objects(env, FAILING, "Secret")
            if s["metadata"]["name"] == auth_secret_name(NS, "coder")
        )
        assert base64.b64decode(secret["data"]["HF_TOKEN"]).decode() == TOKEN

        await env.kill_worker()
        assert env.worker is not None
        assert env.worker.returncode == -9
        env.fleet.set_faults(FAILING, {"fail_downloads": []})
        await env.start_worker()

        staged = await _wait_cache(env, lambda s: s.phase == "Staged", 90, "staged on both")
        assert staged.ready == staged.total == 2
        # What `get modelcaches` reads and shows.
        (listed,) = await fetch(env.temporal, "ModelCache", NS)
        row = columns.row(listed, wide=False, all_namespaces=False)
        assert row[2] == "2/2"
        assert f"{FAILING}: Ready" in row[4]
        assert f"{SLOW}: Ready" in row[4]
        # The token is in no workflow history.
        history = await env.temporal.get_workflow_handle(cache_id(NS, "coder")).fetch_history()
        assert TOKEN not in history.to_json()
        final = await env.wait_status(NS, "coder", all_ready(2), 90, "Ready on the cache")
        # The waiting replica became Ready where it was; nothing went where it is not staged.
        placed_on = {r.cluster for r in final.replicas}
        assert SLOW in placed_on
        assert placed_on <= {SLOW, FAILING}
        for cluster in (SLOW, FAILING):
            # Ready leaves the volume and nothing else: no Job, no token.
            assert _objects(env, cluster, "Job") == []
            assert _objects(env, cluster, "Secret") == []
            (claim,) = _objects(env, cluster, "PersistentVolumeClaim")
            assert claim["status"]["phase"] == "Bound"
        for cluster in placed_on:
            engines = [
                d
                for d in _objects(env, cluster, "Deployment")
                if d["spec"]["template"]["spec"]["containers"][0]["name"] == "engine"
            ]
            assert engines
            for workload in engines:
                pod = workload["spec"]["template"]["spec"]
                assert {
                    "name": "model-cache",
                    "persistentVolumeClaim": {
                        "claimName": claim_name(NS, "coder"),
                        "readOnly": True,
                    },
                } in pod["volumes"]
                mounts = pod["containers"][0]["volumeMounts"]
                assert {"name": "model-cache", "mountPath": "/mnt/models", "readOnly": True} in (
                    mounts
                )
        assert _objects(env, LEFT_OUT, "PersistentVolumeClaim") == []

        # Deleting the cache keeps the volumes while the deployment mounts them.
        handle = env.temporal.get_workflow_handle(cache_id(NS, "coder"))
        await handle.execute_update(CacheWorkflow.delete, DeleteCache())
        await _wait_cache(
            env,
            lambda s: all("mounted by" in c.message for c in s.clusters),
            30,
            "volumes kept while mounted",
        )
        assert len(_objects(env, SLOW, "PersistentVolumeClaim")) == 1
        dep = env.temporal.get_workflow_handle(f"deployment/{NS}/coder")
        await dep.execute_update("delete")
        await dep.result()
        await handle.result()
        for cluster in (SLOW, FAILING):
            assert _objects(env, cluster, "PersistentVolumeClaim") == []
        assert TOKEN.encode() not in env.worker_output()
