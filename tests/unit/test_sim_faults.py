"""Fault injection of the simulated API server, observed from the official client's side."""

from __future__ import annotations

import json
import queue
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from modelfleet.sim.apiserver.server import FleetApiServer, serve_in_thread
from modelfleet.sim.faults import FaultConfig
from modelfleet.sim.loop_thread import LoopThread

TIMEOUT = 5.0


@pytest.fixture(scope="module")
def srv() -> Iterator[LoopThread[FleetApiServer]]:
    with serve_in_thread() as server:
        yield server


@pytest.fixture
def cluster(srv: LoopThread[FleetApiServer]) -> str:
    name = f"c-{uuid.uuid4().hex[:8]}"
    srv.call(srv.target.add_cluster, name)
    return name


@pytest.fixture
def core(srv: LoopThread[FleetApiServer], cluster: str, tmp_path: Path) -> client.CoreV1Api:
    path = srv.call(srv.target.write_kubeconfig, cluster, tmp_path / "kubeconfig")
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=cfg)
    cfg.retries = False  # observe each fault once instead of urllib3's retries
    return client.CoreV1Api(client.ApiClient(cfg))


def _admin(
    srv: LoopThread[FleetApiServer], method: str, path: str, body: Any = None
) -> tuple[int, dict[str, str], Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(srv.target.base_url + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read())


def _cm(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}}


def test_error_500_reaches_the_client_as_internal_error(
    srv: LoopThread[FleetApiServer], cluster: str, core: client.CoreV1Api
) -> None:
    srv.call(srv.target.set_faults, cluster, {"error_rate_500": 1.0})
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_config_map("default")
    assert exc.value.status == 500
    assert json.loads(exc.value.body)["reason"] == "InternalError"
    assert srv.call(srv.target.stats, cluster).injected_500 == 1
    srv.call(srv.target.set_faults, cluster, {})
    assert core.list_namespaced_config_map("default").items == []


def test_429_carries_retry_after_and_respects_verb_filter(
    srv: LoopThread[FleetApiServer], cluster: str, core: client.CoreV1Api
) -> None:
    srv.call(
        srv.target.set_faults,
        cluster,
        {"error_rate_429": 1.0, "retry_after_seconds": 7, "verbs": ["create"]},
    )
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map("default", _cm("x"))
    assert exc.value.status == 429
    assert exc.value.headers["Retry-After"] == "7"
    status = json.loads(exc.value.body)
    assert (status["reason"], status["details"]["retryAfterSeconds"]) == ("TooManyRequests", 7)
    # Reads are not in the filter and pass untouched.
    assert core.read_namespace("default").metadata.name == "default"
    stats = srv.call(srv.target.stats, cluster)
    assert (stats.injected_429, stats.served) == (1, 1)


def test_resource_filter_globs(
    srv: LoopThread[FleetApiServer], cluster: str, core: client.CoreV1Api
) -> None:
    srv.call(
        srv.target.set_faults, cluster, {"error_rate_500": 1.0, "resources": ["pods", "*/status"]}
    )
    core.create_namespaced_config_map("default", _cm("ok"))  # not filtered
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_pod("default")
    assert exc.value.status == 500
    with pytest.raises(ApiException) as exc:
        core.read_namespace_status("default")
    assert exc.value.status == 500
    assert core.read_namespace("default").status.phase == "Active"


def test_latency_is_measured_by_server_counters(
    srv: LoopThread[FleetApiServer], cluster: str, core: client.CoreV1Api
) -> None:
    srv.call(srv.target.set_faults, cluster, {"latency_seconds": 0.05, "verbs": ["get"]})
    for _ in range(3):
        core.read_namespace("default")
    core.list_namespace()  # "list" is not delayed
    stats = srv.call(srv.target.stats, cluster)
    assert stats.delayed == 3
    assert stats.injected_latency_seconds == pytest.approx(0.15)
    assert stats.request_seconds_total >= 0.15
    assert stats.request_seconds_max >= 0.05
    assert stats.by_verb == {"get": 3, "list": 1}


def test_dark_hang_is_a_client_timeout_and_admin_still_answers(
    srv: LoopThread[FleetApiServer], cluster: str, core: client.CoreV1Api
) -> None:
    srv.call(srv.target.set_faults, cluster, {"dark": True})
    with pytest.raises((urllib3.exceptions.ReadTimeoutError, urllib3.exceptions.MaxRetryError)):
        core.read_namespace("default", _request_timeout=0.2)
    code, _, info = _admin(srv, "GET", f"/_admin/clusters/{cluster}")
    assert (code, info["faults"]["dark"]) == (200, True)
    assert srv.call(srv.target.stats, cluster).dark_held == 1
    srv.call(srv.target.set_faults, cluster, {})
    assert core.read_namespace("default").metadata.name == "default"


