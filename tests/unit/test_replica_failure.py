"""A replica's rollout failure in plain words, with the step and the cluster, and whether its
cluster (not the change) was to blame (issue 29, item 3): Temporal's own wording ("Not enough
time to schedule next retry before activity ScheduleToClose timeout") never reaches a reason."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.exceptions import ActivityError, ApplicationError, RetryState, TimeoutType
from temporalio.exceptions import TimeoutError as TemporalTimeout

from modelfleet.contracts.error_types import (
    MISSING_CREDENTIALS,
    PERMANENT_KUBE_ERROR,
    READINESS_DEADLINE_EXCEEDED,
    RETRYABLE_KUBE_ERROR,
)
from modelfleet.contracts.status import ReplicaStep
from modelfleet.replica.failure import plain_cause, rollout_failure

OUT_OF_TIME = "Not enough time to schedule next retry before activity ScheduleToClose timeout"


def _activity_error(last: BaseException | None) -> ActivityError:
    """What a workflow sees when an activity ran out of its ScheduleToClose budget: the last
    attempt's error behind Temporal's timeout."""
    timeout = TemporalTimeout(
        OUT_OF_TIME, type=TimeoutType.SCHEDULE_TO_CLOSE, last_heartbeat_details=[]
    )
    timeout.__cause__ = last
    wrapped = ActivityError(
        "Activity task failed",
        scheduled_event_id=1,
        started_event_id=2,
        identity="w",
        activity_type="kube.apply",
        activity_id="1",
        retry_state=RetryState.TIMEOUT,
    )
    wrapped.__cause__ = timeout
    return wrapped


def _hung() -> TemporalTimeout:
    return TemporalTimeout(
        "activity StartToClose timeout", type=TimeoutType.START_TO_CLOSE, last_heartbeat_details=[]
    )


@pytest.mark.parametrize(
    ("last", "infrastructure", "words"),
    [
        # Every attempt hung: the cluster's API server did not answer.
        (
            _hung(),
            True,
            "ensure-namespace on cluster west did not finish: the cluster's API server",
        ),
        # Only Temporal's timeout, no attempt's error behind it.
        (None, True, "ensure-namespace on cluster west did not finish: the cluster's API server"),
        # Refused or 503 until the deadline.
        (
            ApplicationError("POST namespaces: connection refused", type=RETRYABLE_KUBE_ERROR),
            True,
            "the cluster did not accept it in time: POST namespaces: connection refused",
        ),
        (
            ApplicationError("no kubeconfig for west", type=MISSING_CREDENTIALS),
            True,
            "no kubeconfig for west",
        ),
        # The change's own: a rejected manifest, pods never ready.
        (
            ApplicationError("422 Invalid: spec.containers[0].image", type=PERMANENT_KUBE_ERROR),
            False,
            "ensure-namespace on cluster west failed: 422 Invalid: spec.containers[0].image",
        ),
        (
            ApplicationError(
                "not ready by the progress deadline: 0/1 pods Ready",
                type=READINESS_DEADLINE_EXCEEDED,
            ),
            False,
            "failed: not ready by the progress deadline: 0/1 pods Ready",
        ),
    ],
)
def test_an_activity_failure_names_the_step_and_cluster_in_plain_words(
    last: BaseException | None, infrastructure: bool, words: str
) -> None:
    failure = rollout_failure(_activity_error(last), ReplicaStep.NAMESPACE, "west")
    assert words in failure.reason
    assert failure.infrastructure is infrastructure
    for temporal in ("schedule next retry", "ScheduleToClose", "StartToClose"):
        assert temporal not in failure.reason


def test_the_workflows_own_reason_and_a_cancellation_are_kept() -> None:
    own = rollout_failure(
        RuntimeError("x"),
        ReplicaStep.LEADER_READY,
        "west",
        reason="progress deadline passed before leader readiness",
    )
    assert own.reason == "progress deadline passed before leader readiness"
    assert not own.infrastructure
    cancelled = rollout_failure(asyncio.CancelledError(), ReplicaStep.CLAIMS, "west")
    assert cancelled.reason == "cancelled"
    assert not cancelled.infrastructure


def test_plain_cause_never_quotes_temporal() -> None:
    assert "did not answer" not in plain_cause(
        _activity_error(ApplicationError("503 Service Unavailable", type=RETRYABLE_KUBE_ERROR))
    )
    assert (
        plain_cause(
            _activity_error(ApplicationError("503 Service Unavailable", type=RETRYABLE_KUBE_ERROR))
        )
        == "503 Service Unavailable"
    )
    assert "may be down or unreachable" in plain_cause(_activity_error(None))
    assert OUT_OF_TIME not in plain_cause(_activity_error(None))
