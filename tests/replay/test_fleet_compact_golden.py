"""The compact-state Fleet golden (``record_fleet_history.py``) covers the new path: it carries
the patch marker, and its run ended in a continue-as-new on the history limit whose input is the
compact state (replay itself is checked with every golden in ``test_replay.py``)."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory

from modelfleet.contracts.workflow_inputs import FleetInput
from modelfleet.fleet.workflow import COMPACT_STATE_PATCH

HISTORIES = Path(__file__).resolve().parent / "histories"


def test_compact_golden_takes_the_patched_path_and_continues_as_new() -> None:
    history = WorkflowHistory.from_json("fleet", (HISTORIES / "compact-fleet.json").read_text())
    markers = [
        e.marker_recorded_event_attributes
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
    ]
    assert any(COMPACT_STATE_PATCH in str(m) for m in markers), markers
    last = history.events[-1]
    assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    payload = last.workflow_execution_continued_as_new_event_attributes.input.payloads[0]
    carried = FleetInput.model_validate(json.loads(payload.data))
    assert carried.state is not None
    assert carried.state.cluster_entries
    assert not carried.state.clusters
    assert carried.state.ledger is not None
    assert carried.state.remembered  # the placement answered twice, within its retry window
