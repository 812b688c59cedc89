"""When an InferenceCluster sweeps its cluster of orphans (what it removes is decided by
:func:`modelfleet.cluster.orphans.orphaned`): level-triggered, not only once after a dark spell.

- **return**: at the first Ready probe after the cluster went from Ready to NotReady (a failed
  one is tried again at the next Ready probe);
- **follow-up**: when the return sweep kept replicas it found on the cluster because the ledger
  still held them, at each of the next Ready probes, while any of those replicas is still found
  and still held, at most :data:`FOLLOW_UPS` times. A teardown that gave up on the dark cluster
  releases its replica in the Fleet only afterwards, and the return sweep may have asked the
  ledger in between; the bound keeps a cluster whose kept replicas are simply still serving from
  listing itself on every probe for ever;
- **resync**: every ``resync`` while Ready (the clock starts at the run's first probe), for
  anything left behind while the cluster stayed Ready (a crashed teardown, a replica workflow
  terminated by an operator) or still held when the follow-ups ran out.

Every kind runs the same safe sweep (list the cluster, then ask the ledger), so sweeping more
often never removes a replica the ledger holds. Pure: no I/O and no clock (callers pass ``now``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from modelfleet.cluster.orphans import ReplicaName

# Follow-up sweeps after a return (one per Ready probe): a teardown that gave up is released in
# the Fleet within seconds, so a few probe intervals cover the race; the resync covers the rest.
FOLLOW_UPS = 4


class SweepKind(StrEnum):
    RETURN = "return"
    FOLLOW_UP = "follow-up"
    RESYNC = "resync"


def still_held(found: Iterable[ReplicaName], held: Iterable[str]) -> frozenset[str]:
    """The ledger keys (``namespace/name``) of the replicas ``found`` on the cluster that the
    ledger ``held`` there: what a sweep kept."""
    keys = set(held)
    return frozenset(k for k in (f"{ns}/{name}" for ns, name in found) if k in keys)


@dataclass(frozen=True)
class SweepSchedule:
    """What a cluster's sweeps are waiting for."""

    resync: timedelta
    ready: bool = False
    dark: bool = False
    # Found and held at the return sweep and at every follow-up since; empty: no follow-up.
    suspects: frozenset[str] = frozenset()
    follow_ups_left: int = 0
    next_resync: datetime | None = None

    def observe(self, ready: bool, now: datetime) -> SweepSchedule:
        """After a probe: a Ready cluster that is not Ready any more is dark until swept; the
        first probe starts the resync clock."""
        dark = self.dark or (self.ready and not ready)
        start = self.next_resync if self.next_resync is not None else now + self.resync
        return replace(self, ready=ready, dark=dark, next_resync=start)

    def due(self, now: datetime) -> SweepKind | None:
        """Which sweep, if any, to run now (after :meth:`observe` of this probe)."""
        if not self.ready:
            return None
        if self.dark:
            return SweepKind.RETURN
        if self.suspects and self.follow_ups_left > 0:
            return SweepKind.FOLLOW_UP
        if self.next_resync is not None and now >= self.next_resync:
            return SweepKind.RESYNC
        return None

    def swept(self, kind: SweepKind, now: datetime, kept: frozenset[str]) -> SweepSchedule:
        """After a sweep of ``kind`` that succeeded and kept the replicas ``kept`` (found and
        held, :func:`still_held`)."""
        after = self._next(now)
        if kind is SweepKind.RETURN:
            return replace(after, dark=False, suspects=kept, follow_ups_left=FOLLOW_UPS)
        if kind is SweepKind.FOLLOW_UP:
            suspects = self.suspects & kept
            left = self.follow_ups_left - 1 if suspects else 0
            return replace(after, suspects=suspects, follow_ups_left=left)
        return after

    def failed(self, kind: SweepKind, now: datetime) -> SweepSchedule:
        """After a sweep of ``kind`` that failed past its retries: a return sweep stays due (the
        cluster is still to be swept), a follow-up uses up its turn, a resync waits a period."""
        if kind is SweepKind.FOLLOW_UP:
            return replace(self, follow_ups_left=self.follow_ups_left - 1)
        if kind is SweepKind.RESYNC:
            return self._next(now)
        return self

    def _next(self, now: datetime) -> SweepSchedule:
        return replace(self, next_resync=now + self.resync)
