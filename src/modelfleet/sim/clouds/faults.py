"""Cloud errors on demand for the simulated clouds: "the next N calls of operation X (on a
resource named Y) fail with error E", either when the call is made or later, when its
long-running operation finishes (how quota and stockouts really surface on GKE and EKS).

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure state, no
I/O; the fakes consult it on every call.
"""

from __future__ import annotations

import threading
from enum import StrEnum

from pydantic import BaseModel, Field

__all__ = ["CloudFault", "CloudFaults", "ErrorKind", "FaultStage"]


class ErrorKind(StrEnum):
    QUOTA = "quota"
    PERMISSION = "permission"
    CONFLICT = "conflict"
    UNAVAILABLE = "unavailable"
    THROTTLED = "throttled"
    INVALID = "invalid"


class FaultStage(StrEnum):
    # The API call itself is answered with the error.
    CALL = "call"
    # The call is accepted; its operation (or the resource's status) ends in the error.
    OPERATION = "operation"


class CloudFault(BaseModel):
    operation: str = Field(description="the API method, e.g. createNodePool or CreateNodegroup")
    error: ErrorKind
    target: str | None = Field(default=None, description="only for resources of this name")
    times: int = Field(default=1, ge=1)
    stage: FaultStage = FaultStage.CALL


class CloudFaults:
    """A thread-safe list of pending faults; each matching call uses one up."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[CloudFault] = []
        self.fired: list[tuple[str, str | None, ErrorKind]] = []

    def add(self, fault: CloudFault) -> None:
        with self._lock:
            self._pending.append(fault.model_copy())

    def clear(self) -> None:
        with self._lock:
            self._pending.clear()

    def take(self, operation: str, target: str | None, stage: FaultStage) -> ErrorKind | None:
        with self._lock:
            for fault in self._pending:
                if fault.operation != operation or fault.stage is not stage:
                    continue
                if fault.target is not None and fault.target != target:
                    continue
                fault.times -= 1
                if fault.times <= 0:
                    self._pending.remove(fault)
                self.fired.append((operation, target, fault.error))
                return fault.error
            return None
