"""The error taxonomy of the Kubernetes adapter: every failure talking to a cluster becomes a
:class:`RetryableKubeError` or a :class:`PermanentKubeError`, so that activities can hand Temporal
a retry decision without knowing HTTP.

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

__all__ = [
    "KubeError",
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
    ``Status.reason`` (e.g. ``NotFound``, ``Invalid``) or a transport reason (``Timeout``,
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


def _retryable_status(
    status: int, reason: str, status_body: Mapping[str, Any], apply: bool
) -> bool:
    if status == 429 or status == 408 or status == 410:
        # 410: an expired list continuation or watch; starting over succeeds.
        return True
    if 500 <= status <= 599:
        return status != 501
    if status == 409:
        # A server-side apply with force=True cannot lose an ownership conflict; a 409 there is
        # optimistic-concurrency contention inside the server, which a retry resolves. Any other
        # 409 (AlreadyExists, a stale resourceVersion we sent) means our request is wrong.
        return apply
    if status == 403:
        # Creating in a namespace that is being deleted is refused until the deletion finishes.
        causes = (status_body.get("details") or {}).get("causes") or []
        return any(
            isinstance(c, dict) and c.get("reason") == "NamespaceTerminating" for c in causes
        )
    return False


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
    cls = (
        RetryableKubeError
        if _retryable_status(status, reason, status_body, apply)
        else PermanentKubeError
    )
    return cls(message, status=status, reason=reason, retry_after=retry_after)


def error_from_transport(operation: str, exc: BaseException) -> KubeError:
    """The error for a request that got no HTTP response at all.

    The message names only the failure class, never ``str(exc)``: urllib3 embeds the pool and
    connection objects there, and nothing about it helps an operator more than the class does.
    """
    if isinstance(exc, urllib3.exceptions.SSLError):
        return PermanentKubeError(
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
    return RetryableKubeError(f"{operation}: {what} ({name})", reason=reason)
