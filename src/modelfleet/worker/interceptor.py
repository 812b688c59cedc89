"""Structured activity logs without logging code in the activities: a worker interceptor that,
around every activity, sets the log context (``worker.logs.activity_fields``: activity, attempt,
workflow id and type, cluster, replica or deployment) and logs the activity's start, end and
failure with its duration.

Fields are taken from the activity's info and from the *names* its payload carries (a cluster
name, never a manifest), so what lands in a log line is as safe as the activity's own error
messages, which never include credentials.

May touch: logging only. Imports the activity contract for names; no SDK besides temporalio.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory, FailureError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from modelfleet.contracts.activity_names import (
    FLEET_REPLICAS_ON,
    KUBE_CHECK_READY,
    KUBE_PROBE,
)
from modelfleet.contracts.fleet_payloads import PublishRequest
from modelfleet.worker.logs import activity_fields

log = logging.getLogger("modelfleet.activity")

# Periodic polls: their successful ends are logged at DEBUG so an idle fleet stays quiet at INFO.
POLLING_ACTIVITIES = frozenset({KUBE_CHECK_READY, KUBE_PROBE, FLEET_REPLICAS_ON})


def cluster_of(activity_type: str, args: Sequence[Any]) -> str | None:
    """The cluster an activity works on, from the name its payload carries (if any)."""
    if not args:
        return None
    arg = args[0]
    if activity_type == FLEET_REPLICAS_ON and isinstance(arg, str):
        return arg
    if isinstance(arg, PublishRequest):
        if arg.remove is not None:
            return arg.remove
        if arg.spec is not None:
            return arg.spec.name
        return arg.report.name if arg.report is not None else None
    cluster = getattr(arg, "cluster", None)
    return cluster if isinstance(cluster, str) else None


def owner_of(workflow_id: str | None) -> dict[str, str]:
    """The entity the calling workflow stands for, from its business ID (``contracts.ids``):
    ``replica/<ns>/<name>``, ``deployment/<ns>/<name>`` or ``cluster/<name>``."""
    kind, _, rest = (workflow_id or "").partition("/")
    if kind in ("replica", "deployment", "cluster") and rest:
        return {kind: rest}
    return {}


def fields_for(info: activity.Info, args: Sequence[Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "activity": info.activity_type,
        "attempt": info.attempt,
        "workflow_id": info.workflow_id,
        "workflow_type": info.workflow_type,
        "activity_id": info.activity_id,
    }
    fields.update(owner_of(info.workflow_id))
    cluster = cluster_of(info.activity_type, args)
    if cluster is not None:
        fields["cluster"] = cluster
    return fields


class _ActivityLogs(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        token = activity_fields.set(fields_for(info, input.args))
        started = time.monotonic()
        log.debug("activity started")
        try:
            result = await self.next.execute_activity(input)
        except BaseException as exc:
            _log_failure(exc, time.monotonic() - started)
            raise
        else:
            level = logging.DEBUG if info.activity_type in POLLING_ACTIVITIES else logging.INFO
            log.log(level, "activity completed", extra=_took(started))
            return result
        finally:
            activity_fields.reset(token)


def _took(started: float) -> dict[str, Any]:
    return {"fields": {"duration_ms": round((time.monotonic() - started) * 1000)}}


def _log_failure(exc: BaseException, elapsed: float) -> None:
    fields: dict[str, Any] = {
        "duration_ms": round(elapsed * 1000),
        "error_type": (exc.type if isinstance(exc, ApplicationError) else None)
        or type(exc).__name__,
    }
    if isinstance(exc, asyncio.CancelledError):
        log.info("activity cancelled", extra={"fields": fields})
        return
    if isinstance(exc, ApplicationError) and exc.category is ApplicationErrorCategory.BENIGN:
        # An expected "not yet" of a polling activity (kube.poll_ready): not a failure.
        log.debug("activity not done yet: %s", exc.message, extra={"fields": fields})
        return
    final = isinstance(exc, ApplicationError) and exc.non_retryable
    fields["retryable"] = not final
    # The message is the one the activity gives Temporal (history-safe); no traceback here:
    # the SDK logs that once itself.
    message = exc.message if isinstance(exc, FailureError) else str(exc)
    log.log(
        logging.ERROR if final else logging.WARNING,
        "activity failed: %s",
        message,
        extra={"fields": fields},
    )


class ActivityLogInterceptor(Interceptor):
    """Register on the worker (``interceptors=[ActivityLogInterceptor()]``)."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ActivityLogs(next)
