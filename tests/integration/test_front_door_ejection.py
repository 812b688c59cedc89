"""A bad engine behind a ModelService costs a handful of requests at most (issue 27, item 2):
under steady load from the official ``openai`` client, one of the service's two endpoints
starts answering every completion with 500 (a per-image fault of the simulator; its health and
model list stay fine, so the service's probes keep it in rotation). The front door's passive
health check ejects it, requests it failed go again to the healthy endpoint, and once the
engine recovers the ejected endpoint takes traffic again.

The front door is the simulated gateway acting on the BackendTrafficPolicy modelfleet renders
next to the service's route; waits are on conditions, bounded; the load is paced, not timed.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Callable

import httpx
import openai
from integration_support import Stack, cancel_and_wait, delete_deployment, deployment, wait_for

from modelfleet.api.deployments import ClusterSelector, ModelDeployment
from modelfleet.api.kinds import parse_resource
from modelfleet.api.naming import workload_namespace
from modelfleet.api.services import ModelService
from modelfleet.applying.serving import apply_serving, delete_serving
from modelfleet.cli.apply import apply_resource
from modelfleet.contracts.serving_payloads import ServiceStatus
from modelfleet.sim.infrastructure import GATEWAY_NAME, SYSTEM_NAMESPACE
from modelfleet.sim.serving.openai_api import SERVED_BY_HEADER

MODEL = "qwen"
STEADY_IMAGE = "vllm/vllm-openai:v0.23.0"
FLAKY_IMAGE = "vllm/vllm-openai:v0.23.0-flaky"
CRASHY_IMAGE = "vllm/vllm-openai:v0.23.0-crashy"
# Long enough for the replica to be seen Ready and put in rotation before its first crash.
CRASH_AFTER_SECONDS = 20.0
# The load: one chat completion every 50 ms (20 per second), each on its own.
PACE_SECONDS = 0.05
# A broken endpoint may cost this many failed requests (the "a handful"); with retries
# to the healthy endpoint it is usually none.
MAX_FAILED = 5
# Requests the broken endpoint may see while broken, over two ejections (three 5xx in a row
# eject it; each such request is retried on the healthy endpoint). Without ejection it would
# take half of the requests, well over a hundred in this test.
MAX_TRIED_ON_BROKEN = 20


def _deployment(name: str, ns: str, region: str, image: str) -> ModelDeployment:
    md = deployment(name, ns, image=image)
    md.spec.template.spec.cluster_selector = ClusterSelector(match_labels={"region": region})
    return md


def _service(name: str, ns: str, deployments: list[str]) -> ModelService:
    resource = parse_resource(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "ModelService",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "endpoints": [
                    {"selector": {"matchLabels": {"modelfleet.dev/deployment": d}}}
                    for d in deployments
                ]
            },
        }
    )
    assert isinstance(resource, ModelService)
    return resource


class Load:
    """Paced chat completions through the service; what served each and what failed, by
    phase."""

    def __init__(self, address: str) -> None:
        self.client = openai.AsyncOpenAI(
            base_url=f"{address}/v1", api_key="none", max_retries=0, timeout=30
        )
        self.phase = "healthy"
        self.served: dict[str, collections.Counter[str]] = collections.defaultdict(
            collections.Counter
        )
        self.failed: list[tuple[str, str]] = []
        self.sent = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._runner: asyncio.Task[None] | None = None

    async def _one(self, phase: str) -> None:
        try:
            raw = await self.client.chat.completions.with_raw_response.create(
                model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=2
            )
        except openai.APIError as exc:
            self.failed.append((phase, f"{type(exc).__name__}: {exc}"))
            return
        # Pod names start with the deployment name (no dash in the names used here).
        self.served[phase][raw.headers[SERVED_BY_HEADER].split("-", 1)[0]] += 1

    async def _run(self) -> None:
        while True:
            task = asyncio.create_task(self._one(self.phase))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            self.sent += 1
            await asyncio.sleep(PACE_SECONDS)

    def start(self) -> None:
        self._runner = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._runner is not None:
            await cancel_and_wait(self._runner)
        if self._tasks:
            await asyncio.gather(*self._tasks)
        await self.client.close()

    async def until(self, check: Callable[[], bool], limit: float, what: str) -> None:
        async def probe() -> bool | None:
            return True if check() else None

        await wait_for(probe, limit, what)


def _counter(text: str, name: str, namespace: str) -> float:
    """A gateway counter summed over the route rules of ``namespace``."""
    total = 0.0
    for line in text.splitlines():
        if (line.startswith(name + "{") and f"/{namespace}/" in line) or line.startswith(
            name + " "
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _set_image_fault(stack: Stack, image: str, fault: dict[str, float] | None) -> None:
    """``image``'s fault on every cluster (None: healthy again)."""
    for cluster in stack.fleet.cluster_names:
        stack.fleet.update_faults(cluster, {"image_faults": {image: fault}})


