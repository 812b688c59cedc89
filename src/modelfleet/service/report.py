"""What a ModelService reports from what it holds: its endpoints (weight, health, reason, and the
ones withdrawn but still routed), each front door's state, and the model lists its healthy
endpoints serve. Pure views over the workflow's state: they may touch the resource API, the
contracts' payloads and ``rendering.front_door``; no Temporal, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from modelfleet.contracts.serving_payloads import (
    EndpointHealth,
    FrontDoorHealth,
    FrontDoorStatus,
    ServiceEndpointStatus,
)
from modelfleet.rendering.front_door import EndpointRecord

__all__ = ["endpoint_statuses", "front_door_statuses", "served_model_lists"]


def endpoint_statuses(
    groups: Sequence[Sequence[EndpointRecord]],
    health: Mapping[str, EndpointHealth],
    weights: Mapping[str, int],
    routed: Mapping[str, tuple[int, EndpointRecord]],
) -> list[ServiceEndpointStatus]:
    endpoints = []
    listed: set[str] = set()
    for index, group in enumerate(groups):
        for e in group:
            seen = health.get(e.key)
            listed.add(e.key)
            endpoints.append(
                ServiceEndpointStatus(
                    name=e.name,
                    url=e.url,
                    entry=index,
                    weight=weights.get(e.key, 0),
                    healthy=bool(seen and seen.healthy),
                    reason=seen.reason if seen else "not probed yet",
                    models=list(seen.models) if seen else [],
                )
            )
    # Withdrawn (or no longer selected) but still in the applied route: the gateway sends
    # it traffic until the next reconcile applies a route without it, and the status says
    # so (dropped at once, a user saw "out of rotation" and then 503s from it).
    for key in sorted(routed.keys() - listed):
        index, e = routed[key]
        endpoints.append(
            ServiceEndpointStatus(
                name=e.name,
                url=e.url,
                entry=index,
                weight=weights.get(key, 0),
                healthy=False,
                reason="withdrawn; still in the route until the next reconcile",
            )
        )
    return endpoints


def front_door_statuses(
    clusters: Iterable[str],
    applied: Iterable[str],
    door_error: Mapping[str, str],
    door_address: Mapping[str, str],
    health: Mapping[str, FrontDoorHealth],
) -> list[FrontDoorStatus]:
    """Each front-door cluster's state: Configuring until its route is applied (or while its
    last apply failed), then Serving, Out or Disabled as the global load balancer sees it.

    A door the balancer took out is Out even when its last apply failed: the cluster that went
    dark fails both, and what a user needs to know is that it left the address (the failed
    apply is named in the reason, and is not retried while the balancer keeps it out)."""
    have = set(applied)
    doors = []
    for cluster in clusters:
        seen = health.get(cluster)
        if cluster in have and seen is not None and seen.enabled and not seen.healthy:
            state, reason = "Out", seen.reason
            if cluster in door_error:
                reason = f"{reason}; last apply: {door_error[cluster]}"
        elif cluster not in have or cluster in door_error:
            state, reason = "Configuring", door_error.get(cluster, "route not applied yet")
        elif seen is None:
            state, reason = "Serving", "route applied"
        elif not seen.enabled:
            state, reason = "Disabled", seen.reason
        else:
            state, reason = ("Serving" if seen.healthy else "Out"), seen.reason
        doors.append(
            FrontDoorStatus(
                cluster=cluster, address=door_address.get(cluster), state=state, reason=reason
            )
        )
    return doors


def served_model_lists(
    groups: Sequence[Sequence[EndpointRecord]],
    entries: Iterable[int],
    health: Mapping[str, EndpointHealth],
) -> list[list[str]]:
    """The distinct model lists (as its probes last read them) of the healthy endpoints the
    entries ``entries`` select, sorted. Distinct, so the answer stays small however many
    endpoints."""
    lists: set[tuple[str, ...]] = set()
    for index in entries:
        for e in groups[index] if 0 <= index < len(groups) else []:
            seen = health.get(e.key)
            if seen is not None and seen.healthy and seen.models:
                lists.add(tuple(seen.models))
    return [list(m) for m in sorted(lists)]
