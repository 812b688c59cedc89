"""Every ``ApplicationError`` type modelfleet raises or matches, in one place: activities raise
them (through ``activities.errors``), workflows raise a few of their own and name the permanent
ones in their retry policies' ``non_retryable_error_types``. Pure: workflows import it freely.

The values are part of the recorded histories and of what people read in a failure (a cluster's
status quotes ``<type>: <message>``), so they never change; add a new one rather than rename.
"""

from __future__ import annotations

from typing import Final

# -- the Kubernetes adapter: the retry split. A failure's reason (not found, conflict,
# forbidden, ...) is its adapter class (``adapters.kube_errors``); Temporal sees whether a
# retry can help.
RETRYABLE_KUBE_ERROR: Final = "RetryableKubeError"
PERMANENT_KUBE_ERROR: Final = "PermanentKubeError"

# -- the cloud adapters: one per ``CloudErrorReason`` (``Cloud<reason>``); see
# ``contracts.cloud_payloads.error_type``.
CLOUD_QUOTA_EXCEEDED: Final = "CloudQuotaExceeded"
# The zone has no free capacity of the machine type now (not a quota: asking for more will not
# help; waiting, another zone or another machine type will).
CLOUD_STOCKOUT: Final = "CloudStockout"
CLOUD_PERMISSION_DENIED: Final = "CloudPermissionDenied"
CLOUD_UNAUTHENTICATED: Final = "CloudUnauthenticated"
CLOUD_INVALID_ARGUMENT: Final = "CloudInvalidArgument"
CLOUD_ALREADY_EXISTS: Final = "CloudAlreadyExists"
CLOUD_NOT_FOUND: Final = "CloudNotFound"
CLOUD_THROTTLED: Final = "CloudThrottled"
CLOUD_UNAVAILABLE: Final = "CloudUnavailable"
CLOUD_OPERATION_RUNNING: Final = "CloudOperationRunning"
CLOUD_RESOURCE_IN_USE: Final = "CloudResourceInUse"
CLOUD_OPERATION_FAILED: Final = "CloudOperationFailed"

# -- the global load balancer's adapter (``adapters.global_lb``); retryable or not by its verdict.
GLOBAL_ADDRESS_ERROR: Final = "GlobalAddressError"

# -- activities' own outcomes.
# The worker has no kubeconfig for the cluster (permanent until someone provides it).
MISSING_CREDENTIALS: Final = "MissingCredentials"
# A secret the worker should hold is missing or empty (permanent).
MISSING_SECRET: Final = "MissingSecret"
# The stack's manifests could not be fetched right now (retryable).
STACK_SOURCE_UNAVAILABLE: Final = "StackSourceUnavailable"
# Not ready when the progress deadline passed (permanent).
READINESS_DEADLINE_EXCEEDED: Final = "ReadinessDeadlineExceeded"
CRASH_LOOP_BEFORE_READY: Final = "CrashLoopBeforeReady"
IMAGE_PULL_FAILED: Final = "ImagePullFailed"
# Not ready yet, before the deadline: a benign retry, the poll interval of kube.poll_ready.
NOT_READY_YET: Final = "NotReadyYet"

# -- workflows' own failures.
RENDER_FAILED: Final = "RenderFailed"
REPLICA_FAILED: Final = "ReplicaFailed"
POOL_IN_USE: Final = "PoolInUse"
