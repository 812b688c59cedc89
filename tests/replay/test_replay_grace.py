"""The golden of the Fleet's end-of-grace timer (``grace-fleet.json``, recorded by
``record_grace_fleet_history.py``) holds what it is meant to guard: the patch marker, one timer
started when the cluster went NotReady and fired at the grace's end, and a placement after it.
(``test_replay.py`` replays it with every other golden.)"""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from test_replay import holds_patch, load, of_type, updates

from modelfleet.fleet.workflow import GRACE_NUDGE_PATCH, GRACE_TIMER_PATCH, NOT_READY_GRACE


def test_grace_golden_holds_the_patch_and_the_fired_timer() -> None:
    history = load("grace-fleet.json")
    assert holds_patch(history, GRACE_TIMER_PATCH)
    started = of_type(history, EventType.EVENT_TYPE_TIMER_STARTED)
    assert len(started) == 1
    timeout = started[0].timer_started_event_attributes.start_to_fire_timeout.ToTimedelta()
    assert NOT_READY_GRACE < timeout <= NOT_READY_GRACE + NOT_READY_GRACE / 60
    assert len(of_type(history, EventType.EVENT_TYPE_TIMER_FIRED)) == 1
    assert {"place", "report_cluster"} <= updates(history)
    fired = next(
        i for i, e in enumerate(history.events) if e.event_type == EventType.EVENT_TYPE_TIMER_FIRED
    )
    assert any(
        e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
        for e in history.events[fired:]
    )


def test_nudge_golden_signals_the_deployment_at_the_grace_end() -> None:
    """``grace-nudge-fleet.json`` (``record_grace_fleet_history.py --nudge``): the nudge patch's
    marker, and a signal to the deployment on the dark cluster after the timer fired; the
    older golden has neither, so both code paths replay."""
    history = load("grace-nudge-fleet.json")
    assert holds_patch(history, GRACE_NUDGE_PATCH)
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
    old = load("grace-fleet.json")
    assert not of_type(old, EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED)
