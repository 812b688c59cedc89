"""Autoscaling on engine load end to end, on the real dev server and worker and the simulated
quickstart fleet: a ModelService in front of a ModelDeployment, the load generator sending OpenAI
requests through the service address, and a ModelAutoscaler reading the engines' ``/metrics``
through the simulated API server's proxy. Also scale from zero (an ``openai`` request held at
the gateway brings the first replica and gets its answer) and a fleet shortfall (an autoscaler
wanting more H200 replicas than the fleet holds, driven by a PromQL total from a small
Prometheus stand-in the test serves). Every claim is checked from the autoscaler's decision log
and the deployment's status; waits are on conditions (bounded), never on time."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import openai
from aiohttp import web
from integration_support import Stack, delete_deployment, deployment, h200_deployment, wait_for
from typer.testing import CliRunner

from modelfleet.api.autoscalers import ModelAutoscaler
from modelfleet.api.kinds import parse_resource
from modelfleet.api.services import ModelService
from modelfleet.applying.serving import delete_serving
from modelfleet.autoscaler.decide import GATEWAY_METRIC
from modelfleet.autoscaler.records import AutoscalerStatus, Decision
from modelfleet.autoscaler.workflow import AutoscalerWorkflow, autoscaler_id
from modelfleet.cli.apply import apply_resource
from modelfleet.cli.main import app
from modelfleet.contracts.ids import service_id
from modelfleet.contracts.serving_payloads import ServiceStatus
from modelfleet.service.workflow import ServiceWorkflow
from modelfleet.sim.load import LoadReport, LoadSpec, run_load
from modelfleet.sim.serving.backend_wait import WAIT_HEADER

WAITING = "vllm:num_requests_waiting"
TARGET = 4.0
INTERVAL = 5
LABEL_DEPLOYMENT = "modelfleet.dev/deployment"


# Each request holds an engine slot for 2 s (4000 tokens at the simulated 2000 tokens/s); an
# engine runs 16 at once, so 20 requests a second keep ~40 in flight: one replica saturates.
def heavy(address: str, rps: float, duration: float) -> LoadSpec:
    return LoadSpec(
        base_url=address,
        rps=rps,
        duration=duration,
        stream=False,
        max_tokens=4000,
        prompt_tokens=8,
        timeout=120.0,
    )


def _autoscaler(
    ns: str,
    name: str,
    *,
    minimum: int,
    maximum: int,
    down_window: int,
    metric: dict[str, Any] | None = None,
) -> ModelAutoscaler:
    engine = {"type": "Engine", "engine": {"name": WAITING, "target": {"averageValue": 4}}}
    resource = parse_resource(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "ModelAutoscaler",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "scaleTargetRef": {"name": name},
                "minReplicas": minimum,
                "maxReplicas": maximum,
                "intervalSeconds": INTERVAL,
                "metrics": [metric or engine],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": down_window}},
            },
        }
    )
    assert isinstance(resource, ModelAutoscaler)
    return resource


async def _serve(stack: Stack, ns: str, name: str) -> None:
    """The fleet's gateway and a ModelService over every replica of deployment ``name``."""
    gateway = parse_resource(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "InferenceGateway",
            "metadata": {"name": "default"},
            "spec": {"cluster": "l4-dev"},
        }
    )
    await apply_resource(stack.client, gateway)
    service = parse_resource(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "ModelService",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"endpoints": [{"selector": {"matchLabels": {LABEL_DEPLOYMENT: name}}}]},
        }
    )
    assert isinstance(service, ModelService)
    await apply_resource(stack.client, service)


async def _in_rotation(stack: Stack, ns: str, name: str, count: int) -> str:
    """The service's address once exactly ``count`` endpoints take traffic."""

    async def probe() -> str | None:
        handle = stack.client.get_workflow_handle(service_id(ns, name))
        status: ServiceStatus = await handle.query(ServiceWorkflow.status)
        live = [e for e in status.endpoints if e.weight > 0 and e.healthy]
        return status.address if status.address and len(live) == count else None

    return await wait_for(probe, 60, f"{count} endpoint(s) of {ns}/{name} in rotation")


class Load:
    """The load generator running in the background until stopped."""

    def __init__(self, address: str, rps: float) -> None:
        self.stop = asyncio.Event()
        self.task: asyncio.Task[LoadReport] = asyncio.create_task(
            run_load(heavy(address, rps, 600), stop=self.stop)
        )

    async def finish(self) -> LoadReport:
        self.stop.set()
        return await asyncio.wait_for(self.task, 180)


