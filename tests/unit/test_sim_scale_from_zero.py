"""Scale from zero at the simulated gateway: a request for a route with no Ready backend is held
when the client allows it (``x-modelfleet-wait-for-backend``), counted in the gateway's metrics
(read through the API server's service proxy with the product's metrics adapter), and answered
once a replica is Ready; or answered 503 when its wait runs out; and never held without the
header."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from render_factories import gpus, replica, standalone

from modelfleet.adapters.kube_client import KubeCluster
from modelfleet.adapters.metrics import KubeMetricsReader
from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.loading import load_paths
from modelfleet.api.naming import LABEL_SERVING
from modelfleet.rendering.facts import ClusterFacts
from modelfleet.rendering.gateway_address import gateway_authority
from modelfleet.rendering.replica_manifests import RenderedReplica, render_replica
from modelfleet.sim.loop_thread import LoopThread
from modelfleet.sim.serving.backend_wait import (
    CLIENT_TIMEOUT_HEADER,
    MAX_HELD_PER_ROUTE,
    MAX_WAIT_SECONDS,
    RETRY_AFTER_SECONDS,
    WAIT_HEADER,
    WAITING_METRIC,
    RouteKey,
    WaitingRequests,
    requested_wait,
    unavailable,
)
from modelfleet.sim.simulated_fleet import SimulatedFleet

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
L4 = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("20Gi")) >= 0'
MODEL = "Qwen/Qwen3-0.6B"
WAIT = 10.0
ROUTE = "ms-svc"


def test_the_wait_header_is_parsed_and_capped() -> None:
    assert requested_wait({}) == 0.0
    assert requested_wait({WAIT_HEADER: "2.5"}) == 2.5
    assert requested_wait({WAIT_HEADER: "99999"}) == MAX_WAIT_SECONDS
    for bad in ("-1", "0", "soon", "nan", "inf"):
        assert requested_wait({WAIT_HEADER: bad}) == 0.0
    # Never held past the client's own read timeout (the OpenAI SDKs send it) ...
    assert requested_wait({WAIT_HEADER: "60", CLIENT_TIMEOUT_HEADER: "20.0"}) == 20.0
    assert requested_wait({WAIT_HEADER: "5", CLIENT_TIMEOUT_HEADER: "20.0"}) == 5.0
    assert requested_wait({WAIT_HEADER: "5", CLIENT_TIMEOUT_HEADER: "none"}) == 5.0
    # ... and the client's timeout alone does not opt in.
    assert requested_wait({CLIENT_TIMEOUT_HEADER: "600"}) == 0.0


def test_metrics_keep_a_series_per_route_ever_held() -> None:
    waiting = WaitingRequests()
    key = RouteKey("mf-ml-team", ROUTE, "svc")
    with waiting.hold(key):
        assert waiting.waiting(key) == 1
        assert f"{WAITING_METRIC}{{{key.labels()}}} 1.0" in waiting.metrics_text()
    waiting.timed_out(key)
    text = waiting.metrics_text()
    assert f"{WAITING_METRIC}{{{key.labels()}}} 0.0" in text
    assert f"gateway_requests_wait_timeouts_total{{{key.labels()}}} 1.0" in text


def test_a_route_holds_a_bounded_number_and_refuses_one_more() -> None:
    waiting = WaitingRequests(limit=2)
    key, other = RouteKey("mf-ml-team", ROUTE, "svc"), RouteKey("mf-ml-team", "ms-other", "o")
    assert WaitingRequests().limit == MAX_HELD_PER_ROUTE
    with waiting.hold(key):
        assert not waiting.full(key)
        with waiting.hold(key):
            assert waiting.full(key)
            assert not waiting.full(other)  # the bound is per route
        assert not waiting.full(key)
    waiting.rejected(key)
    assert f"gateway_requests_hold_rejected_total{{{key.labels()}}} 1.0" in waiting.metrics_text()


def test_a_503_for_want_of_a_backend_says_why_and_when_to_retry() -> None:
    key = RouteKey("mf-ml-team", ROUTE, "svc")
    answer = unavailable("backend_queue_full", key, "100 requests are held", 10)
    assert answer.status == 503
    assert answer.headers == {"Retry-After": "10"}
    assert answer.body == {
        "error": {
            "message": f"no healthy upstream for route mf-ml-team/{ROUTE}: 100 requests are "
            "held; retry after 10 s",
            "type": "service_unavailable",
            "code": "backend_queue_full",
        }
    }


def _refused(answer: httpx.Response, code: str) -> str:
    """The 503's message, after checking it is the clear one: JSON, its code, Retry-After."""
    assert answer.status_code == 503, answer.text
    assert answer.headers["Retry-After"] == str(RETRY_AFTER_SECONDS)
    error = answer.json()["error"]
    assert error["code"] == code
    assert error["type"] == "service_unavailable"
    message: str = error["message"]
    assert message.endswith(f"retry after {RETRY_AFTER_SECONDS} s")
    return message


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[LoopThread[SimulatedFleet]]:
    result = load_paths([str(QUICKSTART / "classes.yaml"), str(QUICKSTART / "clusters.yaml")])
    assert not result.errors
    classes = [r for r in result.resources if isinstance(r, InferenceClass)]
    clusters = [r for r in result.resources if isinstance(r, InferenceCluster)]
    with SimulatedFleet.start_in_thread(
        classes, clusters, state_dir=tmp_path, startup_seconds=0
    ) as f:
        yield f


