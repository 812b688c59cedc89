"""The ModelAutoscaler loop on the time-skipping server, with activity doubles standing in for the
deployment (its replicas and the ``scale`` Update), the engines' load and the requests waiting
at the gateway. Every assertion is about what the autoscaler did to the deployment and what its
decision log says. (End to end against the simulated fleet: tests/integration.)"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import matplotlib.image
import pytest
import pytest_asyncio
from carry_support import carried_input
from temporalio import activity
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from typer.testing import CliRunner

from modelfleet.api.autoscalers import ModelAutoscaler
from modelfleet.autoscaler.records import AutoscalerStatus, Decision
from modelfleet.autoscaler.state import AutoscalerInput
from modelfleet.autoscaler.workflow import AutoscalerWorkflow, autoscaler_id
from modelfleet.cli import output
from modelfleet.cli.autoscaler import fetch, plot_history
from modelfleet.cli.main import app
from modelfleet.contracts.activity_names import (
    AUTOSCALER_GATEWAY_WAITING,
    AUTOSCALER_READ_METRICS,
    AUTOSCALER_SCALE,
    AUTOSCALER_TARGET,
)
from modelfleet.contracts.autoscaler_payloads import (
    GatewayWaitingRequest,
    GatewayWaitingResult,
    ReadMetricsRequest,
    ReadMetricsResult,
    ReplicaLoad,
    ScaleTargetRequest,
    ScaleTargetResult,
    TargetReplica,
    TargetRequest,
    TargetState,
)

WAITING = "vllm:num_requests_waiting"


def manifest(**spec: Any) -> ModelAutoscaler:
    return ModelAutoscaler.model_validate(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "ModelAutoscaler",
            "metadata": {"name": "qwen", "namespace": "ml"},
            "spec": {
                "scaleTargetRef": {"name": "qwen"},
                "minReplicas": 1,
                "maxReplicas": 6,
                "metrics": [
                    {"type": "Engine", "engine": {"name": WAITING, "target": {"averageValue": 4}}}
                ],
                **spec,
            },
        }
    )


@dataclass
class FakeDeployment:
    """A deployment whose replicas are Ready at once, carrying ``total`` waiting requests spread
    evenly; ``silent`` replicas do not answer /metrics; ``capacity`` bounds what is placed."""

    desired: int = 1
    total: float = 0.0
    capacity: int = 10
    silent: set[str] = field(default_factory=set)
    scales: list[int] = field(default_factory=list)
    requests: set[str] = field(default_factory=set)
    targets: list[str] = field(default_factory=list)
    # Requests held at the gateway for the deployment's services (None: cannot be told).
    waiting: float | None = 0.0
    gateway_reads: list[GatewayWaitingRequest] = field(default_factory=list)
    gateway_broken: bool = False

    def replicas(self) -> list[TargetReplica]:
        placed = min(self.desired, self.capacity)
        return [TargetReplica(name=f"r{i}", cluster="east", ready=True) for i in range(placed)]

    @activity.defn(name=AUTOSCALER_TARGET)
    async def target(self, request: TargetRequest) -> TargetState:
        assert request.namespace == "ml"
        self.targets.append(request.name)
        if request.name != "qwen":
            # Another deployment, idle at 7 replicas.
            replicas = [TargetReplica(name=f"o{i}", cluster="east", ready=True) for i in range(7)]
            return TargetState(found=True, desired=7, scheduled=7, replicas=replicas)
        replicas = self.replicas()
        return TargetState(
            found=True, desired=self.desired, scheduled=len(replicas), replicas=replicas
        )

    @activity.defn(name=AUTOSCALER_READ_METRICS)
    async def read_metrics(self, request: ReadMetricsRequest) -> ReadMetricsResult:
        assert request.metrics == [WAITING]
        ready = [r for r in request.replicas if r.ready]
        share = self.total / len(ready) if ready else 0.0
        return ReadMetricsResult(
            replicas=[
                ReplicaLoad(name=r.name, ready=True, error="HTTP 503")
                if r.name in self.silent
                else ReplicaLoad(name=r.name, ready=True, values={WAITING: share})
                for r in ready
            ]
        )

    @activity.defn(name=AUTOSCALER_GATEWAY_WAITING)
    async def gateway_waiting(self, request: GatewayWaitingRequest) -> GatewayWaitingResult:
        self.gateway_reads.append(request)
        if self.gateway_broken:
            raise RuntimeError("worker lost its kubeconfigs")
        if self.waiting is None:
            return GatewayWaitingResult(note="no InferenceGateway is applied")
        return GatewayWaitingResult(waiting=self.waiting, services=["svc"], note="gw on east")

    @activity.defn(name=AUTOSCALER_SCALE)
    async def scale(self, request: ScaleTargetRequest) -> ScaleTargetResult:
        assert request.name == "qwen", "only qwen is ever scaled in these tests"
        # A retried request (same ID) must not count twice.
        if request.request_id not in self.requests:
            self.requests.add(request.request_id)
            self.scales.append(request.replicas)
        self.desired = request.replicas
        return ScaleTargetResult(accepted=True, desired=self.desired)


@dataclass
class Running:
    env: WorkflowEnvironment
    fake: FakeDeployment
    handle: WorkflowHandle[Any, Any]
    name: str

    async def advance(self, seconds: float) -> None:
        await self.env.sleep(timedelta(seconds=seconds))

    async def log(self, limit: int = 200) -> list[Decision]:
        result: list[Decision] = await self.handle.query(
            AutoscalerWorkflow.decisions, limit, result_type=list[Decision]
        )
        return result

    async def status(self) -> AutoscalerStatus:
        result: AutoscalerStatus = await self.handle.query(AutoscalerWorkflow.status)
        return result


@pytest_asyncio.fixture
async def start(
    time_skipping_env: WorkflowEnvironment,
) -> AsyncIterator[Any]:
    workers: list[Worker] = []
    handles: list[WorkflowHandle[Any, Any]] = []

    async def go(
        fake: FakeDeployment, spec: ModelAutoscaler | None = None, **extra: Any
    ) -> Running:
        queue = f"tq-{uuid.uuid4()}"
        worker = Worker(
            time_skipping_env.client,
            task_queue=queue,
            workflows=[AutoscalerWorkflow],
            activities=[fake.target, fake.read_metrics, fake.scale, fake.gateway_waiting],
        )
        workers.append(worker)
        await worker.__aenter__()
        ma = spec or manifest()
        # A unique name per test on the shared server; the workflow ID is the real one.
        name = f"qwen-{uuid.uuid4().hex[:8]}"
        ma.metadata.name = name
        handle = await time_skipping_env.client.start_workflow(
            AutoscalerWorkflow.run,
            AutoscalerInput.of(ma, **extra),
            id=autoscaler_id("ml", name),
            task_queue=queue,
        )
        handles.append(handle)
        return Running(time_skipping_env, fake, handle, name)

    yield go
    # Let in-flight activities finish first: the test server keeps time skipping locked for an
    # activity whose workflow was terminated under it, which would stall every later test.
    await time_skipping_env.sleep(timedelta(seconds=1))
    for handle in handles:
        # By ID, not run: a run that continued as new must end too, or its timers would hold
        # the shared server's time skipping hostage with no worker to answer them.
        latest = time_skipping_env.client.get_workflow_handle(handle.id)
        with contextlib.suppress(RPCError):  # one that was deleted has already finished
            await latest.terminate()
    for worker in workers:
        await worker.__aexit__(None, None, None)


async def test_saturated_replica_scales_up_within_one_interval(start: Any) -> None:
    fake = FakeDeployment(desired=1, total=20)  # 20 waiting on one replica, target 4: wants 5
    run = await start(fake)
    await run.advance(1)
    assert fake.desired == 5  # the first decision, no scale-up window: max(1 + 4, 1 * 2)
    [first] = await run.log()
    assert (first.current, first.recommended, first.desired, first.applied) == (1, 5, 5, 5)
    assert first.metrics[0].value == 20
    assert first.reason.startswith("scale 1 -> 5")
    assert first.outcome == "scaled to 5"


async def test_scale_down_waits_for_the_window_and_stops_at_min(start: Any) -> None:
    fake = FakeDeployment(desired=4, total=16)  # on target
    run = await start(fake)
    await run.advance(30)
    assert fake.desired == 4
    fake.total = 0
    await run.advance(270)  # still inside the 300 s scale-down window
    assert fake.desired == 4
    assert fake.scales == []
    await run.advance(60)
    assert fake.desired == 1  # minReplicas, not 0
    log = await run.log()
    assert all(d.applied >= 1 for d in log)
    down = [d for d in log if d.applied < d.current]
    assert len(down) == 1
    assert "TooFewReplicas" in down[0].reason


async def test_never_above_max(start: Any) -> None:
    fake = FakeDeployment(desired=2, total=1000)
    run = await start(fake)
    await run.advance(120)
    assert fake.desired == 6
    assert max(fake.scales) == 6
    assert any("TooManyReplicas" in d.reason for d in await run.log())


async def test_flapping_load_does_not_flap_replicas(start: Any) -> None:
    fake = FakeDeployment(desired=2, total=8)
    run = await start(fake)
    for i in range(40):  # ten minutes of load flipping every 15 s between 24 and 2 waiting
        fake.total = 24 if i % 2 == 0 else 2
        await run.advance(15)
    log = await run.log()
    assert len(log) >= 38
    changes = [(d.current, d.applied) for d in log if d.applied != d.current]
    # One step up to the peak's need, then held: every scale-down window contains a peak.
    assert changes == [(2, 6)]
    assert fake.scales == [6]
    held = [d for d in log if d.applied == d.current and d.recommended < d.current]
    assert held
    assert all("scale-down stabilisation holds" in d.reason for d in held)


async def test_silent_replica_counts_as_missing_and_blocks_no_scale_up(start: Any) -> None:
    fake = FakeDeployment(desired=3, total=30, silent={"r2"})
    run = await start(fake)
    await run.advance(1)
    [first] = await run.log(1)
    # r0 and r1 carry 10 each, r2 is silent: counted as 0 on a scale-up, (10+10+0)/3/4 = 1.67.
    assert first.applied == 5
    assert "1 without metrics at 0" in first.metrics[0].note


async def test_manual_scale_is_reported_as_overridden(start: Any) -> None:
    fake = FakeDeployment(desired=2, total=8)
    run = await start(fake)
    await run.advance(20)
    assert fake.desired == 2
    fake.desired = 5  # `modelfleet scale` by hand while the autoscaler is attached
    await run.advance(15)
    log = await run.log()
    overridden = [d for d in log if d.outcome.startswith("overridden")]
    assert len(overridden) == 1
    assert "scaled to 5 outside the autoscaler (it had set 2)" in overridden[0].outcome
    assert overridden[0].current == 5
    # The autoscaler decides from the new count; the load (2 per replica) later takes it down.
    await run.advance(330)
    assert fake.desired < 5


async def test_capacity_shortfall_is_reported_not_chased(start: Any) -> None:
    fake = FakeDeployment(desired=2, total=100, capacity=3)
    run = await start(fake, manifest(maxReplicas=10))
    await run.advance(120)
    # Scaled once to 6 (+4 policy from 2); only 3 were placed, and it asked no further.
    assert fake.scales == [6]
    log = await run.log()
    assert sum(1 for d in log if "FleetShortfall" in d.reason) >= 5
    assert len(log) <= 10  # one decision per interval, never a hot loop


async def test_requests_waiting_at_the_gateway_bring_the_first_replica(start: Any) -> None:
    fake = FakeDeployment(desired=0, total=0, waiting=None)
    run = await start(fake, manifest(minReplicas=0))
    await run.advance(20)
    assert fake.desired == 0
    unknown = (await run.log())[-1]
    assert "no InferenceGateway is applied" in unknown.reason
    fake.waiting = 0
    await run.advance(15)
    assert fake.desired == 0
    assert "no request waiting at gw on east" in (await run.log())[-1].reason
    reads = len(fake.gateway_reads)
    fake.waiting = 2  # a client's request is held at the gateway
    await run.advance(15)
    assert fake.scales == [1]
    woke = next(d for d in await run.log() if d.applied == 1)
    assert woke.current == 0
    assert "scale from zero: 2 request(s) waiting at gw on east" in woke.reason
    assert woke.outcome == "scaled to 1"
    [request] = fake.gateway_reads[reads : reads + 1]
    assert (request.namespace, request.deployment) == ("ml", "qwen")
    assert request.deployment_workflow_id == "deployment/ml/qwen"
    assert "'ModelService'" in request.services_query
    assert "'ml'" in request.services_query
    # With a replica the gateway is not read any more: engine load decides.
    asked = len(fake.gateway_reads)
    await run.advance(45)
    assert len(fake.gateway_reads) == asked


async def test_a_failing_gateway_read_holds_at_zero_and_says_why(start: Any) -> None:
    fake = FakeDeployment(desired=0, total=0, gateway_broken=True)
    run = await start(fake, manifest(minReplicas=0))
    await run.advance(20)
    assert fake.scales == []
    [first, *_] = await run.log()
    assert first.applied == 0
    assert "gateway:requests_waiting: reading the gateway failed" in first.reason
    assert "worker lost its kubeconfigs" in first.reason
    assert (await run.status()).problem == ""  # the loop goes on: one interval, one decision
    fake.gateway_broken = False
    fake.waiting = 1
    await run.advance(15)
    assert fake.scales == [1]


# The workflow's start time and the server's record of it are two reads of the test server's
# clock; on a loaded machine they can be a few hundred ms apart.
START_SLACK = timedelta(seconds=1)


async def test_continue_as_new_keeps_the_log_history_and_creation_time(start: Any) -> None:
    fake = FakeDeployment(desired=2, total=8)
    run = await start(fake, decisions_per_run=3)
    first = await run.handle.describe()
    await run.advance(15 * 8)
    latest = await run.handle.describe()
    assert latest.run_id != first.run_id
    # AGE: the creation time is the first run's start, carried across continue-as-new.
    created = (await run.status()).created
    assert created is not None
    assert abs(created - first.start_time) < START_SLACK
    assert created < latest.start_time - timedelta(minutes=1)
    log = await run.log()
    assert len(log) >= 8
    assert all(d.applied == 2 for d in log)
    # The first run handed on its whole state and its settings; the next run went on from it.
    first_run = run.env.client.get_workflow_handle(run.handle.id, run_id=first.run_id)
    carried = AutoscalerInput.model_validate(await carried_input(first_run))
    assert carried.decisions_per_run == 3
    held: list[Decision] = await first_run.query(
        AutoscalerWorkflow.decisions, 200, result_type=list[Decision]
    )
    assert carried.state.decisions == held
    assert len(held) == 3
    assert carried.state.created == created
    assert carried.state.spec.name == run.name
    assert carried.state.last_applied == 2
    assert log[: len(held)] == held


async def test_apply_changes_the_bounds_and_delete_ends_the_loop(start: Any) -> None:
    fake = FakeDeployment(desired=2, total=1000)
    run = await start(fake)
    await run.advance(1)
    changed = manifest(maxReplicas=3)
    changed.metadata.name = run.name
    status = await run.handle.execute_update(AutoscalerWorkflow.apply, changed)
    assert status.generation == 2
    await run.advance(1)
    # The first decision scaled to 6; the change wakes the loop and 6 is above the new max.
    assert fake.scales == [6, 3]
    log = await run.log()
    assert log[-1].reason == "above maxReplicas: 6 -> 3"
    await run.handle.execute_update(AutoscalerWorkflow.delete)
    final: AutoscalerStatus = await run.handle.result()
    assert final.deleting
    assert final.max_replicas == 3
    assert fake.desired == 3  # deleting the autoscaler leaves the deployment as it is


async def test_apply_rejects_an_invalid_spec_with_its_field(start: Any) -> None:
    run = await start(FakeDeployment(desired=1, total=4))
    await run.advance(1)
    invalid = manifest()
    invalid.metadata.name = run.name
    invalid.spec.min_replicas = 7  # above maxReplicas 6: a cross-field rule
    with pytest.raises(WorkflowUpdateFailedError) as info:
        await run.handle.execute_update(AutoscalerWorkflow.apply, invalid)
    assert "spec.minReplicas: must not exceed maxReplicas" in str(info.value.cause)
    assert (await run.status()).generation == 1


async def test_history_cli_prints_the_log_and_plots_it(
    start: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(output.console, "width", 250)  # one table row per line
    fake = FakeDeployment(desired=1, total=20)
    run = await start(fake)
    await run.advance(60)
    fake.total = 0
    await run.advance(400)
    status, decisions = await fetch(run.env.client, "ml", run.name, 100)
    assert status.target == "qwen"
    assert status.last_decision == decisions[-1]
    assert [d.applied for d in decisions][:1] == [5]
    assert decisions[-1].applied == 1
    chart = plot_history(decisions, tmp_path / "direct.png", "test")
    assert chart.read_bytes().startswith(b"\x89PNG")

    # The command itself, against the same server (it runs its own event loop: a thread).
    address = run.env.client.service_client.config.target_host
    out = tmp_path / "out" / "history.png"
    result = await asyncio.to_thread(
        CliRunner().invoke,
        app,
        ["autoscaler", "history", run.name, "-n", "ml", "--plot", str(out), "--address", address],
    )
    assert result.exit_code == 0, result.output
    assert "vllm:num_requests_waiting" in result.output
    assert "scale 1 -> 5" in result.output
    assert f"chart written to {out}" in result.output
    image = matplotlib.image.imread(out)
    assert image.shape[:2] == (600, 1000)

    missing = await asyncio.to_thread(
        CliRunner().invoke, app, ["autoscaler", "history", "nope", "-n", "ml", "--address", address]
    )
    assert missing.exit_code != 0
    assert "autoscaler ml/nope" in missing.output


async def test_a_new_target_starts_afresh_and_is_not_reported_as_overridden(start: Any) -> None:
    fake = FakeDeployment(desired=2, total=8)
    run = await start(fake, manifest(maxReplicas=8))
    await run.advance(20)
    switched = manifest(maxReplicas=8, scaleTargetRef={"name": "other"})
    switched.metadata.name = run.name
    await run.handle.execute_update(AutoscalerWorkflow.apply, switched)
    await run.advance(30)
    assert fake.targets[-1] == "other"
    log = await run.log()
    assert not any(d.outcome.startswith("overridden") for d in log)
    # The other deployment (7 replicas, idle) is not scaled down at once: a fresh window.
    assert [d.applied for d in log if d.current == 7] == [7] * len(
        [d for d in log if d.current == 7]
    )
