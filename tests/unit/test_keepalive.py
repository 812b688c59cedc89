"""``activities.keepalive``: a sync activity blocked in one long call keeps heartbeating its
latest progress from the helper thread, and starts from the progress it resumed from."""

from __future__ import annotations

import threading
from typing import Any

from temporalio.testing import ActivityEnvironment

from modelfleet.activities.keepalive import KeepAlive


def test_a_blocked_activity_keeps_beating_its_latest_progress() -> None:
    env = ActivityEnvironment()
    beats: list[tuple[Any, ...]] = []
    enough = threading.Event()
    beat_lock = threading.Lock()

    def on_heartbeat(*details: Any) -> None:
        with beat_lock:
            beats.append(details)
            if len(beats) >= 6:
                enough.set()

    env.on_heartbeat = on_heartbeat

    def blocking_activity() -> bool:
        with KeepAlive(3, 1, 0, every=0.01) as alive:
            alive.beat(4, 2, 0)
            # Stands in for one API request that outlasts the heartbeat timeout: it returns
            # only once the helper has beaten several times on its own.
            return enough.wait(timeout=10)

    assert env.run(blocking_activity)
    assert beats[0] == (3, 1, 0)  # the resumed progress, before any new step
    assert beats[1] == (4, 2, 0)
    assert set(beats[2:]) == {(4, 2, 0)}


def test_the_helper_stops_with_the_activity() -> None:
    env = ActivityEnvironment()
    count = 0

    def on_heartbeat(*details: Any) -> None:
        nonlocal count
        count += 1

    env.on_heartbeat = on_heartbeat

    def quick() -> threading.Thread:
        with KeepAlive(every=0.01) as alive:
            return alive._thread

    helper = env.run(quick)
    assert not helper.is_alive()
    assert count >= 1


def test_a_quiet_start_leaves_the_first_beat_to_the_activity() -> None:
    """The SDK sends a first heartbeat at once and throttles the rest: a quiet start makes the
    activity's own first progress (the operation a retry resumes) that first beat."""
    env = ActivityEnvironment()
    beats: list[tuple[Any, ...]] = []
    env.on_heartbeat = lambda *details: beats.append(details)

    def activity_fn() -> None:
        with KeepAlive(every=60, quiet_start=True) as alive:
            alive.beat("operation-1")

    env.run(activity_fn)
    assert beats == [("operation-1",)]
