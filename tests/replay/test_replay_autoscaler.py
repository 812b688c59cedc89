"""The ModelAutoscaler golden (``autoscaler.json``, recorded by ``record_autoscaler_history.py``)
covers what the loop does: scale from zero (the gateway read at zero only, then the first
replica), decisions with reads and scales, a spec change and the run's continue-as-new.
(``test_replay.py`` replays it with every other golden.)"""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from test_replay import activities, load, updates


def test_the_autoscaler_golden_scales_from_zero_then_on_load() -> None:
    history = load("autoscaler.json")
    done = activities(history)
    assert {"autoscaler.target", "autoscaler.read_metrics", "autoscaler.scale"} <= set(done)
    first_scale = done.index("autoscaler.scale")
    assert "autoscaler.gateway_waiting" in done[:first_scale]
    assert done.count("autoscaler.scale") >= 3  # from zero, up under load, down after the window
    assert "apply" in updates(history)
    assert history.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
