"""The error taxonomy of the Kubernetes adapter: every failure talking to a cluster becomes a
:class:`RetryableKubeError` or a :class:`PermanentKubeError`, so that activities can hand Temporal
a retry decision without knowing HTTP, and, within that split, one class per reason
(:class:`KubeNotFoundError`, :class:`KubeConflictError`, :class:`KubeThrottledError`, ...), each
also an ``adapters.errors`` category, so that callers catch a reason rather than test a status.

This module may touch: HTTP status codes, response headers and ``Status`` bodies handed to it, and
urllib3's exception types (to recognise transport failures). It may not: import the ``kubernetes``
SDK, perform I/O, or put credentials in a message. Messages are built only from the server's
``Status.message``, the operation and the object's identity; anything that looks like a bearer
token or a JWT is redacted as a second line of defence.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any

import urllib3.exceptions

from modelfleet.adapters.errors import (
    ConflictError,
    ForbiddenError,
    GoneError,
    InvalidError,
    MisconfiguredError,
    NotFoundError,
    ThrottledError,
    UnavailableError,
)

__all__ = [
    "KubeApplyContentionError",
    "KubeConflictError",
    "KubeError",
    "KubeForbiddenError",
    "KubeGoneError",
    "KubeInvalidError",
    "KubeMisconfiguredError",
    "KubeNamespaceTerminatingError",
    "KubeNotFoundError",
    "KubeThrottledError",
    "KubeUnavailableError",
    "KubeUnknownKindError",
    "PermanentKubeError",
    "RetryableKubeError",
    "error_from_response",
    "error_from_transport",
    "parse_retry_after",
    "redact",
]

# Redaction patterns: a bearer credential in a header-like string, and JWTs (service-account and
# OIDC tokens are JWTs; they are the credentials most likely to leak through an echoed header).
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+")
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")
_REDACTED = "<redacted>"
# Status messages can be long (422 with many causes); an activity failure should stay readable.
_MAX_MESSAGE = 600


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with the given secret values and anything token-shaped replaced."""
    for secret in secrets:
        # Short values (e.g. an empty password) would redact ordinary words.
        if secret and len(secret) >= 6:
            text = text.replace(secret, _REDACTED)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {_REDACTED}", text)
    return _JWT.sub(_REDACTED, text)


class KubeError(Exception):
    """A failed request to a cluster. ``str(e)`` is meant for people and never holds credentials.

    ``status`` is the HTTP status (None when no response arrived), ``reason`` the Kubernetes
    ``Status.reason`` (e.g. ``NotFoundError``, ``InvalidError``) or a transport reason (``Timeout``,
    ``ConnectionError``), and ``retry_after`` the server's requested delay in seconds, if any.
    """

    retryable: bool = False

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        reason: str = "",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason
        self.retry_after = retry_after

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only arguments do not survive the default pickling, and activity errors may
        # cross process boundaries.
        return (
            _rebuild,
            (type(self), self.message, self.status, self.reason, self.retry_after),
        )


def _rebuild(
    cls: type[KubeError],
    message: str,
    status: int | None,
    reason: str,
    retry_after: float | None,
) -> KubeError:
    return cls(message, status=status, reason=reason, retry_after=retry_after)


class RetryableKubeError(KubeError):
    """Worth retrying as is: throttling (429), server errors (5xx), timeouts, lost connections."""

    retryable = True


class PermanentKubeError(KubeError):
    """Retrying the same request cannot help: bad request, forbidden, not found, invalid, unknown
    kind, a conflict outside server-side apply, an unusable kubeconfig."""

    retryable = False


# One class per reason. Where a reason can go either way (a 409, a 403), the context decides the
# split and each side has its class.


class KubeNotFoundError(PermanentKubeError, NotFoundError):
    """404: the object (or what the path names) does not exist."""


class KubeUnknownKindError(KubeNotFoundError, InvalidError):
    """The cluster does not serve the kind (no CRD): not found, and a request that cannot
    succeed until someone installs it."""


class KubeConflictError(PermanentKubeError, ConflictError):
    """409 outside server-side apply: AlreadyExists, or a stale resourceVersion we sent."""


class KubeApplyContentionError(RetryableKubeError, ConflictError):
    """409 on a forced server-side apply: contention inside the server; a retry resolves it."""


class KubeForbiddenError(PermanentKubeError, ForbiddenError):
    """401 or 403: the credentials are refused or lack the permission."""


class KubeNamespaceTerminatingError(RetryableKubeError, ForbiddenError):
    """403 for creating in a namespace being deleted; refused only until the deletion ends."""


class KubeInvalidError(PermanentKubeError, InvalidError):
    """The request as sent cannot succeed: 400, 405, 415, 422, 501, any other status that is
    neither retryable nor another reason, a manifest without apiVersion, kind or name."""


class KubeThrottledError(RetryableKubeError, ThrottledError):
    """429: throttled by the API server (or its priority and fairness); ``retry_after`` says
    how long to wait when the server says."""


