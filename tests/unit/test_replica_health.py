"""Health over time and when to repair drift (``replica.health``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from modelfleet.contracts.kube_payloads import DriftFound, ObjectRef, ReadyResult
from modelfleet.contracts.status import ReplicaPhase
from modelfleet.replica.health import (
    after_check,
    drift_check_due,
    repair_phase,
    repairable,
)

NOT_FOUND = ReadyResult(ready=False, reason="Deployment mf-ml/x not found")
REPORTED = ReadyResult(ready=False, reason="Deployment mf-ml/x not Available", reported=True)
READY = ReadyResult(ready=True, reason="all ready")


def test_degraded_only_after_n_consecutive_failed_checks() -> None:
    failed = 0
    phases = []
    for _ in range(3):
        verdict = after_check(NOT_FOUND, failed, threshold=3)
        failed = verdict.failed_checks
        phases.append(verdict.phase)
    assert phases == [None, None, ReplicaPhase.DEGRADED]
    assert verdict.reason == NOT_FOUND.reason


def test_a_passing_check_resets_the_count_and_an_unknown_one_does_neither() -> None:
    two = after_check(NOT_FOUND, after_check(NOT_FOUND, 0, 3).failed_checks, 3)
    assert two.failed_checks == 2
    unknown = after_check(None, two.failed_checks, 3)
    assert (unknown.failed_checks, unknown.phase) == (2, None)
    ready = after_check(READY, unknown.failed_checks, 3)
    assert (ready.failed_checks, ready.phase) == (0, ReplicaPhase.READY)
    assert after_check(NOT_FOUND, ready.failed_checks, 3).phase is None


def test_the_cluster_reporting_not_ready_degrades_at_once() -> None:
    verdict = after_check(REPORTED, 0, threshold=3)
    assert verdict.phase is ReplicaPhase.DEGRADED
    assert verdict.reason == REPORTED.reason


def test_drift_is_compared_after_a_failed_check_or_on_the_resync_never_when_unknown() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    later = now + timedelta(minutes=5)
    assert drift_check_due(False, now, later)
    assert not drift_check_due(True, now, later)
    assert drift_check_due(True, later, later)
    assert not drift_check_due(None, later, later)


def _found(kind: str) -> DriftFound:
    ref = ObjectRef(api_version="apps/v1", kind="Deployment", name="x", namespace="mf-ml")
    return DriftFound(index=0, ref=ref, kind=kind, reason=kind)


def test_re_created_objects_degrade_a_put_back_field_does_not() -> None:
    assert repair_phase(ReplicaPhase.READY, [_found("changed")]) is ReplicaPhase.READY
    assert repair_phase(ReplicaPhase.READY, [_found("missing")]) is ReplicaPhase.DEGRADED
    assert [d.kind for d in repairable([_found("terminating"), _found("missing")])] == ["missing"]