@contextlib.asynccontextmanager
async def load(address: str, rps: float) -> AsyncIterator[Load]:
    running = Load(address, rps)
    try:
        yield running
    finally:
        if not running.task.done():
            await running.finish()


class Log:
    def __init__(self, stack: Stack, ns: str, name: str) -> None:
        self.handle = stack.client.get_workflow_handle(autoscaler_id(ns, name))

    async def all(self) -> list[Decision]:
        async def probe() -> list[Decision]:
            found: list[Decision] = await self.handle.query(AutoscalerWorkflow.decisions, 120)
            return found

        # Under load a query can go unanswered; wait_for asks again (see `unanswered`).
        return await wait_for(probe, 60, "the decision log")

    async def after(self, seen: int, check: Callable[[Decision], bool], what: str) -> Decision:
        """The first decision after the first ``seen`` for which ``check`` holds."""

        async def probe() -> Decision | None:
            return next((d for d in (await self.all())[seen:] if check(d)), None)

        return await wait_for(probe, 90, what)


def _value(d: Decision) -> float | None:
    return d.metrics[0].value if d.metrics else None


async def test_load_scales_up_spreads_holds_through_flapping_and_scales_down(
    stack: Stack,
) -> None:
    ns, name, window = "autoscale-load", "chat", 30
    await apply_resource(stack.client, deployment(name, ns, replicas=1))
    await stack.wait_status(ns, name, lambda s: s.ready == 1)
    await _serve(stack, ns, name)
    address = await _in_rotation(stack, ns, name, 1)
    await apply_resource(
        stack.client, _autoscaler(ns, name, minimum=1, maximum=3, down_window=window)
    )
    log = Log(stack, ns, name)
    first = await log.after(0, lambda d: True, "a first decision")
    assert first.current == 1
    assert first.applied == 1

    # Saturate the one replica: the first decision that sees the queue over the target scales
    # up (the scale-up window is 0: within one window and one interval), bounded by max 3.
    async with load(address, rps=20) as steady:
        seen = len(await log.all())
        saturated = await log.after(
            seen, lambda d: (_value(d) or 0) > TARGET * 1.1, "a decision over the target"
        )
        assert saturated.current == 1
        assert saturated.applied == 3, saturated
        assert saturated.outcome.endswith("scaled to 3")
        await stack.wait_status(ns, name, lambda s: s.ready == 3)
        await _in_rotation(stack, ns, name, 3)
        # New replicas take requests: load sent from now on is spread over all three.
        spread = await run_load(heavy(address, 20, 3))
        report = await steady.finish()
    assert spread.failed == 0
    names = {r.name for r in (await stack.status(ns, name)).replicas}
    served = {r for r in names for pod in spread.served_by if pod.startswith(f"{r}-")}
    assert served == names, spread.served_by
    assert report.ok > 0
    assert report.failed == 0, report.errors

    # Flapping load: on until a decision asks for at least 3, off until one asks for fewer,
    # twice. Every such swing is shorter than the scale-down window, so replicas stay at 3.
    flap_start = len(await log.all())
    for _ in range(2):
        async with load(address, rps=40):
            await log.after(len(await log.all()), lambda d: d.recommended >= 3, "a high ask")
        await log.after(len(await log.all()), lambda d: d.recommended < 3, "a low ask")
    flapping = (await log.all())[flap_start:]
    asks = [d.recommended for d in flapping]
    assert any(a >= 3 for a in asks)
    assert any(a < 3 for a in asks)
    assert [d.applied for d in flapping] == [3] * len(flapping), [
        (d.recommended, d.applied, d.reason) for d in flapping
    ]

    # Load stopped: scale down once the window has no higher ask left, never below min.
    down = await log.after(flap_start, lambda d: d.applied < d.current, "the scale-down")
    decisions = await log.all()
    before = decisions[: decisions.index(down)]
    last_high = max(d.at for d in before if d.recommended >= down.current)
    assert (down.at - last_high).total_seconds() >= window
    # HPA's rule: the scale-down goes to the highest ask still inside the window, so the load's
    # tail (an ask of 2) can make it step 3 -> 2 -> 1; it never goes below that ask or min.
    assert 1 <= down.applied < down.current
    if down.applied > max(down.recommended, 1):
        assert "scale-down stabilisation holds" in down.reason, down
    assert all(1 <= d.applied <= 3 for d in decisions)
    await stack.wait_status(ns, name, lambda s: s.desired == 1 and s.ready == 1)

    final: AutoscalerStatus = await log.handle.execute_update(AutoscalerWorkflow.delete)
    assert final.deleting
    await log.handle.result()
    await delete_serving(stack.client, "ModelService", ns, name, wait=True)
    await delete_deployment(stack, ns, name)


