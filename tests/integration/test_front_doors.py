"""A ModelService survives the loss of a front door's cluster (issue 28): published through the
gateways of two clusters (InferenceGateway ``additionalClusters``) behind one address (a
Cloudflare-shaped global load balancer, the simulated fleet's stand-in, driven by the worker over
its HTTP API). Under steady load from the official ``openai`` client, on that one address, the
cluster of the primary front door (which also runs one of the two replicas) goes dark for the
time 1,200 paced requests take (60 s at 20 per second). At most 1% of the requests may fail; the
dark door leaves the address within a bounded time and comes back after.

The second front door (h200-west) runs no replica: it routes to the replicas on the other
clusters. Waits are on conditions with bounded deadlines; the load is paced, not timed.
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
from modelfleet.cli.devenv import SIM_LB_ACCOUNT, SIM_LB_TOKEN_SECRET, SIM_LB_ZONE, SIM_LB_ZONE_ID
from modelfleet.contracts.serving_payloads import ServiceStatus
from modelfleet.service.calls import DOOR_CALL_BOUND
from modelfleet.sim.serving.openai_api import SERVED_BY_HEADER

MODEL = "qwen"
PRIMARY, SECOND = "l4-dev", "h200-west"
# One chat completion every 50 ms (20 per second), each on its own.
PACE_SECONDS = 0.05
# The dark spell: this many requests sent while dark (60 s at the pace above).
DARK_REQUESTS = 1200
MAX_FAILED_SHARE = 0.01
# The balancer checks each door every 2 s (1 s timeout) and takes it out after one failed
# check: out of the address within 3 s of going dark, and the service's status says so within
# a probe round more (2 s) and the activity's round trip; unless a reconcile that began before
# the balancer saw it is applying a route change to the dark door, which gives up after
# calls.DOOR_CALL_BOUND (20 s): the status then says Out once that call ends.
CHECK_SECONDS = 2
OUT_BOUND_SECONDS = DOOR_CALL_BOUND.total_seconds() + 10.0


def _gateway(*, several: bool) -> object:
    spec: dict[str, object] = {"cluster": PRIMARY}
    if several:
        spec["additionalClusters"] = [SECOND]
        spec["globalAddress"] = {
            "accountId": SIM_LB_ACCOUNT,
            "zoneId": SIM_LB_ZONE_ID,
            "zone": SIM_LB_ZONE,
            "apiTokenSecretRef": {"name": SIM_LB_TOKEN_SECRET},
            "healthCheck": {"intervalSeconds": CHECK_SECONDS, "timeoutSeconds": 1},
        }
    return parse_resource(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "InferenceGateway",
            "metadata": {"name": "default"},
            "spec": spec,
        }
    )


def _deployment(name: str, ns: str, region: str) -> ModelDeployment:
    md = deployment(name, ns)
    md.spec.template.spec.cluster_selector = ClusterSelector(match_labels={"region": region})
    return md


def _service(name: str, ns: str) -> ModelService:
    resource = parse_resource(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "ModelService",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "endpoints": [
                    {"selector": {"matchLabels": {"modelfleet.dev/deployment": d}}}
                    for d in ("near", "far")
                ]
            },
        }
    )
    assert isinstance(resource, ModelService)
    return resource


def _door(status: ServiceStatus, cluster: str) -> str:
    return next((d.state for d in status.front_doors if d.cluster == cluster), "absent")


class Load:
    """Paced chat completions on the one address; what served each and what failed, by phase.
    The address's hostname is reached through the balancer's edge, as a client's resolver
    would send it there (the simulated fleet has no DNS: the edge is the client's HTTP proxy)."""

    def __init__(self, address: str, edge: str) -> None:
        self.client = openai.AsyncOpenAI(
            base_url=f"{address}/v1",
            api_key="none",
            max_retries=0,
            timeout=30,
            http_client=httpx.AsyncClient(proxy=edge, timeout=30),
        )
        self.phase = "before"
        self.sent: collections.Counter[str] = collections.Counter()
        self.served: dict[str, collections.Counter[str]] = collections.defaultdict(
            collections.Counter
        )
        self.failed: list[tuple[str, str]] = []
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
        self.served[phase][raw.headers[SERVED_BY_HEADER].split("-", 1)[0]] += 1

    async def _run(self) -> None:
        while True:
            task = asyncio.create_task(self._one(self.phase))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            self.sent[self.phase] += 1
            await asyncio.sleep(PACE_SECONDS)

    def start(self) -> None:
        self._runner = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._runner is not None:
            await cancel_and_wait(self._runner)
            self._runner = None
        if self._tasks:
            await asyncio.gather(*self._tasks)
        await self.client.close()

    async def until(self, check: Callable[[], bool], limit: float, what: str) -> None:
        async def probe() -> bool | None:
            return True if check() else None

        await wait_for(probe, limit, what)


async def test_a_front_door_cluster_dark_for_a_minute_costs_under_one_percent(
    stack: Stack,
) -> None:
    ns, name = "serve-doors", "doors"
    lb = stack.env.global_lb
    load: Load | None = None
    try:
        await apply_resource(stack.client, _gateway(several=True))  # type: ignore[arg-type]
        await asyncio.gather(
            stack.apply_ready(_deployment("near", ns, "us-central")),
            stack.apply_ready(_deployment("far", ns, "us-east")),
        )
        await apply_serving(stack.client, _service(name, ns), probe_interval_seconds=2.0)

        async def published() -> ServiceStatus | None:
            status = await stack.service_status(ns, name)
            live = {e.name.split("-", 1)[0] for e in status.endpoints if e.weight > 0}
            serving = all(_door(status, c) == "Serving" for c in (PRIMARY, SECOND))
            return status if status.global_address and serving and live == {"near", "far"} else None

        status = await wait_for(published, 120, "both doors serving, both endpoints in rotation")
        assert status.address == status.global_address
        assert status.global_address == f"http://{name}.{ns}.{SIM_LB_ZONE}/{ns}/{name}"
        # The route is written on each door's cluster, each to every endpoint.
        for cluster in (PRIMARY, SECOND):
            [route] = [
                r
                for r in await stack.fleet.store(cluster).list(
                    "gateway.networking.k8s.io/v1", "HTTPRoute", namespace=workload_namespace(ns)
                )
                if r["metadata"]["labels"].get("modelfleet.dev/service") == name
            ]
            assert len(route["spec"]["rules"][0]["backendRefs"]) == 2, cluster

        load = Load(status.global_address, lb.edge_url)
        load.start()
        await load.until(
            lambda: load.sent["before"] >= 100 and {"near", "far"} <= set(load.served["before"]),
            60,
            "both replicas serving through the one address",
        )

        load.phase = "dark"
        stack.fleet.update_faults(PRIMARY, {"dark": True})
        dark_at = time.monotonic()

        seen: dict[str, str] = {}

        async def door_out() -> bool | None:
            status = await stack.service_status(ns, name)
            seen.update({d.cluster: f"{d.state} ({d.reason})" for d in status.front_doors})
            return True if _door(status, PRIMARY) in ("Out", "Disabled") else None

        try:
            await wait_for(door_out, 60, f"{PRIMARY}'s door out of the address")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the doors last seen: {seen}") from None
        out_after = time.monotonic() - dark_at
        await load.until(lambda: load.sent["dark"] >= DARK_REQUESTS, 180, "the dark spell")
        dark_seconds = time.monotonic() - dark_at
        at_end = {
            d.cluster: f"{d.state} ({d.reason})"
            for d in (await stack.service_status(ns, name)).front_doors
        }
        assert at_end[SECOND].startswith("Serving"), at_end

        load.phase = "recovered"
        stack.fleet.update_faults(PRIMARY, {"dark": False})
        back_at = time.monotonic()

        async def door_back() -> bool | None:
            return (
                True if _door(await stack.service_status(ns, name), PRIMARY) == "Serving" else None
            )

        await wait_for(door_back, 120, f"{PRIMARY}'s door back in the address")
        back_after = time.monotonic() - back_at
        await load.until(lambda: load.sent["recovered"] >= 100, 60, "load after recovery")
        await load.stop()

        sent = sum(load.sent.values())
        failed = len(load.failed)
        share = failed / sent
        print(
            f"\nfront doors {PRIMARY}+{SECOND}, {PRIMARY} dark {dark_seconds:.0f} s: {sent}"
            f" requests ({dict(load.sent)}), {failed} failed ({100 * share:.2f}%); door out of"
            f" the address (service status) {out_after:.1f} s after going dark, back"
            f" {back_after:.1f} s after recovery; doors at the end of the dark spell {at_end};"
            f" edge failovers {lb.failovers}; served"
            f" { {k: dict(v) for k, v in load.served.items()} }; failures {load.failed[:5]}"
        )
        assert share <= MAX_FAILED_SHARE, load.failed[:10]
        assert out_after <= OUT_BOUND_SECONDS
        # While dark, the far replica (through the second door) carried the load.
        assert load.served["dark"]["far"] >= DARK_REQUESTS * 0.9

        await delete_serving(stack.client, "ModelService", ns, name, wait=True)
        async with httpx.AsyncClient(proxy=lb.edge_url, timeout=10) as http:
            gone = await http.get(f"{status.global_address}/v1/models")
        # The balancer's hostname is gone with the service (Cloudflare's 530/1016).
        assert gone.status_code == 530
    finally:
        stack.fleet.update_faults(PRIMARY, {"dark": False})
        if load is not None:
            with contextlib.suppress(Exception):
                await load.stop()
        with contextlib.suppress(Exception):
            await delete_serving(stack.client, "ModelService", ns, name, wait=True)
        await apply_resource(stack.client, _gateway(several=False))  # type: ignore[arg-type]
        for md in ("near", "far"):
            with contextlib.suppress(Exception):
                await delete_deployment(stack, ns, md)
