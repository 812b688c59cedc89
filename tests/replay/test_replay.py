"""Golden histories replay against the current workflow code without non-determinism.

The histories in ``histories/`` were recorded by ``record_histories.py`` from real runs (a rollout
to Ready, a scale up by Update and down by signal, an image change rolled surge first, a
rollback of a replica that missed its readiness deadline, a ModelCache accepted without action)
and cover every workflow type (the Fleet, InferenceCluster, EndpointDirectory and
ModelAutoscaler goldens have recorders of their own). No ``workflow.patched`` before the first
release: a change to a workflow's commands re-records its one golden; a failure without such a
change is a determinism bug, never re-record to silence it.
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
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer
from temporalio.workflow import NondeterminismError

from modelfleet.contracts.workflow_inputs import ReplicaInput, ReplicaResult
from modelfleet.replica.workflow import ReplicaWorkflow
from modelfleet.worker.runner import WORKFLOWS

HISTORIES = Path(__file__).resolve().parent / "histories"
INDEX: dict[str, dict[str, str]] = json.loads((HISTORIES / "index.json").read_text())


def load(filename: str) -> WorkflowHistory:
    return WorkflowHistory.from_json(
        INDEX[filename]["workflow_id"], (HISTORIES / filename).read_text()
    )


def of_type(history: WorkflowHistory, event_type: EventType.ValueType) -> list[HistoryEvent]:
    return [e for e in history.events if e.event_type == event_type]


def holds_patch(history: WorkflowHistory, patch: str) -> bool:
    """Whether the history recorded ``workflow.patched(patch)``'s marker."""
    return any(
        patch.encode() in e.marker_recorded_event_attributes.SerializeToString()
        for e in of_type(history, EventType.EVENT_TYPE_MARKER_RECORDED)
    )


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
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
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
    }
    assert {p.name for p in HISTORIES.glob("*.json")} - {"index.json"} == set(INDEX)

    # The accepted-without-action document: applied twice (start + re-apply), then deleted.
    accepted = load("accepted.json")
    assert {"apply", "delete"} <= updates(accepted)
    assert of_type(accepted, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)
    assert activities(accepted) == []

    # (a) rollout to Ready: every step applied, leader then endpoint picker awaited, serving.
    rollout = load("rollout-replica.json")
    assert activities(rollout) == ["kube.apply"] * 3 + ["kube.wait_ready", "kube.apply"] + [
        "kube.wait_ready"
    ]
    assert of_type(rollout, EventType.EVENT_TYPE_TIMER_STARTED), "no health watch after Ready"

    # (b) scale: up by Update, down by signal; the removed replica was torn down and deleted.
    scaled = load("scale-deployment.json")
    assert "scale" in updates(scaled)
    assert "scale" in signals(scaled)
    assert len(of_type(scaled, EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED)) == 2
    assert "fleet.release" in activities(scaled)
    removed = load("scale-replica-removed.json")
    assert "teardown" in signals(removed)
    assert activities(removed)[-1] == "kube.delete"
    assert of_type(removed, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)

    # (c) rollback: the readiness wait failed permanently, the saga compensated, and the
    # deployment reaped the failed replica and released its capacity.
    failed = load("rollback-replica.json")
    failures = of_type(failed, EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED)
    assert [
        f.activity_task_failed_event_attributes.failure.application_failure_info.type
        for f in failures
    ] == ["ReadinessDeadlineExceeded"]
    assert activities(failed)[-2:] == ["kube.wait_ready", "kube.delete"]
    assert of_type(failed, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)
    parent = load("rollback-deployment.json")
    assert of_type(parent, EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED)
    assert "fleet.release" in activities(parent)

    # (d) roll: an image change over two replicas, surge first. Each replacement is placed and
    # started before the old replica it replaces is told to tear down and is released.
    rolled = load("roll-deployment.json")
    steps = commands(rolled)
    roll = steps[steps.index("child", steps.index("child") + 2) - 2 :]
    assert roll == [
        "fleet.place",  # the reconcile pass: nothing to add
        "fleet.place",  # room for one more
        "child",
        "teardown",
        "fleet.release",
        "fleet.place",
        "child",
        "teardown",
        "fleet.release",
        "fleet.place",  # the pass after the last replica reported done
    ]

    # (e) serving: the replica published its endpoint when Ready and withdrew it before its
    # teardown deleted anything; the service watched, probed, routed, and removed its route.
    served = activities(load("serving-replica.json"))
    assert served.index("endpoints.publish_replica") < served.index("endpoints.withdraw")
    assert served.index("endpoints.withdraw") < served.index("kube.delete")
    service = activities(load("service.json"))
    assert service[0] == "endpoints.watch"
    assert {"serving.probe_endpoints", "kube.apply", "serving.gateway_address"} <= set(service)
    assert service[-2:] == ["endpoints.unwatch", "kube.delete"]
    directory = load("endpoints.json")
    assert {"put_gateway", "put", "watch"} <= updates(directory)

    fleet = load("fleet.json")
    assert {"put_class", "put_cluster", "report_cluster", "place", "dry_place", "release"} <= (
        updates(fleet)
    )
    cluster = load("cluster.json")
    assert {"kube.probe", "fleet.publish_cluster"} <= set(activities(cluster))


