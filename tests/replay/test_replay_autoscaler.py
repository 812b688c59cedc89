"""Golden ModelAutoscaler histories (``autoscaler/``, recorded by
``record_autoscaler_histories.py``) replay against the current workflow code without
non-determinism, and cover what the loop does: decisions with reads and scales, continue-as-new,
a spec change and delete; and scale from zero (the gateway read, behind its patch marker, and
the first replica). A failure means a change would break running autoscalers: guard it
with ``workflow.patched``; never re-record to silence it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from modelfleet.autoscaler.workflow import PATCH_SCALE_FROM_ZERO
from modelfleet.worker.runner import WORKFLOWS

HISTORIES = Path(__file__).resolve().parent / "autoscaler"
INDEX: dict[str, dict[str, str]] = json.loads((HISTORIES / "index.json").read_text())


def load(filename: str) -> WorkflowHistory:
    return WorkflowHistory.from_json(
        INDEX[filename]["workflow_id"], (HISTORIES / filename).read_text()
    )


def activities(history: WorkflowHistory) -> list[str]:
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


@pytest.mark.parametrize("filename", sorted(INDEX))
async def test_autoscaler_history_replays(filename: str) -> None:
    history = load(filename)
    started = history.events[0].workflow_execution_started_event_attributes
    assert started.workflow_type.name == "ModelAutoscaler"
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{filename}: {result.replay_failure!r}"


def test_goldens_cover_the_loop() -> None:
    assert {p.name for p in HISTORIES.glob("*.json")} - {"index.json"} == set(INDEX)
    first = load("first-run.json")
    done = activities(first)
    assert {"autoscaler.target", "autoscaler.read_metrics", "autoscaler.scale"} <= set(done)
    assert done.count("autoscaler.scale") >= 2  # up under load, down after the window
    assert first.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    last = load("last-run.json")
    updates = {
        e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
        for e in last.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    }
    assert updates == {"apply", "delete"}
    assert last.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED


def test_scale_from_zero_golden_reads_the_gateway_behind_its_patch() -> None:
    history = load("scale-from-zero.json")
    done = activities(history)
    assert "autoscaler.gateway_waiting" in done
    # The gateway is read at zero only: the scale to the first replica ends those reads.
    assert done.index("autoscaler.scale") > done.index("autoscaler.gateway_waiting")
    assert "autoscaler.gateway_waiting" not in done[done.index("autoscaler.scale") :]
    markers = [
        e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
    ]
    assert any(PATCH_SCALE_FROM_ZERO.encode() in m for m in markers)
    # The loop's goldens predate the patch: they replay (above) without ever reading it.
    assert "autoscaler.gateway_waiting" not in activities(load("first-run.json"))
