"""How an InferenceCluster judges, scan after scan, the replicas it watches, and what it tells
them. Pure.

The rule is the one a replica used when it polled its own health (``replica.health``):
unhealthy only after ``threshold`` consecutive failed scans, or at once when the cluster reports
the readiness condition False; a scan that could not be made is no sample (the caller simply
does not judge). Objects missing or edited outside modelfleet are news at once: the replica
compares what it applied with the cluster and re-applies (drift repair), then registers again.
A replica is told only when its verdict changes, so a healthy, idle fleet hears nothing.

May import what ``rollout`` may (see the package docstring).
"""

from __future__ import annotations

from modelfleet.contracts.kube_payloads import ReadyResult
from modelfleet.contracts.status import ReplicaPhase
from modelfleet.contracts.watch_payloads import (
    HealthNews,
    NewsKind,
    ReplicaScan,
    WatchedReplica,
)
from modelfleet.replica.health import after_check

__all__ = ["judge", "registered"]

# Longest reason carried in a signal (many missing objects are cut).
_REASON_LIMIT = 400


def registered(entry: WatchedReplica) -> WatchedReplica:
    """A (re-)registration as the cluster keeps it: a fresh baseline and count, whatever the
    sender put in the cluster-owned fields."""
    return entry.model_copy(
        update={"baseline": "", "digest": "", "failed_scans": 0, "acknowledged": False}
    )


def _cut(text: str) -> str:
    return text if len(text) <= _REASON_LIMIT else text[: _REASON_LIMIT - 1] + "…"


def judge(entry: WatchedReplica, scan: ReplicaScan) -> tuple[WatchedReplica, HealthNews | None]:
    """The entry after one scan of it, and what to tell the replica (None: nothing). The first
    scan after a registration always tells something (``watching`` when nothing else), so the
    replica knows a cluster watches it (one that never hears falls back to polling)."""
    kept, news = _judge(entry, scan)
    if news is not None:
        kept = kept.model_copy(update={"unreachable": False})
    if not entry.acknowledged:
        kept = kept.model_copy(update={"acknowledged": True})
        news = news or HealthNews(kind=NewsKind.WATCHING)
    return kept, news


def _judge(entry: WatchedReplica, scan: ReplicaScan) -> tuple[WatchedReplica, HealthNews | None]:
    kept = entry.model_copy(update={"digest": scan.digest, "baseline": scan.baseline})
    if scan.missing or scan.changed:
        parts = []
        if scan.missing:
            parts.append(f"{scan.missing} of its {entry.objects} objects missing")
        if scan.changed:
            parts.append("its objects were re-created or edited outside modelfleet")
        # Told once per distinct finding: the replica repairs and registers afresh; if it
        # could not, the next different finding (or its own deadline) moves it on.
        news = (
            None
            if scan.digest == entry.digest
            else HealthNews(kind=NewsKind.REPAIR, reason=_cut("; ".join(parts)))
        )
        return kept, news
    verdict = after_check(
        ReadyResult(ready=scan.ready, reason=scan.reason, reported=scan.reported),
        entry.failed_scans,
        entry.threshold,
    )
    kept = kept.model_copy(update={"failed_scans": verdict.failed_checks})
    # One told its cluster was unreachable (Unknown) hears what the scan finds, either way.
    if verdict.phase is ReplicaPhase.READY and (not entry.healthy or entry.unreachable):
        return kept.model_copy(update={"healthy": True}), HealthNews(kind=NewsKind.HEALTHY)
    if verdict.phase is ReplicaPhase.DEGRADED and (
        entry.healthy or entry.unreachable or scan.digest != entry.digest
    ):
        news = HealthNews(kind=NewsKind.UNHEALTHY, reason=_cut(verdict.reason))
        return kept.model_copy(update={"healthy": False}), news
    return kept, None
