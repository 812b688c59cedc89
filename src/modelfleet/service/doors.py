"""Which front doors a ModelService writes its route to this round. Pure.

A door the global load balancer reports unreachable (its checks cannot connect) or whose cluster
the fleet counts NotReady is skipped: its apply could only hang or fail against a dark cluster,
holding up the service's loop, while the balancer already sends it no traffic. It gets the route
again once it answers. A door that answers but fails its checks (a stale route, say) is always
written to: the new route is what brings it back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from modelfleet.contracts.serving_payloads import FrontDoorHealth

__all__ = ["UNREACHABLE", "doors_to_apply"]

# The start of a Cloudflare monitor's failure reason when it could not connect at all.
UNREACHABLE = "TCP connection failed"


def doors_to_apply(
    clusters: Iterable[str],
    applied: Iterable[str],
    health: Mapping[str, FrontDoorHealth],
) -> list[str]:
    """``clusters`` in order, less the doors that already carry a route and are known down."""
    have = set(applied)
    out = []
    for cluster in clusters:
        seen = health.get(cluster)
        down = seen is not None and (
            not seen.enabled or (not seen.healthy and seen.reason.startswith(UNREACHABLE))
        )
        if cluster not in have or not down:
            out.append(cluster)
    return out
