"""The one place where failures become Temporal's ``ApplicationError``: an adapter's error (by
its class) and the activities' own outcomes (a missing kubeconfig, not ready yet, ...). Types
come from ``contracts.error_types``, the module the workflows' retry policies name them from.

For an adapter error:

- ``type``: ``RetryableKubeError`` / ``PermanentKubeError`` for a cluster (the reason is the
  adapter class; the type keeps the retry split the workflows' policies and recorded histories
  name), ``Cloud<reason>`` for a cloud, ``GlobalAddressError`` for the global load balancer;
- ``non_retryable``: the adapter's verdict (``KubeError.retryable``, ``CloudError.retryable``,
  ``GlobalLBError.retryable``);
- ``next_retry_delay``: the server's ``Retry-After`` (429, 503), when it gave one;
- ``category``: always the default. The expected outcomes (an object already absent on delete,
  get or list; a kind a cluster does not serve in a scan or sweep) are answered by the adapter
  or the activity and never raised; what reaches Temporal is a failure worth a log line. The
  one benign failure is :func:`not_ready_yet`, a poll's "not yet".
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from modelfleet.adapters.cloud_errors import CloudError
from modelfleet.adapters.global_lb import GlobalLBError
from modelfleet.adapters.kube_errors import KubeError
from modelfleet.contracts import error_types
from modelfleet.contracts.cloud_payloads import error_type

__all__ = [
    "missing_credentials",
    "missing_secret",
    "not_ready_yet",
    "readiness_deadline_exceeded",
    "stack_source_unavailable",
    "to_temporal",
]


def to_temporal(error: KubeError | CloudError | GlobalLBError) -> ApplicationError:
    """An adapter's error in Temporal's terms (see the module's docstring)."""
    if isinstance(error, GlobalLBError):
        return ApplicationError(
            error.message, type=error_types.GLOBAL_ADDRESS_ERROR, non_retryable=not error.retryable
        )
    if isinstance(error, CloudError):
        # The reason rides along as the failure's detail, as it always has.
        return ApplicationError(
            error.message,
            error.reason.value,
            type=error_type(error.reason),
            non_retryable=not error.retryable,
        )
    delay = timedelta(seconds=error.retry_after) if error.retry_after else None
    return ApplicationError(
        str(error),
        type=error_types.RETRYABLE_KUBE_ERROR
        if error.retryable
        else error_types.PERMANENT_KUBE_ERROR,
        non_retryable=not error.retryable,
        next_retry_delay=delay,
    )


def missing_credentials(message: str) -> ApplicationError:
    """No kubeconfig for the cluster on this worker: permanent until someone provides one."""
    return ApplicationError(message, type=error_types.MISSING_CREDENTIALS, non_retryable=True)


def missing_secret(message: str) -> ApplicationError:
    """A secret the worker should hold is missing or empty: permanent."""
    return ApplicationError(message, type=error_types.MISSING_SECRET, non_retryable=True)


def stack_source_unavailable(message: str) -> ApplicationError:
    """The stack's manifests could not be fetched this time: retryable."""
    return ApplicationError(message, type=error_types.STACK_SOURCE_UNAVAILABLE)


def readiness_deadline_exceeded(reason: str) -> ApplicationError:
    """Not ready when the progress deadline passed: permanent."""
    return ApplicationError(
        f"not ready by the progress deadline: {reason}",
        type=error_types.READINESS_DEADLINE_EXCEEDED,
        non_retryable=True,
    )


def crash_looping_before_ready(restarts: int, reason: str) -> ApplicationError:
    """Restarting in CrashLoopBackOff before it was ever Ready: permanent, no deadline wait."""
    return ApplicationError(
        f"crash-looping before Ready ({restarts} restarts): {reason}",
        type=error_types.CRASH_LOOP_BEFORE_READY,
        non_retryable=True,
    )


def image_pull_failed(reason: str) -> ApplicationError:
    """Its image cannot be pulled for good (not found, access refused): permanent, no deadline
    wait. ``reason`` carries the kubelet's words."""
    return ApplicationError(
        f"image cannot be pulled: {reason}",
        type=error_types.IMAGE_PULL_FAILED,
        non_retryable=True,
    )


def not_ready_yet(reason: str) -> ApplicationError:
    """Not ready before the deadline: a benign retry (the caller's retry policy is the poll
    interval), logged as no failure."""
    return ApplicationError(
        f"not ready yet: {reason}",
        type=error_types.NOT_READY_YET,
        category=ApplicationErrorCategory.BENIGN,
    )
