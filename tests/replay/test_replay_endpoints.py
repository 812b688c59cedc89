"""The golden of the endpoint directory's grouped continue-as-new (``grouped-endpoints.json``,
recorded by ``record_endpoints_history.py``) holds what it guards: the patch marker and a
continue-as-new input with the replicas' endpoints in groups and the authored one whole.
(``test_replay.py`` replays it with every other golden; ``serving-endpoints.json`` is from
before the patch.)"""

from __future__ import annotations

import json

from temporalio.api.enums.v1 import EventType
from test_replay import holds_patch, load

from modelfleet.endpoints.workflow import PATCH_GROUPED_INPUT


def test_grouped_golden_carries_the_replicas_endpoints_in_groups() -> None:
    history = load("grouped-endpoints.json")
    assert holds_patch(history, PATCH_GROUPED_INPUT)
    last = history.events[-1]
    assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    carried = json.loads(
        last.workflow_execution_continued_as_new_event_attributes.input.payloads[0].data
    )
    assert [e["name"] for e in carried["endpoints"]] == ["openai"]
    assert carried["groups"]
    assert all(g["members"] for g in carried["groups"])


def test_the_older_directory_golden_has_no_grouped_input() -> None:
    assert not holds_patch(load("serving-endpoints.json"), PATCH_GROUPED_INPUT)
