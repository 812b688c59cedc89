"""The simulated API server's proxy subresources (pods/<name>:<port>/proxy/..., services/<name>:
<port>/proxy/...), read with the product's own metrics adapter over HTTP, as on a real cluster."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from render_factories import gpus, replica, standalone

from modelfleet.adapters.kube_client import KubeCluster
from modelfleet.adapters.metrics import KubeMetricsReader, MetricsError, parse_samples
from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.loading import load_paths
from modelfleet.api.naming import LABEL_SERVING
from modelfleet.rendering.facts import ClusterFacts
from modelfleet.rendering.replica_manifests import RenderedReplica, render_replica
from modelfleet.sim.apiserver.proxy import split_target
from modelfleet.sim.loop_thread import LoopThread
from modelfleet.sim.simulated_fleet import SimulatedFleet

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
L4 = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("20Gi")) >= 0'
MODEL = "Qwen/Qwen3-0.6B"
WAIT = 10.0
WAITING = "vllm:num_requests_waiting"
SUCCESS = "vllm:request_success_total"


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


def _deploy(fleet: LoopThread[SimulatedFleet], name: str = "qwen-5ab63") -> RenderedReplica:
    rep = replica(
        standalone(pool="gpu-l4", requests=[gpus(1, "gpu", L4)], args=[f"--model={MODEL}"]),
        cluster="l4-dev",
        name=name,
        deployment=name.rsplit("-", 1)[0],
    )
    rendered = render_replica(rep, ClusterFacts())
    with KubeCluster(fleet.target.kubeconfig("l4-dev"), request_timeout=5.0) as kube:
        for manifest in rendered.manifests():
            kube.apply(manifest)
    fleet.run(fleet.target.settle(WAIT), timeout=WAIT + 5)
    return rendered


def _pod(fleet: LoopThread[SimulatedFleet], rendered: RenderedReplica) -> str:
    plane = fleet.target.serving("l4-dev")
    pods = [p for ns, p in fleet.call(lambda: plane.serving_pods) if ns == rendered.namespace]
    assert len(pods) == 1, pods
    return pods[0]


async def _read(kubeconfig: Path, *calls: tuple[str, ...]) -> list[str | MetricsError]:
    async with KubeMetricsReader(kubeconfig) as reader:
        out: list[str | MetricsError] = []
        for call in calls:
            kind, ns, name, port = call
            try:
                if kind == "pod":
                    out.append(await reader.scrape_pod(ns, name, int(port)))
                else:
                    out.append(await reader.scrape_service(ns, name, port))
            except MetricsError as exc:
                out.append(exc)
        return out


def test_target_names_split_like_the_real_server() -> None:
    assert split_target("p") == ("", "p", "")
    assert split_target("p:8000") == ("", "p", "8000")
    assert split_target("https:p:metrics") == ("https", "p", "metrics")
    assert split_target("http:p") == ("http", "p", "")


def test_pod_proxy_reaches_the_engine_and_counts_its_requests(
    fleet: LoopThread[SimulatedFleet],
) -> None:
    rendered = _deploy(fleet)
    ns, pod = rendered.namespace, _pod(fleet, rendered)
    kubeconfig = fleet.target.kubeconfig("l4-dev")
    plane = fleet.target.serving("l4-dev")
    engine_url = fleet.call(lambda: plane.engine_url(ns, pod))
    for _ in range(3):
        body = {"model": MODEL, "prompt": "hi", "max_tokens": 2}
        assert httpx.post(f"{engine_url}/v1/completions", json=body).status_code == 200
    [text] = asyncio.run(_read(kubeconfig, ("pod", ns, pod, "8000")))
    assert isinstance(text, str)
    assert parse_samples(text, [SUCCESS, WAITING]) == {SUCCESS: 3.0, WAITING: 0.0}
    # The product's whole read: pods by label, then each Ready pod through the proxy.
    load = asyncio.run(_replica_load(kubeconfig, ns, rendered.replica))
    assert load == {SUCCESS: 3.0}
    # Other proxied paths and methods go through too (the engine's OpenAI API).
    server = fleet.target.server
    # At the cluster's own root (the kubeconfig's server) and under /clusters/<name> on the
    # main port alike.
    for root in (server.cluster_url("l4-dev"), server.prefixed_url("l4-dev")):
        base = f"{root}/api/v1/namespaces/{ns}/pods/{pod}:8000"
        models = httpx.get(f"{base}/proxy/v1/models", headers={"Authorization": "Bearer x"})
        assert models.status_code == 200, root
        assert models.json()["data"][0]["id"] == MODEL


async def _replica_load(kubeconfig: Path, ns: str, replica_name: str) -> dict[str, float]:
    async with KubeMetricsReader(kubeconfig) as reader:
        return await reader.replica_load(ns, replica_name, [SUCCESS])


def test_service_proxy_picks_a_ready_selected_pod(fleet: LoopThread[SimulatedFleet]) -> None:
    rendered = _deploy(fleet)
    ns = rendered.namespace
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "engines", "namespace": ns},
        "spec": {
            "selector": {LABEL_SERVING: rendered.replica},
            "ports": [{"name": "http", "port": 80, "targetPort": 8000}],
        },
    }
    empty = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "nobody", "namespace": ns},
        "spec": {"selector": {"app": "none"}, "ports": [{"port": 80, "targetPort": 8000}]},
    }
    with KubeCluster(fleet.target.kubeconfig("l4-dev"), request_timeout=5.0) as kube:
        kube.apply(service)
        kube.apply(empty)
    by_number, by_name, nobody, missing = asyncio.run(
        _read(
            fleet.target.kubeconfig("l4-dev"),
            ("svc", ns, "engines", "80"),
            ("svc", ns, "engines", "http"),
            ("svc", ns, "nobody", "80"),
            ("svc", ns, "absent", "80"),
        )
    )
    assert isinstance(by_number, str)
    assert WAITING in by_number
    assert isinstance(by_name, str)
    assert WAITING in by_name
    assert isinstance(nobody, MetricsError)
    assert "HTTP 503" in str(nobody)
    assert isinstance(missing, MetricsError)
    assert "HTTP 404" in str(missing)
    assert not missing.retryable


def test_missing_unready_and_dark_pods_fail_as_a_real_server_does(
    fleet: LoopThread[SimulatedFleet],
) -> None:
    fleet.call(fleet.target.update_faults, "l4-dev", {"never_ready": ["qwen-*-main-*"]})
    rendered = _deploy(fleet)
    ns = rendered.namespace
    kubeconfig = fleet.target.kubeconfig("l4-dev")
    store = fleet.target.store("l4-dev")
    pods = fleet.call(
        lambda: store.list_objects(store.resource_type("v1", "Pod"), namespace=ns).items
    )
    unready = str(pods[0]["metadata"]["name"])
    gone, not_serving, wrong_port = asyncio.run(
        _read(
            kubeconfig,
            ("pod", ns, "no-such-pod", "8000"),
            ("pod", ns, unready, "8000"),
            ("pod", ns, unready, "9999"),
        )
    )
    assert isinstance(gone, MetricsError)
    assert "HTTP 404" in str(gone)
    assert isinstance(not_serving, MetricsError)
    assert "HTTP 503" in str(not_serving)
    assert not_serving.retryable
    assert isinstance(wrong_port, MetricsError)
    assert "HTTP 503" in str(wrong_port)

    fleet.call(fleet.target.update_faults, "l4-dev", {"never_ready": []})
    ok = _deploy(fleet, "other-1a2b3")
    pod = next(
        p
        for n, p in fleet.call(lambda: fleet.target.serving("l4-dev").serving_pods)
        if n == ok.namespace and p.startswith("other")
    )
    fleet.call(fleet.target.update_faults, "l4-dev", {"error_rate_500": 1.0})
    [failed] = asyncio.run(_read(kubeconfig, ("pod", ok.namespace, pod, "8000")))
    assert isinstance(failed, MetricsError)
    assert "HTTP 500" in str(failed)
