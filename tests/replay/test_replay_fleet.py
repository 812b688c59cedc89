"""The Fleet golden (``fleet.json``, recorded by ``record_fleet_history.py``) tells the story it was
recorded for: placements committed (one answered from memory), the end-of-grace timer of
a NotReady cluster with the deployment on it signalled, a placement elsewhere, a release, and a
continue-as-new on the history limit carrying the compact state. (``test_replay.py`` replays it
with every other golden.)"""

from __future__ import annotations

import json

from temporalio.api.enums.v1 import EventType
from test_replay import load, of_type, updates

from modelfleet.contracts.workflow_inputs import FleetInput
from modelfleet.fleet.workflow import NOT_READY_GRACE


def test_the_fleet_golden_fires_its_grace_timer_nudges_and_continues_as_new() -> None:
    history = load("fleet.json")
    assert {"put_class", "put_cluster", "commit", "report_cluster", "release"} <= (updates(history))
    started = of_type(history, EventType.EVENT_TYPE_TIMER_STARTED)
    assert len(started) == 1
    timeout = started[0].timer_started_event_attributes.start_to_fire_timeout.ToTimedelta()
    assert NOT_READY_GRACE < timeout <= NOT_READY_GRACE + NOT_READY_GRACE / 60
    fired = next(
        i for i, e in enumerate(history.events) if e.event_type == EventType.EVENT_TYPE_TIMER_FIRED
    )
    signalled = [
        e.signal_external_workflow_execution_initiated_event_attributes
        for e in history.events[fired:]
        if e.event_type == EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED
    ]
    assert [(s.workflow_execution.workflow_id, s.signal_name) for s in signalled] == [
        ("deployment/ns/m", "resync")
    ]
    last = history.events[-1]
    assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    payload = last.workflow_execution_continued_as_new_event_attributes.input.payloads[0]
    carried = FleetInput.model_validate(json.loads(payload.data))
    assert carried.state is not None
    assert carried.state.cluster_entries
    assert carried.state.ledger is not None
    assert carried.state.remembered  # the placements answered, within their retry window
