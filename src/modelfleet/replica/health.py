"""How a serving ModelReplica judges its health over time and when it repairs drift. Pure.

A replica is Degraded only after ``threshold`` consecutive failed health checks, or at once when
the cluster itself reports the readiness condition False: one sample that found an object
missing or a status not caught up is not a verdict. A check that could not be made (API errors
or an unreachable cluster, after retries) is no sample at all: it neither counts nor resets the
count. (A cluster that stays dark is the InferenceCluster workflow's to judge: NotReady, then
its replicas are evicted after the grace period.)

Drift is compared with the cluster on every failed check (something may have been deleted) and
otherwise on a slow resync; a repair that re-created something makes the replica Degraded until
its health checks pass again, and it must pass them within the progress deadline.

May import what ``rollout`` may (see the package docstring).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from modelfleet.contracts.kube_payloads import DriftFound, ReadyResult
from modelfleet.contracts.status import ReplicaPhase

__all__ = ["Health", "after_check", "drift_check_due", "repair_phase", "repairable"]


@dataclass(frozen=True)
class Health:
    # Consecutive failed checks so far.
    failed_checks: int
    # The phase to report now; None: keep the current one.
    phase: ReplicaPhase | None
    reason: str = ""


def after_check(result: ReadyResult | None, failed_checks: int, threshold: int) -> Health:
    """The verdict after one health check; ``result`` None when the check could not be made."""
    if result is None:
        return Health(failed_checks, None)
    if result.ready:
        return Health(0, ReplicaPhase.READY)
    failed = failed_checks + 1
    if result.reported or failed >= threshold:
        return Health(failed, ReplicaPhase.DEGRADED, result.reason)
    return Health(failed, None, result.reason)


def drift_check_due(healthy: bool | None, now: datetime, next_resync: datetime) -> bool:
    """Compare with the cluster after a failed check, or when the resync is due; never when the
    check could not be made (the comparison would fail the same way)."""
    if healthy is None:
        return False
    return not healthy or now >= next_resync


def repairable(found: list[DriftFound]) -> list[DriftFound]:
    """What to re-apply now: an object still being deleted is re-created once it is gone (the
    next comparison finds it missing), since applying it now would only be deleted with it."""
    return [d for d in found if d.kind != "terminating"]


def repair_phase(current: ReplicaPhase, repaired: list[DriftFound]) -> ReplicaPhase:
    """Re-created objects (deleted outside modelfleet) leave the replica Degraded until its
    health checks pass; a field put back leaves its phase as it was."""
    if any(d.kind == "missing" for d in repaired):
        return ReplicaPhase.DEGRADED
    return current
