"""Golden ModelCache-related histories (``cache/``, recorded by ``record_cache_histories.py``)
replay against the current workflow code without non-determinism: the ModelCache golden
(``cache.json``), staged with a retried download. (A replica's wait for its cache is covered by
``tests/workflow/test_replica_model_cache.py``; ModelReplica's one golden is
``histories/replica.json``.) A failure without an intended change to
their commands is a determinism bug; never re-record to silence it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from modelfleet.worker.client import data_converter
from modelfleet.worker.runner import WORKFLOWS

HISTORIES = Path(__file__).resolve().parent / "cache"
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
async def test_cache_history_replays(filename: str) -> None:
    history = load(filename)
    started = history.events[0].workflow_execution_started_event_attributes
    assert started.workflow_type.name == INDEX[filename]["type"]
    replayer = Replayer(workflows=WORKFLOWS, data_converter=data_converter())
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{filename}: {result.replay_failure!r}"


def test_goldens_cover_the_staging() -> None:
    assert {p.name for p in HISTORIES.glob("*.json")} - {"index.json"} == set(INDEX)
    staged = activities(load("cache.json"))
    assert {"cache.targets", "cache.observe", "cache.stage", "cache.clean", "cache.report"} <= set(
        staged
    )
