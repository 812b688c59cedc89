"""When a replica that served may delete its objects: after its endpoint is withdrawn, every
front-door route that carried it must no longer do so, as the front-door clusters report it
(``serving.routes_carrying`` reads their HTTPRoutes), or the wait's bound must have passed.

Pure: the decisions; the replica workflow reads the routes and keeps the timers.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from modelfleet.contracts.serving_payloads import RoutesCarrying

# The first look follows the withdrawal closely (the services rewrite their routes about a
# second after it); then back-off, so a slow or dark front door costs a few reads, not a poll.
FIRST_LOOK = timedelta(seconds=1)
MAX_INTERVAL = timedelta(seconds=8)
# After the routes confirm: Envoy Gateway pushes a changed route to its proxies asynchronously
# (xDS, well under a second), and a request a proxy forwarded under the old route is still
# being answered by this replica; both finish within this grace.
GRACE = timedelta(seconds=2)


@dataclass(frozen=True)
class DrainStep:
    done: bool
    # When not done: how long to wait before looking again.
    wait: timedelta = timedelta(0)
    # When done: what the decision log says (empty when the routes confirmed).
    reason: str = ""


def drain_step(
    seen: RoutesCarrying | None,
    started: datetime,
    now: datetime,
    interval: timedelta,
    bound: timedelta,
) -> DrainStep:
    """``seen``: the last read of the front doors (None: the read itself failed). Done once
    nothing carries the endpoint and every door was read; else look again after ``interval``
    (never past ``bound`` from ``started``), and at the bound go on, saying what was left."""
    if seen is not None and not seen.carrying and not seen.unread:
        return DrainStep(done=True)
    remaining = started + bound - now
    if remaining <= timedelta(0):
        if seen is None:
            left = "the front doors could not be read"
        else:
            left = "; ".join(
                [
                    *(f"still carried by {r}" for r in seen.carrying),
                    *(f"unread {u}" for u in seen.unread),
                ]
            )
        return DrainStep(
            done=True,
            reason=(
                f"routes not confirmed within {bound.total_seconds():g} s ({left}): deleting anyway"
            ),
        )
    return DrainStep(done=False, wait=min(interval, remaining))


def next_interval(interval: timedelta) -> timedelta:
    return min(interval * 2, MAX_INTERVAL)
