"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's leaderelection does it:
the holder renews the lease well within its duration; another candidate takes it only once it
has not been renewed for a whole duration. Pure: the caller reads and writes the Lease.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

LEASE_API_VERSION = "coordination.k8s.io/v1"


def micro_time(at: datetime) -> str:
    """A Kubernetes MicroTime: RFC 3339 with microseconds, UTC."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def lease_spec(identity: str, duration: int, now: datetime, acquired: datetime) -> dict[str, Any]:
    return {
        "holderIdentity": identity,
        "leaseDurationSeconds": duration,
        "acquireTime": micro_time(acquired),
        "renewTime": micro_time(now),
    }


def claim(
    lease: Mapping[str, Any] | None, identity: str, duration: int, now: datetime
) -> dict[str, Any] | None:
    """The Lease spec to write to hold (or keep holding) the lease at ``now``; None when
    another holder's lease is still live (wait)."""
    if lease is None:
        return lease_spec(identity, duration, now, now)
    spec = lease.get("spec") or {}
    holder = spec.get("holderIdentity") or ""
    if holder == identity:
        acquired = parse_time(spec.get("acquireTime")) or now
        return lease_spec(identity, duration, now, acquired)
    renewed = parse_time(spec.get("renewTime"))
    held_for = int(spec.get("leaseDurationSeconds") or duration)
    if holder and renewed is not None and now < renewed + timedelta(seconds=held_for):
        return None
    return lease_spec(identity, duration, now, now)