def _replica() -> RenderedReplica:
    rep = replica(
        standalone(pool="gpu-l4", requests=[gpus(1, "gpu", L4)], args=[f"--model={MODEL}"]),
        cluster="l4-dev",
        name="qwen-5ab63",
        deployment="qwen",
    )
    return render_replica(rep, ClusterFacts())


def _service_route(namespace: str, replica_name: str) -> list[dict[str, Any]]:
    """A front-door route for ModelService "svc" whose only backend selects the replica's
    pods: with the replica not there yet, the service has no Ready backend."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "svc-backend", "namespace": namespace},
            "spec": {
                "selector": {LABEL_SERVING: replica_name},
                "ports": [{"name": "http", "port": 8000, "targetPort": 8000}],
            },
        },
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {
                "name": ROUTE,
                "namespace": namespace,
                "labels": {"modelfleet.dev/service": "svc"},
            },
            "spec": {
                "parentRefs": [{"name": "inference-gateway", "namespace": "modelfleet-system"}],
                "rules": [
                    {
                        "matches": [{"path": {"type": "PathPrefix", "value": "/ml-team/svc"}}],
                        "filters": [
                            {
                                "type": "URLRewrite",
                                "urlRewrite": {
                                    "path": {
                                        "type": "ReplacePrefixMatch",
                                        "replacePrefixMatch": "/",
                                    }
                                },
                            }
                        ],
                        "backendRefs": [{"name": "svc-backend", "port": 8000}],
                    }
                ],
            },
        },
    ]


async def _waiting(kubeconfig: Path, namespace: str) -> float | None:
    """The gateway's held-request gauge for route ms-svc, read as the autoscaler would."""
    async with KubeMetricsReader(kubeconfig) as reader:
        text = await reader.scrape_service("modelfleet-system", "inference-gateway", "metrics")
    key = RouteKey(namespace, ROUTE, "svc")
    for line in text.splitlines():
        if line.startswith(f"{WAITING_METRIC}{{{key.labels()}}} "):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_a_request_waits_for_the_first_replica_and_gets_its_answer(
    fleet: LoopThread[SimulatedFleet],
) -> None:
    rendered = _replica()
    ns = rendered.namespace
    kubeconfig = fleet.target.kubeconfig("l4-dev")
    with KubeCluster(kubeconfig, request_timeout=5.0) as kube:
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for manifest in _service_route(ns, rendered.replica):
            kube.apply(manifest)
        gateway = kube.get(
            "gateway.networking.k8s.io/v1", "Gateway", "inference-gateway", "modelfleet-system"
        )
        assert gateway is not None
        url = f"http://{gateway_authority(gateway)}/ml-team/svc/v1/chat/completions"
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}

        # Without the header: 503 at once, nothing held, and how to be held is said.
        message = _refused(httpx.post(url, json=body), "no_ready_backend")
        assert f"send {WAIT_HEADER}: <seconds>" in message
        assert asyncio.run(_waiting(kubeconfig, ns)) is None
        # What the openai client makes of it: a 503 whose error says why and when to retry.
        client = openai.OpenAI(
            base_url=url.removesuffix("/chat/completions"), api_key="unused", max_retries=0
        )
        with pytest.raises(openai.InternalServerError) as refused:
            client.chat.completions.create(model=MODEL, messages=body["messages"], max_tokens=3)
        assert refused.value.status_code == 503
        assert refused.value.response.headers["Retry-After"] == str(RETRY_AFTER_SECONDS)
        assert isinstance(refused.value.body, dict)
        assert refused.value.body["code"] == "no_ready_backend"

        # With a short wait and still no replica: held, then 503 when the wait runs out.
        started = time.monotonic()
        late = httpx.post(url, json=body, headers={WAIT_HEADER: "0.5"}, timeout=10)
        message = _refused(late, "backend_wait_timeout")
        assert f"route {ns}/{ROUTE}: held 0.5 s and no backend became Ready" in message
        assert time.monotonic() - started >= 0.5
        assert asyncio.run(_waiting(kubeconfig, ns)) == 0.0
        # The route holds one request at most here: a second is refused at once.
        fleet.target.serving("l4-dev").waiting.limit = 1

        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(
                httpx.post, url, json=body, headers={WAIT_HEADER: "60"}, timeout=70
            )

            async def held() -> bool:
                for _ in range(int(WAIT / 0.05)):
                    if await _waiting(kubeconfig, ns) == 1.0:
                        return True
                    await asyncio.sleep(0.05)
                return False

            assert asyncio.run(held()), "the request was never counted as waiting"
            assert not pending.done()
            started = time.monotonic()
            full = httpx.post(url, json=body, headers={WAIT_HEADER: "60"}, timeout=70)
            assert time.monotonic() - started < WAIT  # not held: answered at once
            message = _refused(full, "backend_queue_full")
            assert "the route holds its limit of 1 waiting request(s) already" in message
            assert not pending.done()
            # What the autoscaler does on seeing the gauge: the first replica starts.
            for manifest in rendered.manifests():
                kube.apply(manifest)
            fleet.run(fleet.target.settle(WAIT), timeout=WAIT + 5)
            answer = pending.result(timeout=WAIT)
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"]
        assert answer.headers["x-modelfleet-served-by"].startswith(rendered.replica)
        assert asyncio.run(_waiting(kubeconfig, ns)) == 0.0
