"""A ModelService's pure decisions for one reconcile round: which endpoints are in rotation and
with what weight, which address the service answers on, whether the global address moved, and the
conditions the status reports. Pure: it may touch the resource API, the contracts' payloads and
``rendering.front_door``; no Temporal, no I/O (the workflow carries the answers out).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from modelfleet.api.meta import Condition
from modelfleet.api.services import GlobalAddress, ServiceEndpoint
from modelfleet.contracts.serving_payloads import EndpointHealth, GlobalAddressResult
from modelfleet.rendering.front_door import EndpointRecord, distribute_weights

__all__ = [
    "condition",
    "global_address_condition",
    "global_moved",
    "resolved_condition",
    "rotation_weights",
    "routed_endpoints",
    "routing_ready",
    "service_address",
    "watch_seconds",
]


def condition(kind: str, ok: bool, reason: str, message: str = "") -> Condition:
    return Condition(type=kind, status="True" if ok else "False", reason=reason, message=message)


def rotation_weights(
    entries: Sequence[ServiceEndpoint],
    groups: Sequence[Sequence[EndpointRecord]],
    health: Mapping[str, EndpointHealth],
) -> dict[str, int]:
    """Each healthy endpoint's weight (Modelplane's distribution of its entry's weight); an
    endpoint not probed yet counts as unhealthy."""
    healthy = [
        [e for e in group if (h := health.get(e.key)) is not None and h.healthy] for group in groups
    ]
    return distribute_weights(
        [
            (entry.weight, [e.key for e in group])
            for entry, group in zip(entries, healthy, strict=True)
        ]
    )


def resolved_condition(groups: Sequence[Sequence[EndpointRecord]]) -> Condition:
    if any(groups):
        return condition(
            "EndpointsResolved", True, "Resolved", f"{sum(map(len, groups))} endpoint(s) selected"
        )
    return condition("EndpointsResolved", False, "NoEndpoints", "no endpoint matches any selector")


def routed_endpoints(
    groups: Sequence[Sequence[EndpointRecord]], weights: Mapping[str, int]
) -> dict[str, tuple[int, EndpointRecord]]:
    """The endpoints a route with ``weights`` carries, by key: their entry index and record."""
    return {
        e.key: (index, e)
        for index, group in enumerate(groups)
        for e in group
        if weights.get(e.key, 0) > 0
    }


def routing_ready(in_rotation: int, applied: int, clusters: int) -> Condition:
    doors = f" on {applied} of {clusters} front doors" if clusters > 1 else ""
    return condition(
        "RoutingReady", True, "RouteConfigured", f"{in_rotation} endpoint(s) in rotation{doors}"
    )


def global_address_condition(
    result: GlobalAddressResult | None, error: str, clusters: int
) -> Condition:
    """Whether the global load balancer holds the address, and how many doors are in it."""
    in_address = sum(d.healthy for d in result.doors) if result else 0
    return condition(
        "GlobalAddressReady",
        result is not None and not error,
        "Configured" if not error else "Unavailable",
        error or f"{in_address} of {clusters} front doors in the address",
    )


def global_moved(old: GlobalAddress | None, new: GlobalAddress | None) -> bool:
    """The address put in place with ``old`` must go first: the gateway dropped it, or moved it to
    another account or zone."""
    return old is not None and (
        new is None
        or (old.account_id, old.zone_id, old.zone) != (new.account_id, new.zone_id, new.zone)
    )


def service_address(
    result: GlobalAddressResult | None, door_address: Mapping[str, str], applied: Sequence[str]
) -> str | None:
    """The global address when there is one, else the first applied door's own."""
    if result is not None:
        return result.address
    return door_address.get(applied[0]) if applied else None


def watch_seconds(
    interval: float,
    bound: float,
    *,
    door_errors: Iterable[str],
    applied: Iterable[str],
    clusters: Iterable[str],
    global_moving: bool,
) -> float:
    """How long the next health watch may run when nothing changes: ``bound`` while the route
    is where it should be, one probe ``interval`` while something the reconcile does is still
    to be retried (a door whose apply failed, a door that stopped being one whose objects are
    still there, a global address still to be removed from where it was), as the reconcile on
    every probe used to retry them."""
    front = set(clusters)
    retry = any(True for _ in door_errors) or any(c not in front for c in applied)
    return interval if retry or global_moving else max(bound, interval)