async def _stand_up(
    stack: Stack, ns: str, name: str, bad_image: str, probe_seconds: float = 1.0
) -> ServiceStatus:
    """The InferenceGateway, a "steady" deployment (us-central) and a "flaky" one running
    ``bad_image`` (us-east), one replica each, and a ModelService over both, both in rotation."""
    await apply_resource(
        stack.client,
        parse_resource(
            {
                "apiVersion": "modelfleet.dev/v1alpha1",
                "kind": "InferenceGateway",
                "metadata": {"name": "default"},
                "spec": {"cluster": "l4-dev"},
            }
        ),
    )
    await asyncio.gather(
        stack.apply_ready(_deployment("steady", ns, "us-central", STEADY_IMAGE)),
        stack.apply_ready(_deployment("flaky", ns, "us-east", bad_image)),
    )
    await apply_serving(
        stack.client, _service(name, ns, ["steady", "flaky"]), probe_interval_seconds=probe_seconds
    )

    async def both_in_rotation() -> ServiceStatus | None:
        status = await stack.service_status(ns, name)
        live = {e.name.split("-", 1)[0] for e in status.endpoints if e.weight > 0}
        return status if status.address and live == {"steady", "flaky"} else None

    status = await wait_for(both_in_rotation, 90, "both endpoints in rotation")
    assert status.address is not None
    return status


async def _tear_down(stack: Stack, ns: str, name: str, load: Load | None) -> None:
    """Best effort, also after a failure (the failure is what the run reports)."""
    if load is not None:
        with contextlib.suppress(Exception):
            await load.stop()
    with contextlib.suppress(Exception):
        await delete_serving(stack.client, "ModelService", ns, name, wait=True)
    for md in ("steady", "flaky"):
        with contextlib.suppress(Exception):
            await delete_deployment(stack, ns, md)


async def test_a_broken_endpoint_is_ejected_costs_a_handful_and_comes_back(stack: Stack) -> None:
    ns, name = "serve-eject", "eject"
    workload_ns = workload_namespace(ns)
    plane = stack.fleet.serving("l4-dev")
    metrics_url = plane.service_url(SYSTEM_NAMESPACE, GATEWAY_NAME, "metrics")
    assert metrics_url is not None
    load: Load | None = None
    try:
        status = await _stand_up(stack, ns, name, FLAKY_IMAGE)
        assert status.address is not None
        assert "after 3 errors in a row" in status.containment
        # The route's policy, as applied on the gateway cluster.
        policies = await stack.fleet.store("l4-dev").list(
            "gateway.envoyproxy.io/v1alpha1", "BackendTrafficPolicy", namespace=workload_ns
        )
        [policy] = policies
        assert policy["spec"]["healthCheck"]["passive"]["consecutive5XxErrors"] == 3
        assert policy["spec"]["retry"]["numRetries"] == 2

        async with httpx.AsyncClient(timeout=10) as http:

            async def counters() -> tuple[float, float]:
                text = (await http.get(f"{metrics_url}/metrics")).text
                ejected = _counter(
                    text, "envoy_cluster_outlier_detection_ejections_enforced_total", workload_ns
                )
                return ejected, _counter(text, "envoy_cluster_upstream_rq_retry", workload_ns)

            load = Load(status.address)
            load.start()
            await load.until(
                lambda: {"steady", "flaky"} <= set(load.served["healthy"]) and load.sent >= 60,
                60,
                "both endpoints serving under load",
            )
            ejected_before, retries_before = await counters()

            # The flaky engine breaks: every completion it takes answers 500.
            load.phase = "broken"
            _set_image_fault(stack, FLAKY_IMAGE, {"error_rate_5xx": 1.0})
            broken_at = time.monotonic()

            async def ejected_twice() -> bool | None:
                ejected, _ = await counters()
                return True if ejected - ejected_before >= 2 and load.sent >= 400 else None

            # Twice: ejected, let back in after the base ejection time, still broken, ejected
            # again (for twice as long).
            await wait_for(ejected_twice, 90, "the broken endpoint ejected twice")
            broken_seconds = time.monotonic() - broken_at
            ejected, retries = await counters()
            tried_on_broken = retries - retries_before

            # It recovers: traffic reaches it again once its ejection runs out.
            load.phase = "recovered"
            _set_image_fault(stack, FLAKY_IMAGE, None)
            recovered_at = time.monotonic()
            await load.until(
                lambda: load.served["recovered"]["flaky"] >= 5, 120, "the endpoint back in"
            )
            back_seconds = time.monotonic() - recovered_at
            await load.stop()
        sent, failed = load.sent, load.failed
        print(
            f"\nfront door, 100% 5xx: {sent} requests, {len(failed)} failed; "
            f"flaky broken for {broken_seconds:.1f} s: ejected {ejected - ejected_before:.0f} "
            f"times, {tried_on_broken:.0f} requests tried on it (each retried on steady), "
            f"served {dict(load.served['broken'])}; after recovery back in {back_seconds:.1f} s; "
            f"served {dict(load.served['recovered'])}; failures {failed[:5]}"
        )
        assert len(failed) <= MAX_FAILED, failed
        assert tried_on_broken <= MAX_TRIED_ON_BROKEN
        # The broken endpoint was tried (its 500s ejected it), and the tries cost next to
        # nothing (above): they were retried on steady.
        assert tried_on_broken > 0
        assert load.served["broken"]["steady"] >= 300
        assert load.served["recovered"]["flaky"] >= 5
        # The service's probes never saw a problem: the front door did it alone.
        after = await stack.service_status(ns, name)
        assert all(e.healthy for e in after.endpoints)
        await delete_serving(stack.client, "ModelService", ns, name, wait=True)
        assert (
            await stack.fleet.store("l4-dev").list(
                "gateway.envoyproxy.io/v1alpha1", "BackendTrafficPolicy", namespace=workload_ns
            )
            == []
        )
    finally:
        _set_image_fault(stack, FLAKY_IMAGE, None)
        await _tear_down(stack, ns, name, load)


