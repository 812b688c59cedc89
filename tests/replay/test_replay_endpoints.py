"""The endpoint directory golden (``endpoints.json``, recorded by ``record_endpoints_history.py``)
holds what it was recorded for: the gateway put, a watch whose service is gone (its signal
failed), and a continue-as-new input whose state has the replicas' endpoints in groups and the
authored one whole. (``test_replay.py`` replays it with every other golden.)"""

from __future__ import annotations

import json

from temporalio.api.enums.v1 import EventType
from test_replay import load, of_type, updates


def test_the_directory_golden_carries_the_replicas_endpoints_in_groups() -> None:
    history = load("endpoints.json")
    assert {"put_gateway", "watch", "put"} <= updates(history)
    assert of_type(history, EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED)
    last = history.events[-1]
    assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    carried = json.loads(
        last.workflow_execution_continued_as_new_event_attributes.input.payloads[0].data
    )["state"]
    assert [e["name"] for e in carried["endpoints"]] == ["openai"]
    assert carried["groups"]
    assert all(g["members"] for g in carried["groups"])
    assert carried["gateway"] is not None
    assert carried["watches"] == []  # forgotten when its signal failed