class KubeUnavailableError(RetryableKubeError, UnavailableError):
    """5xx (but 501), 408 and 504, timeouts, refused or lost connections, a response that is
    not JSON, credentials that could not be refreshed."""


class KubeGoneError(RetryableKubeError, GoneError):
    """410: an expired list continuation or watch; starting over succeeds."""


class KubeMisconfiguredError(PermanentKubeError, MisconfiguredError):
    """The worker's kubeconfig cannot be loaded, or the TLS handshake with the server fails."""


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when is None:
            return None
        current = time.time() if now is None else now
        return max(0.0, when.timestamp() - current)
    return max(0.0, seconds)


def _status_body(body: bytes | str | None) -> dict[str, Any]:
    if not body:
        return {}
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) and data.get("kind") == "Status" else {}


def _header(headers: Mapping[str, str] | None, name: str) -> str | None:
    if not headers:
        return None
    for key, value in headers.items():
        if key.lower() == name.lower():
            return value
    return None


_DEFAULT_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    408: "Timeout",
    409: "Conflict",
    410: "Gone",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def _namespace_terminating(status_body: Mapping[str, Any]) -> bool:
    causes = (status_body.get("details") or {}).get("causes") or []
    return any(isinstance(c, dict) and c.get("reason") == "NamespaceTerminating" for c in causes)


def _class_for(status: int, status_body: Mapping[str, Any], apply: bool) -> type[KubeError]:
    """The class of a non-2xx response: its reason, and within it whether a retry can help."""
    if status == 404:
        return KubeNotFoundError
    if status == 409:
        # A server-side apply with force=True cannot lose an ownership conflict; a 409 there is
        # optimistic-concurrency contention inside the server, which a retry resolves. Any other
        # 409 (AlreadyExists, a stale resourceVersion we sent) means our request is wrong.
        return KubeApplyContentionError if apply else KubeConflictError
    if status == 403 and _namespace_terminating(status_body):
        # Creating in a namespace that is being deleted is refused until the deletion finishes.
        return KubeNamespaceTerminatingError
    if status in (401, 403):
        return KubeForbiddenError
    if status == 410:
        # An expired list continuation or watch; starting over succeeds.
        return KubeGoneError
    if status == 429:
        return KubeThrottledError
    if status == 408 or (500 <= status <= 599 and status != 501):
        return KubeUnavailableError
    return KubeInvalidError


def error_from_response(
    *,
    operation: str,
    status: int,
    body: bytes | str | None,
    headers: Mapping[str, str] | None,
    apply: bool = False,
    secrets: Iterable[str] = (),
) -> KubeError:
    """The error for a non-2xx response to ``operation`` (e.g. ``apply Deployment ns/name``)."""
    status_body = _status_body(body)
    reason = str(status_body.get("reason") or _DEFAULT_REASONS.get(status, f"HTTP{status}"))
    server_message = str(status_body.get("message") or "")
    retry_after = parse_retry_after(_header(headers, "Retry-After"))
    if retry_after is None and status == 429:
        details = status_body.get("details") or {}
        seconds = details.get("retryAfterSeconds") if isinstance(details, dict) else None
        if isinstance(seconds, int | float):
            retry_after = float(seconds)
    message = f"{operation}: {status} {reason}"
    if server_message:
        message += f": {server_message}"
    if retry_after is not None:
        message += f" (retry after {retry_after:g}s)"
    message = redact(message, secrets)
    if len(message) > _MAX_MESSAGE:
        message = message[: _MAX_MESSAGE - 3] + "..."
    cls = _class_for(status, status_body, apply)
    return cls(message, status=status, reason=reason, retry_after=retry_after)


def error_from_transport(operation: str, exc: BaseException) -> KubeError:
    """The error for a request that got no HTTP response at all.

    The message names only the failure class, never ``str(exc)``: urllib3 embeds the pool and
    connection objects there, and nothing about it helps an operator more than the class does.
    """
    if isinstance(exc, urllib3.exceptions.SSLError):
        return KubeMisconfiguredError(
            f"{operation}: TLS handshake failed ({type(exc).__name__})",
            reason="TLSError",
        )
    cause = exc.reason if isinstance(exc, urllib3.exceptions.MaxRetryError) else exc
    if isinstance(cause, urllib3.exceptions.SSLError):
        return error_from_transport(operation, cause)
    if isinstance(cause, urllib3.exceptions.NewConnectionError | ConnectionRefusedError):
        reason, what = "ConnectionError", "cannot connect to the API server"
    elif isinstance(cause, urllib3.exceptions.TimeoutError | TimeoutError):
        reason, what = "Timeout", "the API server did not answer in time"
    else:
        reason, what = "ConnectionError", "the connection to the API server failed"
    name = type(cause).__name__ if cause is not None else type(exc).__name__
    return KubeUnavailableError(f"{operation}: {what} ({name})", reason=reason)
