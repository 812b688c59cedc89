"""The golden of the resync back-off (``backoff-deployment.json``, recorded by
``record_histories.py --only backoff``) holds what it guards: the patch marker, a first rest of
60 s, the quiet resync's placement check, then a rest of 120 s. (``test_replay.py`` replays it
with every other golden; the older goldens rest 60 s every time and still replay.)"""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from test_replay import holds_patch, load, of_type

from modelfleet.deployment.workflow import PATCH_RESYNC_BACKOFF


def test_backoff_golden_rests_twice_as_long_after_a_quiet_resync() -> None:
    history = load("backoff-deployment.json")
    assert holds_patch(history, PATCH_RESYNC_BACKOFF)
    timeline = [
        (
            "rest",
            e.timer_started_event_attributes.start_to_fire_timeout.ToSeconds(),
        )
        if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED
        else ("check", 0)
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED
        or (
            e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            and e.activity_task_scheduled_event_attributes.activity_type.name
            == "fleet.placement_current"
        )
    ]
    assert ("rest", 60) in timeline
    tail = timeline[timeline.index(("rest", 60)) :]
    assert tail[:3] == [("rest", 60), ("check", 0), ("rest", 120)], timeline


def test_older_goldens_rest_sixty_seconds_every_time() -> None:
    history = load("quiet-deployment.json")
    rests = {
        e.timer_started_event_attributes.start_to_fire_timeout.ToSeconds()
        for e in of_type(history, EventType.EVENT_TYPE_TIMER_STARTED)
    }
    assert rests == {60}
