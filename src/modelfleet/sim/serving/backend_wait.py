"""Requests held at the simulated gateway while their route has no Ready backend (scale from
zero), and the gateway's own ``/metrics`` counting them per route and service, as an activator
(Knative's, or KEDA's HTTP add-on interceptor) does in front of a service scaled to zero.

A client opts in per request with the ``x-modelfleet-wait-for-backend: <seconds>`` header
(capped at :data:`MAX_WAIT_SECONDS`, and at the client's own read timeout when it says what that
is, as the OpenAI SDKs do in ``x-stainless-read-timeout``: a request is never held after its
client has given up); without it the gateway answers 503 at once, as before. At most
:data:`MAX_HELD_PER_ROUTE` requests are held per route (an activator's queue is bounded too):
one more is answered 503 at once. Every such 503 (not held, wait ran out, queue full) says why
in an OpenAI-shaped JSON error and carries ``Retry-After`` (:func:`unavailable`).

Development/test emulator only. Pure bookkeeping: no I/O; the plane does the waiting.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = [
    "CLIENT_TIMEOUT_HEADER",
    "MAX_HELD_PER_ROUTE",
    "MAX_WAIT_SECONDS",
    "RETRY_AFTER_SECONDS",
    "WAITING_METRIC",
    "WAIT_HEADER",
    "RouteKey",
    "Unavailable",
    "WaitingRequests",
    "requested_wait",
    "unavailable",
]

WAIT_HEADER = "x-modelfleet-wait-for-backend"
CLIENT_TIMEOUT_HEADER = "x-stainless-read-timeout"
MAX_WAIT_SECONDS = 600.0
WAITING_METRIC = "gateway_requests_waiting_for_backend"
_HELD = "gateway_requests_held_total"
_TIMED_OUT = "gateway_requests_wait_timeouts_total"
_REJECTED = "gateway_requests_hold_rejected_total"
# Requests held per route at most; one more is refused at once (the client retries later).
MAX_HELD_PER_ROUTE = 100
# What a 503 for want of a backend tells the client to wait before retrying: about the time a
# first replica takes to start on the simulated fleet, and under the 60 s the OpenAI SDKs honour.
RETRY_AFTER_SECONDS = 10


@dataclass(frozen=True, order=True)
class RouteKey:
    """An HTTPRoute and the ModelService it routes for (its ``modelfleet.dev/service`` label,
    empty for routes modelfleet did not make)."""

    namespace: str
    route: str
    service: str = ""

    def labels(self) -> str:
        return f'namespace="{self.namespace}",route="{self.route}",service="{self.service}"'


def _seconds(raw: str) -> float:
    try:
        seconds = float(raw.strip()) if raw.strip() else 0.0
    except ValueError:
        return 0.0
    return seconds if math.isfinite(seconds) and seconds > 0 else 0.0


def requested_wait(headers: Mapping[str, str]) -> float:
    """Seconds the client lets the gateway hold its request (0: do not hold)."""
    seconds = min(_seconds(headers.get(WAIT_HEADER, "")), MAX_WAIT_SECONDS)
    client = _seconds(headers.get(CLIENT_TIMEOUT_HEADER, ""))
    return min(seconds, client) if client else seconds


@dataclass(frozen=True)
class Unavailable:
    """A 503 for want of a Ready backend: status, headers and the JSON body."""

    headers: dict[str, str]
    body: dict[str, dict[str, str]]
    status: int = 503


def unavailable(why: str, key: RouteKey, detail: str, retry_after: int) -> Unavailable:
    """The 503 a client gets when no backend answers its route: ``why`` is the error code
    (``no_ready_backend``: not held; ``backend_wait_timeout``: held until its wait ran out;
    ``backend_queue_full``: the route holds its bound already), ``detail`` the sentence that
    says so; the message names the route and when to retry."""
    message = (
        f"no healthy upstream for route {key.namespace}/{key.route}: {detail}; "
        f"retry after {retry_after} s"
    )
    return Unavailable(
        headers={"Retry-After": str(retry_after)},
        body={"error": {"message": message, "type": "service_unavailable", "code": why}},
    )


class WaitingRequests:
    """Held requests per route (a gauge), how many were held, timed out and refused because
    the route held ``limit`` already (counters)."""

    def __init__(self, limit: int = MAX_HELD_PER_ROUTE) -> None:
        self.limit = limit
        self._waiting: Counter[RouteKey] = Counter()
        self._held: Counter[RouteKey] = Counter()
        self._timed_out: Counter[RouteKey] = Counter()
        self._rejected: Counter[RouteKey] = Counter()

    def waiting(self, key: RouteKey) -> int:
        return self._waiting[key]

    def full(self, key: RouteKey) -> bool:
        """Whether the route holds its bound already (one more is refused)."""
        return self._waiting[key] >= self.limit

    def rejected(self, key: RouteKey) -> None:
        self._rejected[key] += 1

    @contextmanager
    def hold(self, key: RouteKey) -> Iterator[None]:
        self._waiting[key] += 1
        self._held[key] += 1
        try:
            yield
        finally:
            self._waiting[key] -= 1

    def timed_out(self, key: RouteKey) -> None:
        self._timed_out[key] += 1

    def metrics_text(self) -> str:
        """Prometheus exposition; every route that ever held a request keeps its series (at 0
        when nothing waits), so a reader can tell "no requests" from "never seen"."""
        lines = [
            f"# HELP {WAITING_METRIC} Requests held at the gateway until their route has a "
            "Ready backend.",
            f"# TYPE {WAITING_METRIC} gauge",
        ]
        keys = sorted(set(self._held) | set(self._rejected))
        lines += [f"{WAITING_METRIC}{{{k.labels()}}} {float(self._waiting[k])}" for k in keys]
        lines += [
            f"# HELP {_HELD} Requests the gateway held for a backend.",
            f"# TYPE {_HELD} counter",
        ]
        lines += [f"{_HELD}{{{k.labels()}}} {float(self._held[k])}" for k in keys]
        lines += [
            f"# HELP {_TIMED_OUT} Held requests answered 503 when their wait ran out.",
            f"# TYPE {_TIMED_OUT} counter",
        ]
        lines += [f"{_TIMED_OUT}{{{k.labels()}}} {float(self._timed_out[k])}" for k in keys]
        lines += [
            f"# HELP {_REJECTED} Requests answered 503 at once: the route held its bound.",
            f"# TYPE {_REJECTED} counter",
        ]
        lines += [f"{_REJECTED}{{{k.labels()}}} {float(self._rejected[k])}" for k in keys]
        return "\n".join(lines) + "\n"
