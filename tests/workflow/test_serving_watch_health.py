"""``serving.watch_health``, the activity itself, against endpoints over real HTTP (a local
``GET /v1/models`` server whose answer the test switches): it answers after its first round when
a verdict differs from what the workflow holds, keeps probing on its own clock while nothing
changes and answers when a change comes, runs to its bound otherwise, and a retried attempt
keeps the first attempt's start (heartbeat details) and still answers a change at once (the
level-triggered part: it compares against what the workflow holds, not what a dead attempt
saw)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from modelfleet.activities.serving import ServingActivities
from modelfleet.adapters.kube_client import KubeCluster
from modelfleet.contracts.health_watch import (
    ROUTE_DIGEST_ANNOTATION,
    DoorCheck,
    HealthWatchRequest,
    HealthWatchResult,
)
from modelfleet.contracts.kube_payloads import ObjectRef
from modelfleet.contracts.serving_payloads import EndpointHealth, ProbeTarget
from modelfleet.sim.apiserver.server import serve_in_thread


class Engines:
    """Endpoints ``/<name>/v1/models``: 200 with a model list, or 503 once broken."""

    def __init__(self) -> None:
        self.broken: set[str] = set()
        self.hits = 0
        engines = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                engines.hits += 1
                name = self.path.strip("/").split("/")[0]
                if name in engines.broken:
                    self.send_response(503)
                    self.end_headers()
                    return
                body = json.dumps({"data": [{"id": "qwen"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def target(self, name: str) -> ProbeTarget:
        return ProbeTarget(
            key=f"ml/{name}", url=f"http://127.0.0.1:{self.server.server_port}/{name}/v1"
        )


@pytest.fixture
def engines() -> Iterator[Engines]:
    e = Engines()
    e.thread.start()
    yield e
    e.server.shutdown()
    e.server.server_close()


def healthy(key: str) -> EndpointHealth:
    return EndpointHealth(key=key, healthy=True, reason="serves qwen", models=["qwen"])


def activities(tmp_path: Path) -> ServingActivities:
    # The watch never calls Temporal without a global address: no client is needed.
    return ServingActivities(Client.__new__(Client), tmp_path)


async def run(
    env: ActivityEnvironment, acts: ServingActivities, request: HealthWatchRequest
) -> HealthWatchResult:
    result: HealthWatchResult = await env.run(acts.watch_health, request)
    return result


async def test_it_answers_after_the_first_round_for_endpoints_it_was_not_told_about(
    engines: Engines, tmp_path: Path
) -> None:
    env = ActivityEnvironment()
    request = HealthWatchRequest(
        targets=[engines.target("a"), engines.target("b")], interval_seconds=30, max_seconds=600
    )
    engines.broken.add("b")
    began = time.monotonic()
    result = await run(env, activities(tmp_path), request)
    assert time.monotonic() - began < 10  # one round, not an interval
    assert (result.why, result.rounds) == ("changed", 1)
    assert [(h.key, h.healthy) for h in result.health] == [("ml/a", True), ("ml/b", False)]
    assert "503" in result.health[1].reason


async def test_it_keeps_probing_while_nothing_changes_and_answers_the_change(
    engines: Engines, tmp_path: Path
) -> None:
    env = ActivityEnvironment()
    beats: list[tuple[Any, ...]] = []
    env.on_heartbeat = lambda *details: beats.append(details)
    request = HealthWatchRequest(
        targets=[engines.target("a"), engines.target("b")],
        known=[healthy("ml/a"), healthy("ml/b")],
        interval_seconds=0.2,
        max_seconds=600,
    )

    async def break_b_after_a_few_rounds() -> None:
        deadline = time.monotonic() + 30
        while engines.hits < 6:  # three rounds of two probes each, all unchanged
            assert time.monotonic() < deadline, "the watch stopped probing"
            await asyncio.sleep(0.05)
        engines.broken.add("b")

    breaker = asyncio.create_task(break_b_after_a_few_rounds())
    result = await asyncio.wait_for(run(env, activities(tmp_path), request), 60)
    await breaker
    assert result.why == "changed"
    assert result.rounds >= 4
    assert [(h.key, h.healthy) for h in result.health] == [("ml/a", True), ("ml/b", False)]
    # It heartbeat all along, always the watch's start (what a retried attempt resumes from).
    assert len(beats) >= result.rounds
    assert {len(b) for b in beats} == {1}
    assert len({b[0] for b in beats}) == 1


async def test_it_answers_unchanged_at_its_bound(engines: Engines, tmp_path: Path) -> None:
    env = ActivityEnvironment()
    request = HealthWatchRequest(
        targets=[engines.target("a")], known=[healthy("ml/a")], interval_seconds=0.2, max_seconds=1
    )
    result = await asyncio.wait_for(run(env, activities(tmp_path), request), 60)
    assert result.why == "bounded"
    assert 2 <= result.rounds <= 6
    assert [h.healthy for h in result.health] == [True]


async def test_a_retried_attempt_keeps_the_bound_and_answers_a_change_at_once(
    engines: Engines, tmp_path: Path
) -> None:
    # The first attempt began 590 s ago (its heartbeat details) and died with its worker.
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, heartbeat_details=[time.time() - 590], attempt=2)
    beats: list[tuple[Any, ...]] = []
    env.on_heartbeat = lambda *details: beats.append(details)
    known = [healthy("ml/a")]
    steady = HealthWatchRequest(
        targets=[engines.target("a")], known=known, interval_seconds=30, max_seconds=600
    )
    result = await asyncio.wait_for(run(env, activities(tmp_path), steady), 60)
    # Nothing changed and another interval would pass the bound: it answers now, not in 600 s.
    assert (result.why, result.rounds) == ("bounded", 1)
    assert beats[0][0] < time.time() - 500

    # The change the dead attempt may have seen: the retry sees it in its first round too.
    engines.broken.add("a")
    env.info = dataclasses.replace(env.info, heartbeat_details=[time.time() - 5])
    result = await asyncio.wait_for(run(env, activities(tmp_path), steady), 60)
    assert (result.why, result.rounds) == ("changed", 1)
    assert [h.healthy for h in result.health] == [False]


async def test_a_cancelled_watch_stops(engines: Engines, tmp_path: Path) -> None:
    env = ActivityEnvironment()
    request = HealthWatchRequest(
        targets=[engines.target("a")],
        known=[healthy("ml/a")],
        interval_seconds=0.2,
        max_seconds=600,
    )
    watch = asyncio.create_task(run(env, activities(tmp_path), request))
    deadline = time.monotonic() + 30
    while engines.hits < 2:
        assert time.monotonic() < deadline, "the watch never probed twice"
        await asyncio.sleep(0.05)
    env.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(watch, 10)


async def test_at_its_bound_it_reports_a_door_whose_route_was_edited_or_deleted(
    engines: Engines, tmp_path: Path
) -> None:
    """The route read from the door's cluster (the simulated API server, over HTTP with the
    kubeconfig the worker would hold): the digest annotation the service applied, another
    one (edited by hand), or no route at all. A door without credentials is not reported."""
    route: dict[str, Any] = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {
            "name": "ms-svc",
            "namespace": "mf-ml",
            "annotations": {ROUTE_DIGEST_ANNOTATION: "d1"},
        },
        "spec": {"parentRefs": [{"name": "gw"}], "rules": []},
    }
    with serve_in_thread(clusters=["front"]) as server:
        path = server.call(server.target.write_kubeconfig, "front", tmp_path / "front.kubeconfig")
        cluster = KubeCluster(path)
        cluster.ensure_namespace("mf-ml")
        cluster.apply(route)
        acts = activities(tmp_path)
        door = DoorCheck(cluster="front", route=ObjectRef.of(route), digest="d1")
        dark = DoorCheck(cluster="dark", route=ObjectRef.of(route), digest="d1")
        request = HealthWatchRequest(
            targets=[engines.target("a")],
            known=[healthy("ml/a")],
            interval_seconds=0.2,
            max_seconds=0.5,
            doors=[door, dark],
        )

        async def drifted() -> list[str]:
            result = await asyncio.wait_for(run(ActivityEnvironment(), acts, request), 60)
            assert result.why == "bounded"
            return result.drifted

        try:
            assert await drifted() == []
            route["metadata"]["annotations"] = {ROUTE_DIGEST_ANNOTATION: "edited"}
            cluster.apply(route)
            assert await drifted() == ["front"]
            cluster.delete(route["apiVersion"], route["kind"], "ms-svc", "mf-ml")
            assert await drifted() == ["front"]
            # A change answered before the bound reads no door (it is not a bound).
            engines.broken.add("a")
            result = await asyncio.wait_for(run(ActivityEnvironment(), acts, request), 60)
            assert (result.why, result.drifted) == ("changed", [])
        finally:
            cluster.close()
