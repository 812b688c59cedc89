"""Google APIs' error shapes for the simulated GKE: per fault kind, the HTTP status, the
``google.rpc`` code (name and number), the ``errors[].reason`` and the words GKE uses, and the
JSON error body (``error.errors`` and an ``ErrorInfo`` detail, as googleapis answer).

Development/test emulator only; imports nothing of the product.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from modelfleet.sim.clouds.faults import ErrorKind

# HTTP status, google.rpc code name, numeric code and errors[].reason per error kind.
ERRORS: dict[ErrorKind, tuple[int, str, int, str]] = {
    ErrorKind.QUOTA: (403, "RESOURCE_EXHAUSTED", 8, "quotaExceeded"),
    ErrorKind.PERMISSION: (403, "PERMISSION_DENIED", 7, "forbidden"),
    ErrorKind.CONFLICT: (409, "ALREADY_EXISTS", 6, "alreadyExists"),
    ErrorKind.UNAVAILABLE: (503, "UNAVAILABLE", 14, "backendError"),
    ErrorKind.THROTTLED: (429, "RESOURCE_EXHAUSTED", 8, "rateLimitExceeded"),
    ErrorKind.INVALID: (400, "INVALID_ARGUMENT", 3, "badRequest"),
    ErrorKind.STOCKOUT: (503, "UNAVAILABLE", 14, "backendError"),
    ErrorKind.BAD_MACHINE_TYPE: (400, "INVALID_ARGUMENT", 3, "badRequest"),
}
# At the operation stage a stockout ends the operation RESOURCE_EXHAUSTED, as GKE reports it.
OPERATION_CODES: dict[ErrorKind, int] = {ErrorKind.STOCKOUT: 8}
MESSAGES: dict[ErrorKind, str] = {
    ErrorKind.QUOTA: "Insufficient regional quota to satisfy request: resource "
    '"NVIDIA_H100_GPUS": request requires more than the available quota',
    ErrorKind.PERMISSION: "Required 'container.clusters.create' permission for the project",
    ErrorKind.CONFLICT: "Already exists",
    ErrorKind.UNAVAILABLE: "The service is currently unavailable.",
    ErrorKind.THROTTLED: "Quota exceeded for quota metric 'Write requests' (rate limit)",
    ErrorKind.INVALID: "Invalid argument in the request",
    ErrorKind.STOCKOUT: "ZONE_RESOURCE_POOL_EXHAUSTED: The zone does not have enough resources "
    "available to fulfill the request. Try a different zone, or try again later.",
    ErrorKind.BAD_MACHINE_TYPE: "Invalid value for field 'nodePool.config.machineType': the "
    "machine type does not exist in the requested zones.",
}


class FailError(Exception):
    def __init__(self, kind: ErrorKind, message: str | None = None) -> None:
        super().__init__(message or MESSAGES[kind])
        self.kind = kind
        self.message = message or MESSAGES[kind]


def google_error(status: int, code: str, message: str, reason: str) -> web.Response:
    error: dict[str, Any] = {"code": status, "message": message, "status": code}
    if reason:
        error["errors"] = [{"message": message, "domain": "global", "reason": reason}]
        error["details"] = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": "container.googleapis.com",
            }
        ]
    return web.json_response({"error": error}, status=status)


__all__ = ["ERRORS", "MESSAGES", "OPERATION_CODES", "FailError", "google_error"]
