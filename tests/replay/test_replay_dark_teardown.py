"""The golden of a ModelReplica whose teardown gave up on a dark cluster
(``dark-teardown-replica.json``, recorded by ``record_dark_teardown_history.py``) holds what it
is meant to guard: the ``replica-teardown-leaves-dark-cluster-to-sweep`` marker, delete tries
bounded by ``DELETE_TRY`` with the cluster's workflow asked between them (no, then yes), and
the teardown ending there; older replica goldens have neither, so both paths replay.
(``test_replay.py`` replays it with every other golden.)"""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from test_replay import activities, holds_patch, load, of_type

from modelfleet.contracts.activity_names import FLEET_SWEEP_PENDING, KUBE_DELETE
from modelfleet.contracts.serving_payloads import ENDPOINTS_WITHDRAW
from modelfleet.replica.workflow import DELETE_TRY, PATCH_DARK_TEARDOWN


def test_dark_teardown_golden_holds_the_marker_and_the_bounded_tries() -> None:
    history = load("dark-teardown-replica.json")
    assert holds_patch(history, PATCH_DARK_TEARDOWN)
    names = activities(history)
    teardown = names[names.index(ENDPOINTS_WITHDRAW) + 1 :]
    assert teardown == [KUBE_DELETE, FLEET_SWEEP_PENDING, KUBE_DELETE, FLEET_SWEEP_PENDING]
    deletes = [
        e.activity_task_scheduled_event_attributes
        for e in of_type(history, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
        if e.activity_task_scheduled_event_attributes.activity_type.name == KUBE_DELETE
    ]
    assert all(d.schedule_to_close_timeout.ToTimedelta() <= DELETE_TRY for d in deletes)
    sweep_asked = [
        e.activity_task_scheduled_event_attributes.input.payloads[0].data
        for e in of_type(history, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
        if e.activity_task_scheduled_event_attributes.activity_type.name == FLEET_SWEEP_PENDING
    ]
    assert sweep_asked == [b'"cluster/east"'] * 2, sweep_asked
    # Every delete try failed (the cluster is dark), and the workflow still completed.
    assert len(of_type(history, EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED)) >= len(deletes)
    assert of_type(history, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)


def test_older_replica_goldens_replay_without_the_dark_teardown_path() -> None:
    for name in ("drift-replica.json", "selfheal-rollout-replica.json"):
        history = load(name)
        assert not holds_patch(history, PATCH_DARK_TEARDOWN), name
        assert FLEET_SWEEP_PENDING not in activities(history), name
