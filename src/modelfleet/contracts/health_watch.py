"""The contract of a ModelService's health watch (``serving.watch_health``): one long-running
activity that probes the service's endpoints (and syncs its global address) on its own clock and
returns to the workflow only when something the workflow acts on changed, when asked to answer
after its first round, or when its bound runs out (then with the front doors whose route
drifted from what the service applied). What "changed" means is decided here, pure, so
that the activity and its tests share one definition.

Level-triggered: the request carries what the workflow last saw (``known``), and every attempt
compares its own probes against that, not against an earlier attempt's. An attempt that died
with its worker is retried and finds the same difference again.

Pure: payload models on :class:`~modelfleet.contracts.wire.WireModel` and comparisons; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import Field

from modelfleet.contracts.kube_payloads import ObjectRef
from modelfleet.contracts.serving_payloads import (
    EndpointHealth,
    FrontDoorHealth,
    GlobalAddressRequest,
    GlobalAddressResult,
    ProbeTarget,
)
from modelfleet.contracts.wire import WireModel

__all__ = [
    "ROUTE_DIGEST_ANNOTATION",
    "SERVING_WATCH_HEALTH",
    "DoorCheck",
    "HealthWatchRequest",
    "HealthWatchResult",
    "doors_changed",
    "endpoints_changed",
    "watch_task_queue",
]

SERVING_WATCH_HEALTH = "serving.watch_health"
# On a front door's HTTPRoute: the digest of the route plan it was applied from, so that what a
# door holds can be compared with what the service applied there without carrying the plan.
ROUTE_DIGEST_ANNOTATION = "modelfleet.dev/route-digest"


def watch_task_queue(task_queue: str) -> str:
    """The task queue the health watches run on, next to ``task_queue``: a watch holds its slot
    for as long as it runs (up to its bound), so watches have slots of their own and never
    take one a rollout's activity needs."""
    return f"{task_queue}-watch"


class DoorCheck(WireModel):
    """A front door whose route a watch reads at its bound (drift repair): the HTTPRoute and
    the digest its annotation must carry."""

    cluster: str
    route: ObjectRef
    digest: str


class HealthWatchRequest(WireModel):
    targets: list[ProbeTarget] = Field(default_factory=list)
    # The verdicts the workflow holds (what its route was last reconciled with).
    known: list[EndpointHealth] = Field(default_factory=list)
    # The service's global address to keep in place every round (None: it has none), and what
    # the workflow last saw of it: each door's health, and whether the last sync failed.
    global_address: GlobalAddressRequest | None = None
    known_doors: list[FrontDoorHealth] = Field(default_factory=list)
    known_global_failed: bool = False
    interval_seconds: float = Field(default=10.0, gt=0)
    timeout_seconds: float = Field(default=3.0, gt=0, le=60)
    attempts: int = Field(default=2, ge=1, le=5)
    # Return after this long with what the last round saw, even when nothing changed.
    max_seconds: float = Field(default=600.0, gt=0)
    # Return after the first round whatever it saw (the workflow has something to reconcile).
    answer_first: bool = False
    # The doors whose routes are read once, when the bound runs out: a route gone or carrying
    # another digest is reported (``drifted``) and the workflow applies it again.
    doors: list[DoorCheck] = Field(default_factory=list)


class HealthWatchResult(WireModel):
    health: list[EndpointHealth] = Field(default_factory=list)
    global_result: GlobalAddressResult | None = None
    # Why the last global sync failed ("" when it did not, or there is no global address).
    global_error: str = ""
    # ``changed``, ``asked`` (answer_first) or ``bounded`` (max_seconds ran out).
    why: str = "changed"
    rounds: int = 0
    # At the bound: the doors (clusters) whose route is gone or not the one applied.
    drifted: list[str] = Field(default_factory=list)


def _verdict(h: EndpointHealth) -> tuple[bool, tuple[str, ...]]:
    # The reason is left out on purpose: an unreachable endpoint's wording varies between
    # probes (timed out, refused) and would wake the workflow every round without anything
    # for it to do. Health and the model list are what routing and joining replicas read.
    return h.healthy, tuple(h.models)


def endpoints_changed(
    known: Iterable[EndpointHealth], probed: Mapping[str, EndpointHealth]
) -> list[str]:
    """The endpoint keys whose verdict differs between ``known`` and ``probed``: health or model
    list changed, probed but not known (a new endpoint) or known but not probed (one
    withdrawn). Sorted; empty when the workflow has nothing to act on."""
    had = {h.key: _verdict(h) for h in known}
    now = {k: _verdict(h) for k, h in probed.items()}
    return sorted(k for k in had.keys() | now.keys() if had.get(k) != now.get(k))


def doors_changed(
    known: Iterable[FrontDoorHealth],
    known_failed: bool,
    result: GlobalAddressResult | None,
    failed: bool,
) -> bool:
    """The global address's view of the doors differs from what the workflow holds: a door's
    health or reason, or the sync started or stopped failing. A failed sync keeps the last
    view (the workflow keeps it too)."""
    if failed != known_failed:
        return True
    if failed or result is None:
        return False
    return sorted(known, key=lambda d: d.cluster) != sorted(result.doors, key=lambda d: d.cluster)