async def test_a_crash_looping_endpoint_costs_a_handful(stack: Stack) -> None:
    """The flaky image's engine crashes some seconds after each start (per-image fault): its
    replica stops serving, its cluster's gateway answers 503 for it, and after the kubelet's
    back-off it starts, serves and crashes again. The front door retries what it failed and
    ejects it; the service's probes take it out of rotation and back in."""
    ns, name = "serve-crash", "crash"
    store = stack.fleet.store("h100-east")
    load: Load | None = None
    _set_image_fault(stack, CRASHY_IMAGE, {"crash_after_seconds": CRASH_AFTER_SECONDS})
    try:
        # The service probes at the product's default interval: between probes, only the front
        # door's own policy stands between callers and the crashed endpoint.
        status = await _stand_up(stack, ns, name, CRASHY_IMAGE, probe_seconds=10.0)
        assert status.address is not None
        load = Load(status.address)
        load.start()
        await load.until(lambda: load.sent >= 60, 60, "load running")

        async def restarts() -> int:
            pods = await store.list("v1", "Pod", namespace=workload_namespace(ns))
            return max(
                (
                    int(s.get("restartCount", 0))
                    for p in pods
                    if p["metadata"]["name"].startswith("flaky-")
                    for s in (p.get("status") or {}).get("containerStatuses") or []
                ),
                default=0,
            )

        async def crashed() -> bool | None:
            return True if await restarts() >= 1 else None

        await wait_for(crashed, 90, "the flaky engine to crash")
        crashed_at = time.monotonic()
        load.phase = "after crash"
        # Back after the kubelet's back-off and its start-up: it serves again.
        await load.until(
            lambda: load.served["after crash"]["flaky"] >= 5, 120, "the restarted engine serving"
        )
        back_seconds = time.monotonic() - crashed_at
        await load.stop()
        sent, failed = load.sent, load.failed
        print(
            f"\nfront door, crash-looping engine: {sent} requests, {len(failed)} failed; "
            f"restarted engine serving again {back_seconds:.1f} s after the crash; served "
            f"{ {k: dict(v) for k, v in load.served.items()} }; failures {failed[:5]}"
        )
        assert len(failed) <= MAX_FAILED, failed
        assert load.served["after crash"]["steady"] > 0
    finally:
        _set_image_fault(stack, CRASHY_IMAGE, None)
        await _tear_down(stack, ns, name, load)
