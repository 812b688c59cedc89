"""Cloud errors on demand for the simulated clouds: "the next N calls of operation X (on a
resource named Y) fail with error E", either when the call is made or later, when its
long-running operation finishes (how quota and stockouts really surface on GKE and EKS).

Development/test emulator only: product code never imports ``modelfleet.sim``. State plus the
admin handler the fakes mount at ``/_admin/faults`` (so ``curl`` or a CLI can inject errors);
the fakes consult it on every call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any

from aiohttp import web
from pydantic import BaseModel, Field, ValidationError

__all__ = [
    "CloudFault",
    "CloudFaults",
    "ErrorKind",
    "FaultStage",
    "Stockout",
    "Stockouts",
    "admin_faults",
    "admin_stockouts",
]


class ErrorKind(StrEnum):
    QUOTA = "quota"
    PERMISSION = "permission"
    CONFLICT = "conflict"
    UNAVAILABLE = "unavailable"
    THROTTLED = "throttled"
    INVALID = "invalid"
    # No machines of the type left in the zone: at the call a 5xx (clouds say "try later"),
    # at the operation the pool fails (GKE ZONE_RESOURCE_POOL_EXHAUSTED, EKS
    # InsufficientInstanceCapacity).
    STOCKOUT = "stockout"
    # The machine / instance type does not exist where it was asked for.
    BAD_MACHINE_TYPE = "bad-machine-type"


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

    def pending(self) -> list[CloudFault]:
        with self._lock:
            return [f.model_copy() for f in self._pending]

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


async def admin_faults(request: web.Request, faults: CloudFaults) -> web.Response:
    """``GET``: the pending faults; ``POST`` a CloudFault (or a list): add; ``DELETE``: clear.
    The admin endpoint both fakes serve at ``/_admin/faults``."""
    return await _admin(request, CloudFault, faults.add, faults.clear, faults.pending)


async def _admin(
    request: web.Request,
    model: type[BaseModel],
    add: Callable[[Any], None],
    clear: Callable[[], None],
    listing: Callable[[], Sequence[BaseModel]],
) -> web.Response:
    """An admin collection: ``POST`` one item (or a list) to add, ``DELETE`` to clear; every
    answer lists what is held."""
    if request.method == "POST":
        body = await request.json()
        try:
            for item in body if isinstance(body, list) else [body]:
                add(model.model_validate(item))
        except ValidationError as exc:
            return web.json_response({"error": str(exc)}, status=400)
    elif request.method == "DELETE":
        clear()
    return web.json_response([item.model_dump(mode="json") for item in listing()])


class Stockout(BaseModel):
    """A zone out of capacity: of every machine type, or of ``machine`` only (a GKE machine
    type, an EC2 instance type, an Azure VM size). Lasts until cleared."""

    zone: str = Field(min_length=1, description="e.g. us-central1-a, us-east-2a, 1")
    machine: str | None = Field(default=None, description="only this machine type")


class Stockouts:
    """The zones (or machine types in zones) a simulated cloud has no capacity in: a pool that
    asks for machines there fails its operation as that cloud reports a stockout."""

    def __init__(self, initial: list[Stockout] | None = None) -> None:
        self._lock = threading.Lock()
        self._current: list[Stockout] = [s.model_copy() for s in initial or []]

    def add(self, stockout: Stockout) -> None:
        with self._lock:
            if stockout not in self._current:
                self._current.append(stockout.model_copy())

    def clear(self) -> None:
        with self._lock:
            self._current.clear()

    def current(self) -> list[Stockout]:
        with self._lock:
            return [s.model_copy() for s in self._current]

    def exhausted(self, zones: list[str], machine: str | None) -> str | None:
        """The first of ``zones`` out of ``machine``, or None when all of them have some."""
        with self._lock:
            for zone in zones:
                for s in self._current:
                    if s.zone == zone and (s.machine is None or s.machine == machine):
                        return zone
            return None


async def admin_stockouts(request: web.Request, stockouts: Stockouts) -> web.Response:
    """``GET``: the stocked-out zones; ``POST`` a Stockout (or a list): add; ``DELETE``: clear.
    Served at ``/_admin/stockouts`` by every cloud fake."""
    return await _admin(request, Stockout, stockouts.add, stockouts.clear, stockouts.current)
