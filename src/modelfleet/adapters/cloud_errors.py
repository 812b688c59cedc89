"""The cloud adapters' error taxonomy: every SDK failure becomes a :class:`CloudError` with a
reason (quota, permission, throttled, ...) that says whether retrying can help. Messages are the
cloud's own text, which names resources, never credentials.

Where a reason is one of the ``adapters.errors`` categories, ``CloudError(reason, message)`` is
an instance of that reason's class (``CloudNotFoundError`` is a :class:`NotFoundError`, ...), so
callers catch the same categories for clouds as for clusters. Quota, an operation still running, a
resource in use and a failed operation have no category: they stay plain ``CloudError``.
"""

from __future__ import annotations

from typing import Any

from modelfleet.adapters.errors import (
    ConflictError,
    ForbiddenError,
    InvalidError,
    NotFoundError,
    ThrottledError,
    UnavailableError,
)
from modelfleet.contracts.cloud_payloads import RETRYABLE_REASONS, CloudErrorReason

__all__ = [
    "CloudConflictError",
    "CloudError",
    "CloudForbiddenError",
    "CloudInvalidError",
    "CloudNotFoundError",
    "CloudThrottledError",
    "CloudUnavailableError",
]


class CloudError(Exception):
    def __new__(cls, reason: CloudErrorReason, message: str) -> CloudError:
        # The reason picks the class: every construction site, old or new, lands in the tree.
        if cls is CloudError:
            cls = _CLASSES.get(reason, CloudError)
        return super().__new__(cls, reason, message)

    def __init__(self, reason: CloudErrorReason, message: str) -> None:
        super().__init__(f"{reason.value}: {message}")
        self.reason = reason
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        # The default would call the class with the formatted message alone.
        return (CloudError, (self.reason, self.message))

    @property
    def retryable(self) -> bool:
        return self.reason in RETRYABLE_REASONS


class CloudNotFoundError(CloudError, NotFoundError):
    """The cluster, pool or node group does not exist (or has no endpoint yet)."""


class CloudConflictError(CloudError, ConflictError):
    """It exists already."""


class CloudForbiddenError(CloudError, ForbiddenError):
    """Permission denied, or the credentials are not accepted."""


class CloudInvalidError(CloudError, InvalidError):
    """The cloud rejects the request as sent."""


class CloudThrottledError(CloudError, ThrottledError):
    """Rate-limited by the cloud's API."""


class CloudUnavailableError(CloudError, UnavailableError):
    """The cloud's API failed or did not answer."""


_CLASSES: dict[CloudErrorReason, type[CloudError]] = {
    CloudErrorReason.NOT_FOUND: CloudNotFoundError,
    CloudErrorReason.ALREADY_EXISTS: CloudConflictError,
    CloudErrorReason.PERMISSION_DENIED: CloudForbiddenError,
    CloudErrorReason.UNAUTHENTICATED: CloudForbiddenError,
    CloudErrorReason.INVALID_ARGUMENT: CloudInvalidError,
    CloudErrorReason.THROTTLED: CloudThrottledError,
    CloudErrorReason.UNAVAILABLE: CloudUnavailableError,
}
