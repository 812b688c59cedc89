"""Kubernetes ``Status`` errors raised by the simulated API server and its in-process store.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure data, no I/O.
The shapes follow apimachinery's ``metav1.Status``: ``{kind: Status, apiVersion: v1, metadata: {},
status: Failure, message, reason, details: {name, group, kind, causes[]}, code}``.
"""

from __future__ import annotations

from typing import Any

from modelfleet.sim.apiserver.registry import ResourceType

__all__ = [
    "ApiError",
    "already_exists",
    "apply_conflict",
    "bad_request",
    "conflict",
    "expired",
    "forbidden",
    "gone",
    "internal_error",
    "invalid",
    "method_not_allowed",
    "namespace_not_found",
    "not_found",
    "status_object",
    "too_many_requests",
    "unsupported_media_type",
]


def status_object(
    code: int,
    reason: str,
    message: str,
    *,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``Status`` document; ``status`` is Success for 2xx codes and Failure otherwise."""
    obj: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if 200 <= code < 300 else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        obj["details"] = details
    return obj


class ApiError(Exception):
    """An API failure carrying the Status object that the HTTP layer sends back."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details or {}
        self.headers = headers or {}

    @property
    def status(self) -> dict[str, Any]:
        return status_object(self.code, self.reason, self.message, details=self.details)

    @property
    def causes(self) -> list[dict[str, Any]]:
        causes = self.details.get("causes", [])
        return list(causes) if isinstance(causes, list) else []


def _qualified(rt: ResourceType | None, fallback: str = "") -> str:
    if rt is None:
        return fallback
    return f"{rt.plural}.{rt.group}" if rt.group else rt.plural


def _details(rt: ResourceType | None, name: str, kind: str | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name}
    if rt is not None:
        if rt.group:
            d["group"] = rt.group
        d["kind"] = kind or rt.plural
    elif kind:
        d["kind"] = kind
    return d


def not_found(rt: ResourceType | None, name: str, *, what: str = "") -> ApiError:
    label = _qualified(rt, what)
    return ApiError(
        404,
        "NotFound",
        f'{label} "{name}" not found',
        details=_details(rt, name, None if rt else what),
    )


def namespace_not_found(namespace: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'namespaces "{namespace}" not found',
        details={"name": namespace, "kind": "namespaces"},
    )


def already_exists(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{_qualified(rt)} "{name}" already exists',
        details=_details(rt, name),
    )


def conflict(rt: ResourceType, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(rt)} "{name}": {why}',
        details=_details(rt, name),
    )


def apply_conflict(rt: ResourceType, name: str, conflicts: list[tuple[str, str]]) -> ApiError:
    """409 for server-side apply; ``conflicts`` is a list of (manager, field path)."""
    causes = [
        {"type": "FieldManagerConflict", "message": f'conflict with "{m}"', "field": f}
        for m, f in conflicts
    ]
    n = len(conflicts)
    if n == 1:
        m, f = conflicts[0]
        message = f'Apply failed with 1 conflict: conflict with "{m}": {f}'
    else:
        lines = "\n".join(f'- conflict with "{m}": {f}' for m, f in conflicts)
        message = f"Apply failed with {n} conflicts:\n{lines}"
    details = _details(rt, name)
    details["causes"] = causes
    return ApiError(409, "Conflict", message, details=details)


def invalid(rt: ResourceType, name: str, causes: list[dict[str, Any]]) -> ApiError:
    """422 Invalid; each cause is ``{reason, message, field}``."""
    summary = ", ".join(f"{c.get('field', '')}: {c.get('message', '')}" for c in causes)
    details = _details(rt, name, rt.kind)
    details["causes"] = causes
    qualified = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
    return ApiError(
        422,
        "Invalid",
        f'{qualified} "{name}" is invalid: {summary}',
        details=details,
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(rt: ResourceType | None, name: str, message: str) -> ApiError:
    return ApiError(403, "Forbidden", message, details=_details(rt, name))


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"application/json, application/yaml (got {content_type!r})",
    )


def method_not_allowed(verb: str, what: str) -> ApiError:
    return ApiError(
        405,
        "MethodNotAllowed",
        f"the server does not allow this method on the requested resource ({verb} {what})",
    )


def gone(message: str) -> ApiError:
    return ApiError(410, "Gone", message)


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def internal_error(message: str) -> ApiError:
    return ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        details={"causes": [{"message": message}]},
    )


def too_many_requests(retry_after_seconds: int) -> ApiError:
    return ApiError(
        429,
        "TooManyRequests",
        "the server has received too many requests and has asked us to try again later",
        details={"retryAfterSeconds": retry_after_seconds},
        headers={"Retry-After": str(retry_after_seconds)},
    )
