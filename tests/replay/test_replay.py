"""Golden histories replay against the current workflow code without non-determinism.

The histories in ``histories/`` were recorded from real runs, one per workflow type; those of
``record_histories.py``: ``deployment.json`` and ``replica.json`` (a deployment rolled out,
scaled up by Update, paused, rolled to a new image surge first, scaled down by signal and
deleted; its first replica rolled out, serving, watched by its cluster and torn down), a
ServingStack accepted without action and a service routing to a replica (the Fleet,
InferenceCluster, EndpointDirectory and ModelAutoscaler goldens have recorders of their own).
No ``workflow.patched`` before the first release: a change to a workflow's commands re-records
its one golden; a failure without such a change is a determinism bug, never re-record to
silence it.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer
from temporalio.workflow import NondeterminismError

from modelfleet.contracts.workflow_inputs import ReplicaResult
from modelfleet.replica.state import ReplicaInput
from modelfleet.replica.workflow import ReplicaWorkflow
from modelfleet.worker.client import data_converter
from modelfleet.worker.runner import WORKFLOWS

HISTORIES = Path(__file__).resolve().parent / "histories"
INDEX: dict[str, dict[str, str]] = json.loads((HISTORIES / "index.json").read_text())


def load(filename: str) -> WorkflowHistory:
    return WorkflowHistory.from_json(
        INDEX[filename]["workflow_id"], (HISTORIES / filename).read_text()
    )


def of_type(history: WorkflowHistory, event_type: EventType.ValueType) -> list[HistoryEvent]:
    return [e for e in history.events if e.event_type == event_type]


def activities(history: WorkflowHistory) -> list[str]:
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in of_type(history, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
    ]


def commands(history: WorkflowHistory) -> list[str]:
    """Activities by name, child starts and teardown signals, in history order."""
    out = []
    for e in history.events:
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            out.append(e.activity_task_scheduled_event_attributes.activity_type.name)
        elif e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            out.append("child")
        elif e.event_type == EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
            out.append(e.signal_external_workflow_execution_initiated_event_attributes.signal_name)
    return out


def signals(history: WorkflowHistory) -> set[str]:
    return {
        e.workflow_execution_signaled_event_attributes.signal_name
        for e in of_type(history, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
    }


def updates(history: WorkflowHistory) -> set[str]:
    return {
        e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
        for e in of_type(history, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)
    }


@pytest.mark.parametrize("filename", sorted(INDEX))
async def test_golden_history_replays_without_nondeterminism(filename: str) -> None:
    history = load(filename)
    started = history.events[0].workflow_execution_started_event_attributes
    assert started.workflow_type.name == INDEX[filename]["type"]
    replayer = Replayer(workflows=WORKFLOWS, data_converter=data_converter())
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{filename}: {result.replay_failure!r}"


def test_goldens_cover_every_workflow_type_and_scenario() -> None:
    assert {meta["type"] for meta in INDEX.values()} == {
        "Fleet",
        "ModelDeployment",
        "ModelReplica",
        "InferenceCluster",
        "AcceptedResource",
        "ModelService",
        "EndpointDirectory",
        "ModelAutoscaler",
        "RolloutSlots",
    }
    assert {p.name for p in HISTORIES.glob("*.json")} - {"index.json"} == set(INDEX)

    # The accepted-without-action document: applied twice (start + re-apply), then deleted.
    accepted = load("accepted.json")
    assert {"apply", "delete"} <= updates(accepted)
    assert of_type(accepted, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)
    assert activities(accepted) == []

    # (e) serving: the service watched, watched its health, routed, and removed its route.
    service = activities(load("service.json"))
    assert service[0] == "endpoints.watch"
    assert {"serving.watch_health", "kube.apply", "serving.gateway_address"} <= set(service)
    assert service[-2:] == ["endpoints.unwatch", "kube.delete"]
    directory = load("endpoints.json")
    assert {"put_gateway", "put", "watch"} <= updates(directory)

    fleet = load("fleet.json")
    assert {"put_class", "put_cluster", "report_cluster", "commit", "release"} <= (updates(fleet))
    cluster = load("cluster.json")
    assert {"kube.probe", "fleet.publish_cluster"} <= set(activities(cluster))


def starts(history: WorkflowHistory) -> list[int]:
    return [
        e.event_id
        for e in of_type(history, EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED)
    ]


def update_at(history: WorkflowHistory, name: str) -> int:
    return next(
        e.event_id
        for e in of_type(history, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)
        if e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name == name
    )


def test_the_deployment_golden_scales_holds_a_change_while_paused_and_rolls_surge_first() -> None:
    history = load("deployment.json")
    assert not of_type(history, EventType.EVENT_TYPE_MARKER_RECORDED), "no replay patches"
    assert {"apply", "scale", "pause", "resume", "delete"} <= updates(history)
    assert "scale" in signals(history)
    # Started: the first replica, the second by the scale Update, then after the resume (the
    # new image held while paused) two replacements.
    started = starts(history)
    assert len(started) == 4
    assert [at > update_at(history, "resume") for at in started] == [False, False, True, True]
    # Resumed: the new template placed dry first (it fits), then surge first: each replacement
    # is placed and started, proves itself (what its engines answered read once it has stayed
    # Ready) before the replica it replaces is told to tear down and released.
    steps = commands(history)
    roll = steps[steps.index("fleet.dry_place") :]
    assert roll[:12] == [
        "fleet.dry_place",
        "fleet.place",  # the reconcile pass: nothing to add
        "fleet.place",  # room for one more
        "child",
        "engine.errors",
        "teardown",
        "fleet.release",
        "fleet.place",
        "child",
        "engine.errors",
        "teardown",
        "fleet.release",
    ]
    # Each replacement proved itself (a timer of minReadySeconds) before its old replica went.
    proving = [
        e
        for e in of_type(history, EventType.EVENT_TYPE_TIMER_STARTED)
        if "minReadySeconds" in e.user_metadata.summary.data.decode()
    ]
    assert len(proving) == 2
    # Torn down: two replaced, one by the scale signal, the last by the delete.
    assert steps.count("teardown") == 4
    assert of_type(history, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)


def test_the_deployment_golden_sends_its_template_whole_once_then_by_key() -> None:
    history = load("deployment.json")
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


def test_the_slots_golden_queues_one_and_grants_it_when_a_slot_is_given_back() -> None:
    slots = load("slots.json")
    assert {"request", "release", "configure"} <= signals(slots)
    sent = [
        json.loads(
            e.signal_external_workflow_execution_initiated_event_attributes.input.payloads[0].data
        )
        for e in of_type(slots, EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED)
    ]
    assert {"granted": False, "ahead": 0} in sent
    queued = sent.index({"granted": False, "ahead": 0})
    assert {"granted": True, "ahead": 0} in sent[queued + 1 :]
    # The deployment golden asked for a slot and gave it back.
    deployment = load("deployment.json")
    assert "rollout_slot" in signals(deployment)


def test_the_replica_golden_rolls_out_serves_watched_and_tears_down_in_order() -> None:
    history = load("replica.json")
    assert not of_type(history, EventType.EVENT_TYPE_MARKER_RECORDED), "no replay patches"
    steps = [c for c in commands(history) if c != "replica_progress"]
    # The rollout: namespace, claims, gangs applied, the leader awaited, routing applied, the
    # endpoint picker awaited, the models it serves checked; Ready: the endpoint published, the
    # replica registered with its cluster, which scanned it and said so.
    assert steps[: steps.index("watch_replica") + 1] == [
        "kube.apply",
        "kube.apply",
        "kube.apply",
        "kube.poll_ready",
        "kube.apply",
        "kube.poll_ready",
        "serving.check_models",
        "endpoints.publish_replica",
        "watch_replica",
    ]
    assert {"replica_health", "teardown"} <= signals(history)
    assert "kube.check_ready" not in steps, "watched by its cluster, it never polls"
    # The cluster's first scan acknowledged it: its baseline compared once (nothing drifted).
    # Torn down: unregistered, the endpoint withdrawn and the front doors read (no route
    # carries it) before anything is deleted.
    assert steps[steps.index("watch_replica") + 1 :] == [
        "kube.drift",
        "unwatch_replica",
        "endpoints.withdraw",
        "serving.routes_carrying",
        "kube.delete",
    ]
    # The deployment told only what it decides on: Ready, then done (not every step).
    assert commands(history).count("replica_progress") == 2
    assert of_type(history, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)


@workflow.defn(name="ModelReplica", sandboxed=False)
class ReplicaWithAnExtraTimer(ReplicaWorkflow):
    """A change of commands (a timer before the saga) without re-recording the golden."""

    @workflow.run
    async def run(self, arg: ReplicaInput) -> ReplicaResult:
        await workflow.sleep(timedelta(seconds=1))
        return await super().run(arg)


async def test_replay_catches_a_change_of_commands() -> None:
    replayer = Replayer(workflows=[ReplicaWithAnExtraTimer], data_converter=data_converter())
    result = await replayer.replay_workflow(load("replica.json"), raise_on_replay_failure=False)
    assert isinstance(result.replay_failure, NondeterminismError)
