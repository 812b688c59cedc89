"""The golden of placement by template key (``template-deployment.json``, recorded by
``record_histories.py --only template``) holds what it guards: the patch marker, a first
``fleet.place`` carrying the deployment whole and a later one naming it by key only, much
smaller. (``test_replay.py`` replays it with every other golden.)"""

from __future__ import annotations

import json

from temporalio.api.enums.v1 import EventType
from test_replay import holds_patch, load, of_type

from modelfleet.deployment.workflow import PATCH_PLACE_BY_TEMPLATE


def test_template_golden_sends_the_deployment_whole_once_then_its_key() -> None:
    history = load("template-deployment.json")
    assert holds_patch(history, PATCH_PLACE_BY_TEMPLATE)
    requests = [
        e.activity_task_scheduled_event_attributes.input.payloads[0].data
        for e in of_type(history, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
        if e.activity_task_scheduled_event_attributes.activity_type.name == "fleet.place"
    ]
    bodies = [json.loads(r) for r in requests]
    assert bodies[0]["deployment"] is not None
    assert bodies[0]["template"] == ""
    named = [b for b in bodies if b["deployment"] is None]
    assert named
    assert all(len(b["template"]) == 32 for b in named)
    assert max(len(r) for r, b in zip(requests, bodies, strict=True) if b in named) * 4 < len(
        requests[0]
    )
