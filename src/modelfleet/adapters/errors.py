"""The adapters' error categories: one per reason a call to a cluster or a cloud can fail, so a
caller catches the reason it can act on (``except NotFoundError``) instead of testing HTTP statuses.

Each adapter's errors inherit from one of these and from the adapter's own base, which carries
the retry decision (``RetryableKubeError`` / ``PermanentKubeError``, ``CloudError.retryable``):
``KubeNotFoundError`` is both a :class:`NotFoundError` and a ``PermanentKubeError``. The
categories are markers only (no state, no ``__init__``), so they mix into any adapter's base.

Pure: no SDK imports, no I/O.
"""

from __future__ import annotations

__all__ = [
    "ConflictError",
    "ForbiddenError",
    "GoneError",
    "InvalidError",
    "MisconfiguredError",
    "NotFoundError",
    "ThrottledError",
    "UnavailableError",
]


class NotFoundError(Exception):
    """The object, or its kind, does not exist (404; a kind the cluster does not serve)."""


class ConflictError(Exception):
    """The object exists already or changed meanwhile (409)."""


class ForbiddenError(Exception):
    """The credentials are refused or lack the permission (401, 403)."""


class InvalidError(Exception):
    """The request as sent can never succeed (400, 405, 415, 422, an unknown kind, ...)."""


class ThrottledError(Exception):
    """Too many requests (429); retry later, after ``retry_after`` when given."""


class UnavailableError(Exception):
    """The server failed or did not answer (5xx, timeouts, lost connections)."""


class GoneError(Exception):
    """What was asked for expired (410: a list continuation or a watch); start over."""


class MisconfiguredError(Exception):
    """The worker's own configuration cannot reach the target (an unusable kubeconfig, a TLS
    handshake that fails)."""