def patches(history: WorkflowHistory) -> set[str]:
    """The patch IDs a history's markers record."""
    out = set()
    for e in of_type(history, EventType.EVENT_TYPE_MARKER_RECORDED):
        for payload in e.marker_recorded_event_attributes.details["patch-data"].payloads:
            out.add(json.loads(payload.data)["id"])
    return out


def test_the_paused_golden_held_the_new_image_until_resumed() -> None:
    paused = load("paused-deployment.json")
    assert {"pause", "resume", "scale", "apply"} <= updates(paused)
    assert "rollout-pause" in patches(paused)
    # Started: the first replica, the scale-up while paused (old image), then after the resume
    # two replacements, each before the replica it replaces was told to tear down.
    children = [
        e.start_child_workflow_execution_initiated_event_attributes
        for e in of_type(paused, EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED)
    ]
    assert len(children) == 4
    resumed_at = next(
        e.event_id
        for e in of_type(paused, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)
        if e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
        == "resume"
    )
    starts = of_type(paused, EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED)
    assert [e.event_id > resumed_at for e in starts] == [False, False, True, True]
    assert commands(paused).count("teardown") == 2


@workflow.defn(name="ModelReplica", sandboxed=False)
class ReplicaWithAnUnpatchedTimer(ReplicaWorkflow):
    """A careless change: a timer before the saga, without ``workflow.patched``."""

    @workflow.run
    async def run(self, arg: ReplicaInput) -> ReplicaResult:
        await workflow.sleep(timedelta(seconds=1))
        return await super().run(arg)


async def test_replay_catches_an_unpatched_workflow_change() -> None:
    replayer = Replayer(
        workflows=[ReplicaWithAnUnpatchedTimer], data_converter=pydantic_data_converter
    )
    result = await replayer.replay_workflow(
        load("rollout-replica.json"), raise_on_replay_failure=False
    )
    assert isinstance(result.replay_failure, NondeterminismError)


def test_drift_golden_repairs_what_was_deleted_and_says_why() -> None:
    """``drift-replica.json`` (``record_drift_history.py``) covers the serving loop of the
    replica-drift-repair and replica-health-over-time patches."""
    history = load("drift-replica.json")
    markers = {
        json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
        for e in of_type(history, EventType.EVENT_TYPE_MARKER_RECORDED)
    }
    assert {"replica-drift-repair", "replica-health-over-time"} <= markers
    names = activities(history)
    repair = names.index("kube.drift") + 1
    assert names[repair] == "kube.apply"
    converter = pydantic_data_converter.payload_converter
    summaries = [
        str(converter.from_payload(e.user_metadata.summary, str))
        for e in of_type(history, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
    ]
    assert "was deleted outside modelfleet: re-created" in summaries[repair]
    assert names[-1] == "kube.delete"
