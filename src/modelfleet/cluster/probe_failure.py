"""Why a cluster's health probe failed, as the cluster's status says it: read from the exception
a failed probe activity raises in the workflow. Pure (no Temporal calls, no I/O): it only walks
an exception's cause chain, so the workflow stays deterministic.
"""

from __future__ import annotations

from temporalio.exceptions import ApplicationError, TimeoutType
from temporalio.exceptions import TimeoutError as ActivityTimeoutError


def probe_failure(exc: BaseException) -> str:
    """Why a probe failed, in words a person can act on: the innermost cause behind the
    ActivityError (the Kubernetes error of the last attempt), not Temporal's wrapping of it
    ("Not enough time to schedule next retry before activity ScheduleToClose timeout"). A probe
    whose every attempt hung has only timeouts in its chain: it is said that no answer came."""
    inner = exc
    while inner.__cause__ is not None:
        inner = inner.__cause__
    if isinstance(inner, ActivityTimeoutError):
        if inner.type is TimeoutType.HEARTBEAT:
            return "the probe stopped heartbeating (worker lost?)"
        return "the cluster's API server did not answer in time (it may be down or unreachable)"
    if isinstance(inner, ApplicationError) and inner.type:
        return f"{inner.type}: {inner.message}"
    return str(inner) or type(inner).__name__