async def test_an_unreadable_replica_follows_hpa_and_a_manual_scale_is_overridden(
    stack: Stack,
) -> None:
    ns, name = "autoscale-miss", "miss"
    await apply_resource(stack.client, deployment(name, ns, replicas=2))
    status = await stack.wait_status(ns, name, lambda s: s.ready == 2)
    await _serve(stack, ns, name)
    address = await _in_rotation(stack, ns, name, 2)
    blocked = status.replicas[0]
    proxy = stack.fleet.server.proxy
    # A partition between the API server and one replica's pods: its /metrics cannot be read,
    # while it keeps serving requests through the gateway.
    proxy.set_unreachable(blocked.cluster, [f"{blocked.name}-*"])
    try:
        await apply_resource(
            stack.client, _autoscaler(ns, name, minimum=1, maximum=4, down_window=300)
        )
        log = Log(stack, ns, name)
        idle = await log.after(0, lambda d: bool(d.errors), "a decision missing a replica")
        assert set(idle.errors) == {blocked.name}
        assert "/proxy/metrics: HTTP 503" in idle.errors[blocked.name]
        # Scale-down direction: the unread replica counts as exactly the target.
        assert "1 without metrics at target" in idle.metrics[0].note
        assert idle.applied == 2

        async with load(address, rps=40):
            busy = await log.after(
                len(await log.all()),
                lambda d: "1 without metrics at 0" in (d.metrics[0].note if d.metrics else ""),
                "a scale-up decision with one replica unread",
            )
        # Scale-up direction: the unread replica counts as 0, and the scale-up still happens.
        assert busy.current == 2
        assert set(busy.errors) == {blocked.name}
        value = _value(busy)
        assert value is not None
        assert value > TARGET
        assert busy.applied > 2
    finally:
        proxy.set_unreachable(blocked.cluster, [])

    # A manual `modelfleet scale` while attached: it happens, and the autoscaler reports it.
    seen = len(await log.all())
    address_flag = ["--address", stack.env.settings.address]
    result = await asyncio.to_thread(
        CliRunner().invoke,
        app,
        ["scale", "deployment", name, "--replicas", "1", "-n", ns, *address_flag],
    )
    assert result.exit_code == 0, result.output
    overridden = await log.after(
        seen, lambda d: d.outcome.startswith("overridden"), "the manual scale to be reported"
    )
    assert overridden.current == 1
    assert "scaled to 1 outside the autoscaler" in overridden.outcome

    final: AutoscalerStatus = await log.handle.execute_update(AutoscalerWorkflow.delete)
    assert final.deleting
    await log.handle.result()
    await delete_serving(stack.client, "ModelService", ns, name, wait=True)
    await delete_deployment(stack, ns, name)


def _gateway_reading(d: Decision) -> float | None:
    return next((m.value for m in d.metrics if m.metric == GATEWAY_METRIC), None)


async def test_a_request_to_a_service_at_zero_replicas_gets_the_first_replica_and_an_answer(
    stack: Stack,
) -> None:
    ns, name = "autoscale-zero", "zero"
    await apply_resource(stack.client, deployment(name, ns, replicas=0))
    await apply_resource(stack.client, _autoscaler(ns, name, minimum=0, maximum=2, down_window=300))
    log = Log(stack, ns, name)
    # No service in front of it yet: nothing can wait for it, and the decision says so.
    alone = await log.after(0, lambda d: True, "a first decision")
    assert (alone.current, alone.applied) == (0, 0)
    assert "gateway:requests_waiting: no ModelService routes to this deployment" in alone.reason
    await _serve(stack, ns, name)
    address = await _in_rotation(stack, ns, name, 0)
    # The autoscaler found the service and read the gateway: nothing waits, it stays at zero.
    idle = await log.after(1, lambda d: _gateway_reading(d) == 0, "a decision reading 0 waiting")
    assert (idle.current, idle.applied) == (0, 0)
    assert "no request waiting at gateway modelfleet-system/inference-gateway" in idle.reason

    # The client sets how long it waits; the gateway holds the request that long at most.
    client = openai.AsyncOpenAI(
        base_url=f"{address}/v1",
        api_key="none",
        max_retries=0,
        timeout=90,
        default_headers={WAIT_HEADER: "90"},
    )
    answer = await client.chat.completions.create(
        model="qwen", messages=[{"role": "user", "content": "wake up"}], max_tokens=4
    )
    assert answer.choices[0].message.content
    assert answer.usage is not None
    assert answer.usage.completion_tokens == 4

    decisions = await log.all()
    woke = [d for d in decisions if d.current == 0 and d.applied == 1]
    assert len(woke) == 1, [(d.current, d.applied, d.reason) for d in decisions]
    assert "scale from zero: 1 request(s) waiting at gateway" in woke[0].reason
    assert woke[0].outcome == "scaled to 1"
    status = await stack.status(ns, name)
    assert (status.desired, status.ready) == (1, 1)

    final: AutoscalerStatus = await log.handle.execute_update(AutoscalerWorkflow.delete)
    assert final.deleting
    await log.handle.result()
    await delete_serving(stack.client, "ModelService", ns, name, wait=True)
    await delete_deployment(stack, ns, name)


