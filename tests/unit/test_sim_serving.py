"""Simulated engines and gateway, driven the way a user drives them: rendered replicas applied
through the Kubernetes adapter, then the official ``openai`` client against an engine's port and
through the cluster's gateway address (read from the Gateway's status, as product code does)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from render_factories import engine, gpus, member, replica, standalone

from modelfleet.adapters.kube_client import KubeCluster
from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.loading import load_paths
from modelfleet.rendering.facts import ClusterFacts
from modelfleet.rendering.gateway_address import gateway_authority
from modelfleet.rendering.replica_manifests import RenderedReplica, render_replica
from modelfleet.sim.loop_thread import LoopThread
from modelfleet.sim.serving import EngineProfile
from modelfleet.sim.serving.engine import EngineState, synthetic_tokens
from modelfleet.sim.serving.model_args import served_model_name
from modelfleet.sim.serving.routes import (
    BackendRef,
    match_request,
    pick_backend,
    rewrite_path,
)
from modelfleet.sim.simulated_fleet import SimulatedFleet

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
L4 = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("20Gi")) >= 0'
WAIT = 10.0
MODEL = "Qwen/Qwen3-0.6B"


# ------------------------------------------------------------------------- pure parts


@pytest.mark.parametrize(
    ("container", "expected"),
    [
        ({"args": [f"--model={MODEL}"]}, MODEL),
        ({"args": ["--model", MODEL, "--served-model-name", "qwen,alias"]}, "qwen"),
        ({"command": ["vllm", "serve", MODEL, "--port", "8001"]}, MODEL),
        ({"command": ["python", "-m", "sglang.launch_server", "--model-path", "m"]}, "m"),
        ({"args": ["--port", "8000"]}, None),
    ],
)
def test_served_model_name_reads_the_command_line(
    container: dict[str, Any], expected: str | None
) -> None:
    assert served_model_name(container) == expected


def _route(name: str, prefix: str, *backends: dict[str, Any], ts: str = "t1") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "creationTimestamp": ts},
        "spec": {
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": prefix}}],
                    "filters": [
                        {
                            "type": "URLRewrite",
                            "urlRewrite": {
                                "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}
                            },
                        }
                    ],
                    "backendRefs": list(backends),
                }
            ]
        },
    }


def test_longest_prefix_wins_element_wise_and_rewrites() -> None:
    routes = [_route("short", "/a/"), _route("long", "/a/b/")]
    match = match_request(routes, "/a/b/v1/models")
    assert match is not None
    assert match.route == "long"
    assert rewrite_path("/a/b/v1/models", match, match.rewrite) == "/v1/models"
    assert rewrite_path("/a/b", match, match.rewrite) == "/"
    # "/a/bc" is not under "/a/b/": element-wise matching.
    other = match_request(routes, "/a/bc/x")
    assert other is not None
    assert other.route == "short"
    assert match_request(routes, "/z") is None


def test_backend_filter_rewrites_to_its_own_prefix() -> None:
    ref = {
        "name": "ep",
        "port": 80,
        "filters": [
            {
                "type": "URLRewrite",
                "urlRewrite": {
                    "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/ml/r-1/"}
                },
            }
        ],
    }
    match = match_request([_route("svc", "/ml/svc/", ref)], "/ml/svc/v1/chat/completions")
    assert match is not None
    backend = match.backends[0]
    assert rewrite_path("/ml/svc/v1/chat/completions", match, backend.rewrite) == (
        "/ml/r-1/v1/chat/completions"
    )


def test_weighted_pick_follows_the_weights() -> None:
    backends = [
        BackendRef("", "Service", "a", "ns", 80, 9),
        BackendRef("", "Service", "b", "ns", 80, 1),
        BackendRef("", "Service", "c", "ns", 80, 0),
    ]
    rng = random.Random(7)
    picks = [pick_backend(backends, rng) for _ in range(2000)]
    names = [p.name for p in picks if p is not None]
    assert "c" not in names
    # 99.9% binomial bounds for p=0.9, n=2000: 1800 +- 3.29*sqrt(180) ~ 1800 +- 44.
    assert 1756 <= names.count("a") <= 1844
    assert pick_backend([backends[2]], rng) is None


def test_synthetic_tokens_are_deterministic() -> None:
    assert synthetic_tokens("m", "hi", 5) == synthetic_tokens("m", "hi", 5)
    assert len(synthetic_tokens("m", "hi", 40)) == 40
    assert synthetic_tokens("m", "hi", 8) != synthetic_tokens("m", "hello there", 8)


def test_gateway_authority_appends_a_non_default_port() -> None:
    listener: dict[str, Any] = {"protocol": "HTTP", "port": 80}
    gw = {
        "spec": {"listeners": [listener]},
        "status": {"addresses": [{"value": "10.0.0.1"}]},
    }
    assert gateway_authority(gw) == "10.0.0.1"
    listener["port"] = 8080
    assert gateway_authority(gw) == "10.0.0.1:8080"
    assert gateway_authority({"spec": {}, "status": {}}) is None


# ------------------------------------------------------------------------- on a fleet


def _quickstart() -> tuple[list[InferenceClass], list[InferenceCluster]]:
    result = load_paths([str(QUICKSTART / "classes.yaml"), str(QUICKSTART / "clusters.yaml")])
    assert not result.errors
    classes = [r for r in result.resources if isinstance(r, InferenceClass)]
    clusters = [r for r in result.resources if isinstance(r, InferenceCluster)]
    return classes, clusters


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[LoopThread[SimulatedFleet]]:
    classes, clusters = _quickstart()
    profile = EngineProfile(max_concurrency=2)
    with SimulatedFleet.start_in_thread(
        classes, clusters, state_dir=tmp_path, startup_seconds=0, engines=profile
    ) as f:
        yield f


def _l4_replica(name: str = "qwen-5ab63", model: str = MODEL) -> RenderedReplica:
    rep = replica(
        standalone(pool="gpu-l4", requests=[gpus(1, "gpu", L4)], args=[f"--model={model}"]),
        cluster="l4-dev",
        name=name,
        deployment=name.rsplit("-", 1)[0],
    )
    return render_replica(rep, ClusterFacts())


def _deploy(fleet: LoopThread[SimulatedFleet], rendered: RenderedReplica) -> KubeCluster:
    kube = KubeCluster(fleet.target.kubeconfig("l4-dev"), request_timeout=5.0)
    for manifest in rendered.manifests():
        kube.apply(manifest)
    fleet.run(fleet.target.settle(WAIT), timeout=WAIT + 5)
    return kube


def _gateway(kube: KubeCluster) -> str:
    gw = kube.get(
        "gateway.networking.k8s.io/v1", "Gateway", "inference-gateway", "modelfleet-system"
    )
    assert gw is not None
    authority = gateway_authority(gw)
    assert authority is not None
    assert authority.startswith("127.0.0.1:")
    return f"http://{authority}"


def _engine_pod(fleet: LoopThread[SimulatedFleet], rendered: RenderedReplica) -> tuple[str, str]:
    plane = fleet.target.serving("l4-dev")
    pods = fleet.call(lambda: plane.serving_pods)
    mine = [p for p in pods if p[0] == rendered.namespace and p[1].startswith(rendered.replica)]
    assert len(mine) == 1, pods
    return mine[0]


def test_ready_engine_answers_the_openai_api(fleet: LoopThread[SimulatedFleet]) -> None:
    rendered = _l4_replica()
    with _deploy(fleet, rendered):
        plane = fleet.target.serving("l4-dev")
        ns, pod = _engine_pod(fleet, rendered)
        url = fleet.call(lambda: plane.engine_url(ns, pod))
        assert url is not None
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        assert [m.id for m in client.models.list()] == [MODEL]
        chat = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "say hi please"}], max_tokens=5
        )
        assert chat.choices[0].message.content
        assert chat.usage is not None
        assert (chat.usage.prompt_tokens, chat.usage.completion_tokens) == (3, 5)
        again = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "say hi please"}], max_tokens=5
        )
        assert again.choices[0].message.content == chat.choices[0].message.content
        stream = client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "say hi please"}],
            max_tokens=5,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == chat.choices[0].message.content
        assert chunks[-1].usage is not None
        assert chunks[-1].usage.completion_tokens == 5
        completion = client.completions.create(model=MODEL, prompt="one two", max_tokens=3)
        assert completion.usage is not None
        assert completion.usage.total_tokens == 5
        with pytest.raises(openai.NotFoundError):
            client.completions.create(model="other", prompt="x")
        metrics = httpx.get(f"{url}/metrics").text
        assert f'vllm:generation_tokens_total{{model_name="{MODEL}"}} 18.0' in metrics
        assert f'vllm:prompt_tokens_total{{model_name="{MODEL}"}} 11.0' in metrics
        assert "vllm:num_requests_running" in metrics
        assert "vllm:gpu_cache_usage_perc" in metrics
        count = re.search(r"vllm:time_to_first_token_seconds_count\{[^}]*\} (\S+)", metrics)
        assert count is not None
        assert float(count.group(1)) == 4.0
        assert httpx.get(f"{url}/health").status_code == 200


def test_gateway_routes_a_replica_path_to_its_pool(fleet: LoopThread[SimulatedFleet]) -> None:
    rendered = _l4_replica()
    with _deploy(fleet, rendered) as kube:
        base = f"{_gateway(kube)}/ml-team/{rendered.replica}/v1"
        client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0)
        assert [m.id for m in client.models.list()] == [MODEL]
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=[{"role": "user", "content": "hello"}]
        )
        assert raw.headers["x-modelfleet-served-by"].startswith(rendered.replica)
        streamed = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hello"}], stream=True
        )
        text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
        assert text == raw.parse().choices[0].message.content
        missing = httpx.get(f"{_gateway(kube)}/nowhere/v1/models")
        assert missing.status_code == 404


def test_engine_queues_past_its_concurrency_limit(fleet: LoopThread[SimulatedFleet]) -> None:
    state = EngineState(model="m", pod="p", profile=EngineProfile(max_concurrency=2))

    async def scenario() -> tuple[int, int]:
        release = asyncio.Event()

        async def hold() -> None:
            async with state.slot(10):
                await release.wait()

        tasks = [asyncio.create_task(hold()) for _ in range(3)]
        # One scheduling turn runs every new task up to its first suspension: two hold a slot
        # and wait for the release, the third queues on the semaphore.
        await asyncio.sleep(0)
        seen = (state.running, state.waiting)
        release.set()
        await asyncio.gather(*tasks)
        return seen

    assert fleet.run(scenario()) == (2, 1)
    assert (state.running, state.waiting, state.running_tokens) == (0, 0, 0)


def test_nothing_ready_is_503_and_stopping_withdraws_the_engine(
    fleet: LoopThread[SimulatedFleet],
) -> None:
    fleet.call(fleet.target.update_faults, "l4-dev", {"never_ready": ["qwen-*-main-*"]})
    rendered = _l4_replica()
    with _deploy(fleet, rendered) as kube:
        response = httpx.get(f"{_gateway(kube)}/ml-team/{rendered.replica}/v1/models")
        assert response.status_code == 503
        assert fleet.call(lambda: fleet.target.serving("l4-dev").serving_pods) == []
    ok = _l4_replica("other-1a2b3")
    with _deploy(fleet, ok) as kube:
        ns, pod = _engine_pod(fleet, ok)
        plane = fleet.target.serving("l4-dev")
        assert fleet.call(lambda: plane.engine_url(ns, pod)) is not None
        kube.delete("v1", "Pod", pod, ns)
        fleet.run(fleet.target.settle(WAIT), timeout=WAIT + 5)
        assert fleet.call(lambda: plane.engine_url(ns, pod)) is None


def _front_door(backends: list[dict[str, Any]], auth: str | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "matches": [{"path": {"type": "PathPrefix", "value": "/ml-team/svc/"}}],
        "backendRefs": backends,
    }
    if auth:
        rule["filters"] = [
            {"type": "ExtensionRef", "extensionRef": {"group": "", "kind": "Secret", "name": auth}}
        ]
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "svc", "namespace": "ml-team"},
        "spec": {
            "parentRefs": [{"name": "inference-gateway", "namespace": "modelfleet-system"}],
            "rules": [rule],
        },
    }


def _external(name: str, url: str) -> list[dict[str, Any]]:
    parts = httpx.URL(url)
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": "ml-team"},
            "spec": {"ports": [{"name": "http", "port": parts.port, "protocol": "TCP"}]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": name,
                "namespace": "ml-team",
                "labels": {"kubernetes.io/service-name": name},
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": [parts.host], "conditions": {"ready": True}}],
            "ports": [{"name": "http", "port": parts.port, "protocol": "TCP"}],
        },
    ]


def _backend(name: str, port: int, weight: int, prefix: str) -> dict[str, Any]:
    return {
        "name": name,
        "port": port,
        "weight": weight,
        "filters": [
            {
                "type": "URLRewrite",
                "urlRewrite": {
                    "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": prefix}
                },
            }
        ],
    }


def test_front_door_splits_by_weight_over_selectorless_services_and_checks_keys(
    fleet: LoopThread[SimulatedFleet],
) -> None:
    first, second = _l4_replica("alpha-11111"), _l4_replica("beta-22222")
    with _deploy(fleet, first) as kube:
        _deploy(fleet, second).close()
        gateway = _gateway(kube)
        port = int(gateway.rsplit(":", 1)[1])
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml-team"}})
        for manifest in _external("ep-a", gateway) + _external("ep-b", gateway):
            kube.apply(manifest)
        digest = hashlib.sha256(b"sk-test").hexdigest()
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "svc-keys", "namespace": "ml-team"},
                "data": {"key-0": base64.b64encode(digest.encode()).decode()},
            }
        )
        kube.apply(
            _front_door(
                [
                    _backend("ep-a", port, 3, f"/ml-team/{first.replica}/"),
                    _backend("ep-b", port, 1, f"/ml-team/{second.replica}/"),
                ],
                auth="svc-keys",
            )
        )
        url = f"{gateway}/ml-team/svc/v1/chat/completions"
        body = {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "max_tokens": 1}
        assert httpx.post(url, json=body).status_code == 401
        wrong = httpx.post(url, json=body, headers={"Authorization": "Bearer sk-nope"})
        assert wrong.status_code == 401
        served: list[str] = []
        with httpx.Client(headers={"Authorization": "Bearer sk-test"}) as client:
            for _ in range(400):
                response = client.post(url, json=body)
                assert response.status_code == 200
                served.append(response.headers["x-modelfleet-served-by"])
        alpha = sum(s.startswith("alpha-") for s in served)
        # p=0.75, n=400: 300 +- 3.29*sqrt(75) ~ 300 +- 29 (99.9%).
        assert 271 <= alpha <= 329, alpha
        assert alpha + sum(s.startswith("beta-") for s in served) == 400


def test_prefill_decode_requests_reach_the_decode_sidecar(
    fleet: LoopThread[SimulatedFleet],
) -> None:
    def phase(name: str, label: str, *args: str) -> dict[str, Any]:
        return engine(
            name,
            member(
                "Standalone",
                pool="gpu-l4",
                requests=[gpus(1, "gpu", L4)],
                args=[f"--model={MODEL}", *args],
            ),
            phase=label,
        )

    rep = replica(
        phase("prefill", "Prefill"),
        phase("decode", "Decode", "--port=8200"),
        mode="PrefillDecode",
        cluster="l4-dev",
        name="pd-33333",
        deployment="pd",
    )
    rendered = render_replica(rep, ClusterFacts())
    with _deploy(fleet, rendered) as kube:
        plane = fleet.target.serving("l4-dev")
        pods = fleet.call(lambda: plane.serving_pods)
        decode = [p for p in pods if "-decode-" in p[1] or "-gen-" in p[1]]
        assert decode, pods
        # The decode pod answers on the sidecar's pool port and on the engine's own port.
        assert fleet.call(lambda: plane.engine_url(*decode[0], port=8000)) is not None
        assert fleet.call(lambda: plane.engine_url(*decode[0], port=8200)) is not None
        client = openai.OpenAI(
            base_url=f"{_gateway(kube)}/ml-team/{rendered.replica}/v1",
            api_key="unused",
            max_retries=0,
        )
        for _ in range(5):
            raw = client.completions.with_raw_response.create(model=MODEL, prompt="p")
            assert raw.headers["x-modelfleet-served-by"] == decode[0][1]


def test_a_dark_cluster_serves_nothing(fleet: LoopThread[SimulatedFleet]) -> None:
    rendered = _l4_replica()
    with _deploy(fleet, rendered) as kube:
        url = f"{_gateway(kube)}/ml-team/{rendered.replica}/v1/models"
        assert httpx.get(url).status_code == 200
        fleet.call(fleet.target.update_faults, "l4-dev", {"dark": True, "dark_mode": "reset"})
        try:
            with pytest.raises(httpx.TransportError):
                httpx.get(url, timeout=5)
        finally:
            fleet.call(fleet.target.update_faults, "l4-dev", {"dark": False})
        assert httpx.get(url).status_code == 200
