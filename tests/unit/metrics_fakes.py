"""A stand-in for a cluster's API server (pods by label, the pod and service proxy routes)
serving vLLM-shaped metrics text, and for a Prometheus server; shared by the metrics adapter and
activity tests. Real HTTP on 127.0.0.1, a kubeconfig with a bearer token pointing at it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from modelfleet.api.naming import LABEL_SERVING

TOKEN = "s3cr3t-token-value"
NS = "mf-ml"


def vllm_text(waiting: float, running: float, cache: float) -> str:
    return f"""\
# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{model_name="qwen3-8b"}} {running}
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{model_name="qwen3-8b"}} {waiting}
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{{model_name="qwen3-8b"}} {cache}
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{model_name="qwen3-8b"}} 12345.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{le="0.1",model_name="qwen3-8b"}} 5.0
vllm:time_to_first_token_seconds_bucket{{le="+Inf",model_name="qwen3-8b"}} 9.0
vllm:time_to_first_token_seconds_count{{model_name="qwen3-8b"}} 9.0
vllm:time_to_first_token_seconds_sum{{model_name="qwen3-8b"}} 1.7
"""


def pod(
    name: str, replica: str, *, ready: bool = True, port: int = 8000, namespace: str = NS
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": {LABEL_SERVING: replica}},
        "spec": {
            "containers": [{"name": "engine", "ports": [{"name": "http", "containerPort": port}]}]
        },
        "status": {
            "phase": "Running" if ready else "Pending",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


@dataclass
class FakeApiServer:
    """Pods by label, and the proxy routes; records the requests it answered."""

    pods: list[dict[str, Any]] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)  # "<pod>:<port>" -> /metrics text
    broken: set[str] = field(default_factory=set)  # "<pod>:<port>" answering 500
    seen: list[tuple[str, str]] = field(default_factory=list)  # (path, Authorization)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/api/v1/namespaces/{ns}/pods", self.list_pods)
        app.router.add_get("/api/v1/namespaces/{ns}/pods/{target}/proxy/metrics", self.proxy)
        app.router.add_get("/api/v1/namespaces/{ns}/services/{target}/proxy/metrics", self.proxy)
        app.router.add_get("/prom/api/v1/query", self.query)
        return app

    async def list_pods(self, request: web.Request) -> web.Response:
        selector = request.query.get("labelSelector", "")
        self.seen.append(
            (f"{request.path}?labelSelector={selector}", request.headers.get("Authorization", ""))
        )
        key, _, value = request.query.get("labelSelector", "").partition("=")
        items = [
            p
            for p in self.pods
            if p["metadata"]["namespace"] == request.match_info["ns"]
            and p["metadata"]["labels"].get(key) == value
        ]
        return web.json_response({"kind": "PodList", "apiVersion": "v1", "items": items})

    async def proxy(self, request: web.Request) -> web.Response:
        self.seen.append((request.path, request.headers.get("Authorization", "")))
        target = request.match_info["target"]
        if target in self.broken:
            return web.Response(status=500, text=f"error, token was {TOKEN}")
        if target not in self.texts:
            return web.Response(status=404, text="not found")
        return web.Response(text=self.texts[target], content_type="text/plain")

    async def query(self, request: web.Request) -> web.Response:
        promql = request.query["query"]
        if promql == "sum(vllm:num_requests_waiting)":
            result = [{"metric": {"pod": "a"}, "value": [1.0, "7"]}]
            result.append({"metric": {"pod": "b"}, "value": [1.0, "5"]})
            return web.json_response(
                {"status": "success", "data": {"resultType": "vector", "result": result}}
            )
        if promql == "scalar(42)":
            return web.json_response(
                {"status": "success", "data": {"resultType": "scalar", "result": [1.0, "42"]}}
            )
        return web.json_response({"status": "error", "error": "bad query"}, status=400)


@dataclass
class Served:
    fake: FakeApiServer
    url: str
    kubeconfig: Path


def write_kubeconfig(path: Path, url: str, token: str | None = TOKEN) -> Path:
    user: dict[str, Any] = {"token": token} if token else {}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": url}}],
                "users": [{"name": "c", "user": user}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "c"}}],
                "current-context": "c",
            }
        )
    )
    return path


@asynccontextmanager
async def serve(kubeconfig: Path) -> AsyncIterator[Served]:
    fake = FakeApiServer()
    runner = web.AppRunner(fake.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    url = f"http://127.0.0.1:{port}"
    write_kubeconfig(kubeconfig, url)
    try:
        yield Served(fake, url, kubeconfig)
    finally:
        await runner.cleanup()