@contextlib.asynccontextmanager
async def prometheus(total: float) -> AsyncIterator[str]:
    """A Prometheus server's query API answering every instant query with ``total``."""

    async def query(request: web.Request) -> web.Response:
        result = [{"metric": {}, "value": [0, str(total)]}]
        data = {"resultType": "vector", "result": result}
        return web.json_response({"status": "success", "data": data})

    app = web.Application()
    app.router.add_get("/api/v1/query", query)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_wanting_more_than_the_fleet_holds_reports_the_shortfall_without_chasing_it(
    stack: Stack,
) -> None:
    ns, name = "autoscale-short", "short"
    # A whole H200 node per replica: h200-west holds 4 of them, and nothing else can.
    await apply_resource(stack.client, h200_deployment(name, ns, replicas=1))
    await stack.wait_status(ns, name, lambda s: s.ready == 1)
    async with prometheus(total=100) as url:
        metric = {
            "type": "Prometheus",
            "prometheus": {"url": url, "query": "sum(queue)", "target": {"averageValue": 10}},
        }
        await apply_resource(
            stack.client,
            _autoscaler(ns, name, minimum=1, maximum=8, down_window=300, metric=metric),
        )
        log = Log(stack, ns, name)
        # The query asks for 10; the scale-up policy allows 1 -> 5 in one step (max is 8).
        scaled = await log.after(0, lambda d: d.applied > d.current, "the scale-up")
        assert (scaled.current, scaled.recommended, scaled.applied) == (1, 10, 5)
        placed = await stack.wait_status(
            ns, name, lambda s: s.desired == 5 and 1 < s.scheduled < 5 and s.ready == s.scheduled
        )
        # Then it keeps deciding every interval, reports the shortfall and asks for no more.
        start = len(await log.all())
        await log.after(start + 2, lambda d: True, "three decisions after placing")
        later = (await log.all())[start:]
        assert len(later) >= 3
        assert all(d.recommended == 10 and d.applied == d.current == 5 for d in later), later
        assert all(
            f"FleetShortfall: only {placed.scheduled} of 5 replicas are placed" in d.reason
            for d in later
        ), [d.reason for d in later]
        decisions = await log.all()
        scales = [d for d in decisions if d.applied != d.current]
        assert len(scales) == 1  # one scale request over the whole run: no hot loop
        # Decisions come one per interval, never faster.
        gaps = [(b.at - a.at).total_seconds() for a, b in itertools.pairwise(later)]
        assert min(gaps) >= INTERVAL - 0.5, gaps

        status: AutoscalerStatus = await log.handle.query(AutoscalerWorkflow.status)
        assert status.last_decision is not None
        assert "FleetShortfall" in status.last_decision.reason
        described = await asyncio.to_thread(
            CliRunner().invoke,
            app,
            [
                "describe",
                "autoscaler",
                name,
                "-n",
                ns,
                "--address",
                stack.env.settings.address,
            ],
        )
        assert described.exit_code == 0, described.output
        assert "FleetShortfall" in described.output
    # The deployment keeps what fits running, nothing more.
    after = await stack.status(ns, name)
    assert after.ready == placed.scheduled < after.desired

    final: AutoscalerStatus = await log.handle.execute_update(AutoscalerWorkflow.delete)
    assert final.deleting
    await log.handle.result()
    await delete_deployment(stack, ns, name)
