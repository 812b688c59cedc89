"""Per-image engine faults of the simulator: which image a fault applies to, which arguments an
image rejects, when its engines crash and whether they serve again (pure decisions), and what a
cluster then shows: an engine that exits at start with argparse's error, one that serves, crashes
and serves again after its restart."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from pydantic import ValidationError
from render_factories import VLLM_IMAGE, gpus, replica, standalone

from modelfleet.adapters.kube_client import KubeCluster
from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.loading import load_paths
from modelfleet.rendering.facts import ClusterFacts
from modelfleet.rendering.replica_manifests import RenderedReplica, render_replica
from modelfleet.sim.apiserver.store import ClusterStore
from modelfleet.sim.controllers import engine_logs, workload_faults
from modelfleet.sim.controllers.kubelet import StartupPolicy
from modelfleet.sim.faults import FaultConfig, ImageFault
from modelfleet.sim.loop_thread import LoopThread
from modelfleet.sim.serving.engine import TPOT_BUCKETS, TTFT_BUCKETS, EngineProfile, EngineState
from modelfleet.sim.serving.openai_api import fails, handle_engine
from modelfleet.sim.simulated_fleet import SimulatedFleet

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
L4 = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA L4"'
WAIT = 30.0


def _pod(image: str, *args: str) -> dict[str, Any]:
    return {
        "spec": {
            "containers": [{"name": "engine", "image": image, "args": list(args)}, {"image": "x"}]
        }
    }


def test_the_first_matching_image_glob_applies() -> None:
    faults = FaultConfig(
        image_faults={
            "vllm/vllm-openai:bad-*": ImageFault(error_rate_5xx=1.0),
            "vllm/*": ImageFault(crash_after_seconds=5),
        }
    )
    assert faults.image_fault("vllm/vllm-openai:bad-1") == ImageFault(error_rate_5xx=1.0)
    assert faults.image_fault("vllm/vllm-openai:v0.11.0") == ImageFault(crash_after_seconds=5)
    assert faults.image_fault("lmsysorg/sglang:v0.5") is None
    # Only the engine (first container) counts.
    assert workload_faults.engine_fault(faults, _pod("sglang", "x")) is None


def test_image_faults_reject_nonsense() -> None:
    with pytest.raises(ValidationError):
        FaultConfig.model_validate({"image_faults": {"x": {"error_rate_5xx": 1.5}}})
    with pytest.raises(ValidationError):
        FaultConfig.model_validate({"image_faults": {"x": {"crash_after": 3}}})


def test_rejected_arguments_are_the_flags_the_image_does_not_know() -> None:
    fault = ImageFault(reject_args=["--enable-*"])
    pod = _pod("vllm", "serve", "m", "--enable-magic=1", "--port", "8000", "--enable-x")
    assert workload_faults.rejected_args(fault, pod) == ["--enable-magic=1", "--enable-x"]
    assert workload_faults.rejected_args(fault, _pod("vllm", "serve", "m")) == []
    assert workload_faults.rejected_args(None, pod) == []
    lines = engine_logs.rejected_args_lines({"image": "vllm/vllm-openai:x"}, ["--enable-x"])
    assert lines[-1] == "vllm serve: error: unrecognized arguments: --enable-x"


def test_crash_delay_and_whether_a_restart_serves_again() -> None:
    crasher = FaultConfig(image_faults={"bad": ImageFault(crash_after_seconds=120)})
    pod = _pod("bad")
    assert workload_faults.crash_delay(crasher, ("w", "ns"), pod) == 120
    assert workload_faults.runs_again(crasher.image_fault("bad"), pod)
    # The cluster-wide fault: crashes and never serves again; the image's setting comes first.
    legacy = FaultConfig(crash_after_ready_seconds=3)
    assert workload_faults.crash_delay(legacy, ("w", "ns"), _pod("good")) == 3
    both = legacy.model_copy(update={"image_faults": crasher.image_faults})
    assert workload_faults.crash_delay(both, ("w", "ns"), pod) == 120
    assert not workload_faults.runs_again(None, pod)
    rejecting = ImageFault(reject_args=["*"], crash_after_seconds=1)
    assert not workload_faults.runs_again(rejecting, _pod("bad", "--port=1"))


def test_only_completions_meet_the_error_rate() -> None:
    assert fails("/v1/completions", 0.2, 0.1)
    assert fails("/v1/chat/completions", 1.0, 0.999)
    assert not fails("/v1/completions", 0.2, 0.2)
    assert not fails("/health", 1.0, 0.0)
    assert not fails("/v1/models", 1.0, 0.0)


# ------------------------------------------------------------------------- on a cluster


def _start(tmp_path: Path, faults: dict[str, Any]) -> LoopThread[SimulatedFleet]:
    result = load_paths([str(QUICKSTART / "classes.yaml"), str(QUICKSTART / "clusters.yaml")])
    classes = [r for r in result.resources if isinstance(r, InferenceClass)]
    clusters = [r for r in result.resources if isinstance(r, InferenceCluster)]
    policy = StartupPolicy(default_seconds=0, crash_backoff_seconds=0.2)
    return SimulatedFleet.start_in_thread(
        classes, clusters, state_dir=tmp_path, startup=policy, faults={"l4-dev": faults}
    )


def _with_image(node: Any, image: str) -> Any:
    if isinstance(node, dict):
        return {k: image if v == VLLM_IMAGE else _with_image(v, image) for k, v in node.items()}
    if isinstance(node, list):
        return [_with_image(v, image) for v in node]
    return node


def _replica(image: str, *args: str) -> RenderedReplica:
    engine = standalone(pool="gpu-l4", requests=[gpus(1, "gpu", L4)], args=["serve", "m", *args])
    rep = replica(
        _with_image(engine, image),
        cluster="l4-dev",
        name="qwen-5ab63",
        deployment="qwen",
    )
    return render_replica(rep, ClusterFacts())


def _wait(
    fleet: LoopThread[SimulatedFleet], check: Callable[[ClusterStore], Awaitable[bool]]
) -> None:
    store = fleet.target.store("l4-dev")

    async def wait() -> None:
        sub = store.subscribe()
        try:
            async with asyncio.timeout(WAIT):
                while not await check(store):
                    await sub.get()
        finally:
            sub.close()

    fleet.run(wait(), timeout=WAIT + 5)


async def _engine_statuses(store: ClusterStore, namespace: str) -> list[dict[str, Any]]:
    pods = await store.list("v1", "Pod", namespace=namespace)
    return [
        p["status"]["containerStatuses"][0]
        for p in pods
        if p["spec"]["containers"][0]["image"].startswith("vllm")
        and p.get("status", {}).get("containerStatuses")
    ]


def test_an_image_that_rejects_its_arguments_exits_at_start(tmp_path: Path) -> None:
    bad = "vllm/vllm-openai:v0.11.0-strict"
    faults = {"image_faults": {bad: {"reject_args": ["--enable-magic"]}}}
    with _start(tmp_path, faults) as fleet:
        rendered = _replica(bad, "--enable-magic")
        with KubeCluster(fleet.target.kubeconfig("l4-dev"), request_timeout=5.0) as kube:
            for manifest in rendered.manifests():
                kube.apply(manifest)
            namespace = rendered.readiness[0].namespace

            async def restarted(store: ClusterStore) -> bool:
                return any(
                    s.get("restartCount", 0) >= 2 for s in await _engine_statuses(store, namespace)
                )

            _wait(fleet, restarted)
            verdict = kube.readiness(rendered.readiness[0])
        assert not verdict.ready
        assert "CrashLoopBackOff" in verdict.reason
        assert "exit code 2" in verdict.reason
        store = fleet.target.store("l4-dev")
        [pod] = [
            p
            for p in fleet.run(store.list("v1", "Pod", namespace=namespace), timeout=5)
            if p["spec"]["containers"][0]["image"] == bad
        ]
        lines = [
            text
            for _, text in store.pod_logs.lines(
                namespace, pod["metadata"]["name"], "engine", pod["metadata"]["uid"]
            )
        ]
        assert "vllm serve: error: unrecognized arguments: --enable-magic" in lines
        assert not any("Application startup complete" in line for line in lines)


def test_an_image_that_crashes_after_a_while_serves_again_after_each_restart(
    tmp_path: Path,
) -> None:
    faults = {"image_faults": {VLLM_IMAGE: {"crash_after_seconds": 0.3}}}
    with _start(tmp_path, faults) as fleet:
        rendered = _replica(VLLM_IMAGE)
        with KubeCluster(fleet.target.kubeconfig("l4-dev"), request_timeout=5.0) as kube:
            for manifest in rendered.manifests():
                kube.apply(manifest)
        namespace = rendered.readiness[0].namespace

        async def ready_after_restarts(store: ClusterStore) -> bool:
            return any(
                s.get("restartCount", 0) >= 2 and s.get("ready") is True
                for s in await _engine_statuses(store, namespace)
            )

        _wait(fleet, ready_after_restarts)


async def test_a_slow_image_multiplies_its_time_to_first_token() -> None:
    assert FaultConfig().image_fault("x") is None
    assert ImageFault().ttft_factor == 1.0
    with pytest.raises(ValidationError):
        ImageFault(ttft_factor=0.5)
    faults = FaultConfig(image_faults={"vllm/*:slow": ImageFault(ttft_factor=20)})
    fault = faults.image_fault("vllm/vllm-openai:slow")
    assert fault is not None
    assert fault.ttft_factor == 20

    async def served(slower: float) -> EngineState:
        engine = EngineState(model="m", pod="p", profile=EngineProfile(time_to_first_token=0.01))

        async def handler(request: web.Request) -> web.StreamResponse:
            return await handle_engine(request, engine, slower=slower)

        app = web.Application()
        app.router.add_post("/v1/completions", handler)
        async with TestClient(TestServer(app)) as client:
            for _ in range(3):
                response = await client.post(
                    "/v1/completions", json={"model": "m", "prompt": "hi", "max_tokens": 1}
                )
                assert response.status == 200
        return engine

    slow = await served(20)
    # Every first token took at least 20 x 10 ms: none in the buckets up to 0.1 s, and the
    # histogram the engine exports says so.
    assert slow.ttft_count == 3
    assert slow.ttft_counts[TTFT_BUCKETS.index(0.1)] == 0
    assert slow.ttft_sum >= 3 * 0.2
    assert 'vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 0.0' in (
        slow.metrics_text()
    )
    plain = await served(1)
    assert plain.ttft_count == 3
    assert plain.ttft_sum >= 3 * 0.01


async def test_a_slow_decoding_image_multiplies_its_time_per_output_token() -> None:
    assert ImageFault().tpot_factor == 1.0
    with pytest.raises(ValidationError):
        ImageFault(tpot_factor=0.5)
    faults = FaultConfig(image_faults={"vllm/*:slow": ImageFault(tpot_factor=20)})
    fault = faults.image_fault("vllm/vllm-openai:slow")
    assert fault is not None
    assert (fault.tpot_factor, fault.ttft_factor) == (20, 1.0)

    async def served(slower_decode: float) -> EngineState:
        # 1,000 tokens/s: 1 ms between tokens, 20 ms with the fault.
        engine = EngineState(model="m", pod="p", profile=EngineProfile(tokens_per_second=1000))

        async def handler(request: web.Request) -> web.StreamResponse:
            return await handle_engine(request, engine, slower_decode=slower_decode)

        app = web.Application()
        app.router.add_post("/v1/completions", handler)
        async with TestClient(TestServer(app)) as client:
            for stream in (False, True):
                body = {"model": "m", "prompt": "hi", "max_tokens": 4, "stream": stream}
                response = await client.post("/v1/completions", json=body)
                assert response.status == 200
                await response.read()
        return engine

    slow = await served(20)
    # Two requests of 4 tokens: 3 gaps each, every one at least 20 ms, none in the buckets up
    # to 10 ms, and the histogram the engine exports says so.
    assert slow.tpot_count == 6
    assert slow.tpot_counts[TPOT_BUCKETS.index(0.01)] == 0
    assert slow.tpot_sum >= 6 * 0.02
    text = slow.metrics_text()
    assert 'vllm:time_per_output_token_seconds_bucket{le="0.01",model_name="m"} 0.0' in text
    assert 'vllm:time_per_output_token_seconds_bucket{le="+Inf",model_name="m"} 6.0' in text
    assert 'vllm:time_per_output_token_seconds_count{model_name="m"} 6.0' in text
    plain = await served(1)
    assert plain.tpot_count == 6
    assert 6 * 0.001 <= plain.tpot_sum < slow.tpot_sum
