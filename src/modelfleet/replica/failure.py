"""Why a replica's rollout failed, in words a person can act on, and whether the replica's
cluster (not the change it runs) was to blame. Read from the exception the failed step raised in
the workflow; pure (no Temporal calls, no I/O): it only walks an exception's cause chain, so the
workflow stays deterministic.

Temporal's own wording ("Not enough time to schedule next retry before activity ScheduleToClose
timeout", "activity StartToClose timeout") never reaches a reason: the innermost cause (what the
cluster answered on the last attempt) is quoted instead, or, when every attempt hung, that the
cluster's API server did not answer, with the step and the cluster named.

Infrastructure: the step could not talk to the cluster (every attempt timed out or got a
retryable API error such as connection refused or 503, or the worker holds no credentials for
it). The deployment retries such a replacement on another cluster instead of rolling the change
back. A rejected manifest (a permanent API error), pods that never became ready, or a render
failure are the change's own.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from temporalio.exceptions import ApplicationError, TimeoutType
from temporalio.exceptions import TimeoutError as ActivityTimeoutError

from modelfleet.contracts.error_types import MISSING_CREDENTIALS, RETRYABLE_KUBE_ERROR
from modelfleet.contracts.status import ReplicaStep

# Fragments of Temporal's own failure messages: never shown as a reason.
_TEMPORAL_WORDS = ("schedule next retry", "ScheduleToClose", "StartToClose", "activity task")
_UNREACHABLE_TYPES = (RETRYABLE_KUBE_ERROR, MISSING_CREDENTIALS)


@dataclass(frozen=True, slots=True)
class RolloutFailure:
    reason: str
    # The cluster, not the change, kept the replica from becoming Ready.
    infrastructure: bool = False


def rollout_failure(
    exc: BaseException, step: ReplicaStep, cluster: str, *, reason: str | None = None
) -> RolloutFailure:
    """What to report for a rollout that raised ``exc`` during ``step`` on ``cluster``.
    ``reason``: the workflow's own reason when it raised one (a readiness wait that ended)."""
    if reason is not None:
        return RolloutFailure(reason)
    if isinstance(exc, asyncio.CancelledError):
        return RolloutFailure("cancelled")
    inner = _innermost(exc)
    where = f"{step.value} on cluster {cluster}"
    if isinstance(inner, ActivityTimeoutError):
        if inner.type is TimeoutType.HEARTBEAT:
            why = "the worker running it stopped heartbeating (worker lost?)"
        else:
            why = "the cluster's API server did not answer in time (it may be down or unreachable)"
        return RolloutFailure(f"{where} did not finish: {why}", infrastructure=True)
    if isinstance(inner, ApplicationError) and inner.type in _UNREACHABLE_TYPES:
        return RolloutFailure(
            f"{where} did not finish: the cluster did not accept it in time: "
            f"{_plain(inner.message)}",
            infrastructure=True,
        )
    return RolloutFailure(f"{where} failed: {plain_cause(inner)}")


def _innermost(exc: BaseException) -> BaseException:
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def plain_cause(exc: BaseException) -> str:
    """The innermost cause of ``exc`` in plain words (what the other side answered on the last
    attempt), never Temporal's own wording."""
    inner = _innermost(exc)
    if isinstance(inner, ActivityTimeoutError):
        return "no answer in time (the cluster may be down or unreachable)"
    if isinstance(inner, ApplicationError):
        return _plain(inner.message)
    return _plain(str(inner)) or type(inner).__name__


def _plain(text: str) -> str:
    """``text``, or a plain sentence when it is only Temporal's own wording."""
    if any(word.lower() in text.lower() for word in _TEMPORAL_WORDS):
        return "no answer before the step's deadline"
    return text


class RolloutFailedError(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def reason_of(exc: BaseException) -> str:
    if isinstance(exc, RolloutFailedError):
        return exc.reason
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    return plain_cause(exc)