def test_request_held_while_dark_completes_when_lit_again(
    srv: LoopThread[FleetApiServer], cluster: str, core: client.CoreV1Api
) -> None:
    srv.call(srv.target.set_faults, cluster, {"dark": True})
    result: dict[str, Any] = {}

    def call() -> None:
        result["ns"] = core.read_namespace("default", _request_timeout=TIMEOUT)

    t = threading.Thread(target=call, daemon=True)
    t.start()
    injector = srv.call(lambda: srv.target.cluster(cluster).faults)
    srv.run(injector.wait_held(1), timeout=TIMEOUT)
    srv.call(srv.target.update_faults, cluster, {"dark": False})
    t.join(TIMEOUT)
    assert result["ns"].metadata.name == "default"


def _start_watch(core: client.CoreV1Api, out: queue.Queue[Any]) -> threading.Thread:
    rv = core.list_namespaced_config_map("default").metadata.resource_version

    def run() -> None:
        try:
            for ev in watch.Watch().stream(
                core.list_namespaced_config_map,
                "default",
                resource_version=rv,
                timeout_seconds=10,
            ):
                out.put((ev["type"], ev["object"].metadata.name))
        except Exception as exc:  # the reset case: report how the stream ended
            out.put(("EXC", exc))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_dark_cluster_stalls_open_watches_until_lit(
    srv: LoopThread[FleetApiServer], cluster: str, core: client.CoreV1Api
) -> None:
    events: queue.Queue[Any] = queue.Queue()
    t = _start_watch(core, events)
    store = srv.call(srv.target.store, cluster)
    srv.run(store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "lit"}}))
    assert events.get(timeout=TIMEOUT) == ("ADDED", "lit")  # the stream is established
    srv.call(srv.target.set_faults, cluster, {"dark": True})
    # In-process writes bypass the HTTP faults; the watch stream must hold the event back.
    srv.run(store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dark"}}))
    injector = srv.call(lambda: srv.target.cluster(cluster).faults)
    srv.run(injector.wait_held(1), timeout=TIMEOUT)
    assert events.empty()
    srv.call(srv.target.set_faults, cluster, {})
    assert events.get(timeout=TIMEOUT) == ("ADDED", "dark")
    srv.call(srv.target.set_faults, cluster, {"dark": True, "dark_mode": "reset"})
    srv.run(store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cut"}}))
    kind, exc = events.get(timeout=TIMEOUT)
    assert kind == "EXC"
    assert isinstance(exc, (urllib3.exceptions.ProtocolError, urllib3.exceptions.HTTPError))
    t.join(TIMEOUT)


def test_dark_reset_is_a_connection_error(
    srv: LoopThread[FleetApiServer], cluster: str, core: client.CoreV1Api
) -> None:
    srv.call(srv.target.set_faults, cluster, {"dark": True, "dark_mode": "reset"})
    with pytest.raises((urllib3.exceptions.ProtocolError, urllib3.exceptions.MaxRetryError)):
        core.read_namespace("default", _request_timeout=TIMEOUT)
    assert srv.call(srv.target.stats, cluster).dark_reset == 1


def test_seeded_faults_are_deterministic(
    srv: LoopThread[FleetApiServer], cluster: str, core: client.CoreV1Api
) -> None:
    def pattern(seed: int) -> list[int]:
        srv.call(
            srv.target.set_faults,
            cluster,
            {"seed": seed, "error_rate_500": 0.3, "error_rate_429": 0.2},
        )
        codes = []
        for _ in range(30):
            try:
                core.list_namespaced_config_map("default")
                codes.append(200)
            except ApiException as exc:
                codes.append(exc.status)
        return codes

    first = pattern(42)
    assert pattern(42) == first
    assert {200, 429, 500} <= set(first)
    assert pattern(7) != first


def test_admin_fault_endpoints(
    srv: LoopThread[FleetApiServer], cluster: str, core: client.CoreV1Api
) -> None:
    base = f"/_admin/clusters/{cluster}/faults"
    code, _, cfg = _admin(srv, "GET", base)
    assert (code, cfg["error_rate_500"], cfg["dark"]) == (200, 0.0, False)
    code, _, cfg = _admin(srv, "PATCH", base, {"latency_seconds": 0.01, "never_ready": ["llm-*"]})
    assert (code, cfg["latency_seconds"], cfg["never_ready"]) == (200, 0.01, ["llm-*"])
    code, _, cfg = _admin(srv, "PATCH", base, {"error_rate_500": 1.0})
    assert (cfg["latency_seconds"], cfg["error_rate_500"]) == (0.01, 1.0)
    # Admin routes are never faulted, even with every cluster request failing.
    code, _, stats = _admin(srv, "GET", f"/_admin/clusters/{cluster}/stats")
    assert code == 200
    code, _, cfg = _admin(srv, "PUT", base, {"retry_after_seconds": 3})
    assert (code, cfg["error_rate_500"], cfg["latency_seconds"], cfg["retry_after_seconds"]) == (
        200,
        0.0,
        0.0,
        3,
    )
    code, _, status = _admin(srv, "PATCH", base, {"error_rate_500": 2})
    assert (code, status["reason"]) == (422, "Invalid")
    code, _, status = _admin(srv, "PUT", base, {"no_such_knob": 1})
    assert code == 422
    code, _, _ = _admin(srv, "GET", "/_admin/clusters/absent/faults")
    assert code == 404
    core.list_namespace()
    code, _, stats = _admin(srv, "GET", f"/_admin/clusters/{cluster}/stats")
    assert stats["served"] >= 1
    code, _, stats = _admin(srv, "DELETE", f"/_admin/clusters/{cluster}/stats")
    assert stats["requests"] == 0


def test_admin_adds_and_lists_clusters(srv: LoopThread[FleetApiServer]) -> None:
    name = f"adm-{uuid.uuid4().hex[:6]}"
    code, _, info = _admin(srv, "POST", "/_admin/clusters", {"name": name, "faults": {"seed": 5}})
    assert code == 201
    # Its own port, served at the root as a real API server is.
    server = info["server"]
    assert server == f"http://127.0.0.1:{srv.call(srv.target.cluster_port, name)}"
    assert server != srv.target.base_url
    with urllib.request.urlopen(f"{server}/readyz", timeout=10) as resp:
        assert resp.read() == b"ok"
    assert info["faults"]["seed"] == 5
    code, _, status = _admin(srv, "POST", "/_admin/clusters", {"name": name})
    assert (code, status["reason"]) == (409, "AlreadyExists")
    code, _, listing = _admin(srv, "GET", "/_admin/clusters")
    assert name in {c["name"] for c in listing["clusters"]}
    code, _, _ = _admin(srv, "DELETE", f"/_admin/clusters/{name}")
    assert code == 200
    code, _, _ = _admin(srv, "GET", f"/_admin/clusters/{name}")
    assert code == 404
    with pytest.raises(urllib.error.URLError):  # its port is closed with it
        urllib.request.urlopen(f"{server}/readyz", timeout=10)


def test_faults_apply_on_the_cluster_port_and_under_the_prefix(
    srv: LoopThread[FleetApiServer], cluster: str
) -> None:
    srv.call(srv.target.set_faults, cluster, {"error_rate_500": 1.0})
    for base in (srv.target.cluster_url(cluster), srv.target.prefixed_url(cluster)):
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(f"{base}/api/v1/namespaces", timeout=10)
        assert exc.value.code == 500
    assert srv.call(srv.target.stats, cluster).injected_500 == 2
    srv.call(srv.target.set_faults, cluster, {})
    for base in (srv.target.cluster_url(cluster), srv.target.prefixed_url(cluster)):
        with urllib.request.urlopen(f"{base}/api/v1/namespaces", timeout=10) as resp:
            assert resp.status == 200
    # The main port's root is no cluster's.
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(f"{srv.target.base_url}/api/v1/namespaces", timeout=10)
    assert exc.value.code == 404


def test_fault_config_model() -> None:
    cfg = FaultConfig(
        never_ready=["llm-*", "serving/exact"],
        crash_after_ready_seconds=30,
        crash_after_ready=["flaky-*"],
    )
    assert cfg.workload_never_ready("llm-a")
    assert cfg.workload_never_ready("exact", "serving")
    assert not cfg.workload_never_ready("other")
    assert cfg.workload_crashes("flaky-1")
    assert not cfg.workload_crashes("llm-a")
    assert not FaultConfig().workload_crashes("anything")
    with pytest.raises(ValidationError):
        FaultConfig(error_rate_500=0.7, error_rate_429=0.5)
    with pytest.raises(ValidationError):
        FaultConfig.model_validate({"verbs": ["explode"]})
    assert FaultConfig(resources=["leaderworkersets.*"]).applies_to(
        "apply", "leaderworkersets.leaderworkerset.x-k8s.io"
    )
    assert not FaultConfig(resources=["leaderworkersets.*"]).applies_to("get", "pods")
