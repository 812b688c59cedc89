"""How the ModelReplica workflow retries its activities: Kubernetes calls with backoff inside
each step's own deadline, health checks a few times quickly (past that a check is no sample),
endpoint publications until they land. Constants only.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy

from modelfleet.contracts.error_types import PERMANENT_KUBE_ERROR, READINESS_DEADLINE_EXCEEDED

# Transient API trouble is retried with backoff; the step's own deadline bounds the total.
API_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=20),
    non_retryable_error_types=[PERMANENT_KUBE_ERROR, READINESS_DEADLINE_EXCEEDED],
)
# A health check's API errors are retried a few times, quickly; past that it is no sample.
CHECK_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=5),
    maximum_attempts=4,
    non_retryable_error_types=[PERMANENT_KUBE_ERROR],
)
ENDPOINT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10)
)


__all__ = ["API_RETRY", "CHECK_RETRY", "ENDPOINT_RETRY"]
