"""What one scan of a cluster says about each replica the cluster watches, from one list per
kind: its objects are found by their namespace and replica labels (no names travel); it is
ready when every workload of it (Deployment, LeaderWorkerSet, the endpoint picker's included)
meets the rule of ``rendering.readiness`` (explained by ``adapters.kube_readiness``); objects
are missing when fewer stand than it applied; and they changed when the digest of their kinds,
names and ``metadata.generation`` differs from the baseline taken at the first scan that found
them all (deleted and re-created, or the spec edited outside modelfleet). The replica then
compares field by field with ``kube.drift`` and repairs. An edit that moves no generation
(labels, annotations; kinds without a generation such as ConfigMap) is not seen here.

Pure: works on the JSON dicts the activity listed. It may not do I/O or import SDKs.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from modelfleet.adapters.kube_readiness import evaluate, is_workload
from modelfleet.api.naming import LABEL_NAMESPACE, LABEL_REPLICA
from modelfleet.contracts.watch_payloads import ReplicaScan, WatchedReplica
from modelfleet.rendering.readiness import ReadinessRole, ReadinessRule

__all__ = ["Listed", "by_replica", "changed_scans", "observe"]

# (apiVersion, kind, the object as listed)
Listed = tuple[str, str, Mapping[str, Any]]


def _digest(value: object) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def by_replica(listed: Iterable[Listed]) -> dict[str, list[Listed]]:
    """Objects by ``namespace/replica`` key, from their labels (unlabelled ones are skipped)."""
    out: dict[str, list[Listed]] = defaultdict(list)
    for api_version, kind, obj in listed:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if labels.get(LABEL_NAMESPACE) and labels.get(LABEL_REPLICA):
            out[f"{labels[LABEL_NAMESPACE]}/{labels[LABEL_REPLICA]}"].append(
                (api_version, kind, obj)
            )
    return out


def observe(watched: WatchedReplica, objects: list[Listed]) -> ReplicaScan:
    """One replica as the listing shows it; ``objects`` are those carrying its labels."""
    live = [o for o in objects if not (o[2].get("metadata") or {}).get("deletionTimestamp")]
    missing = max(watched.objects - len(live), 0)
    ids = sorted(
        (
            api_version,
            kind,
            str((obj.get("metadata") or {}).get("namespace") or ""),
            str((obj.get("metadata") or {}).get("name")),
            (obj.get("metadata") or {}).get("generation"),
        )
        for api_version, kind, obj in live
    )
    now = _digest(ids)
    baseline = watched.baseline or ("" if missing else now)
    changed = bool(watched.baseline) and now != watched.baseline
    ready, reason, reported = True, "", False
    workloads = [o for o in live if is_workload(o[0], o[1])]
    if not workloads:
        ready, reason = False, "no workload of the replica found"
    for api_version, kind, obj in sorted(workloads, key=lambda o: str(o[2].get("metadata"))):
        meta = obj.get("metadata") or {}
        rule = ReadinessRule(
            api_version=api_version,
            kind=kind,
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name")),
            role=ReadinessRole.WORKLOAD,
        )
        verdict = evaluate(rule, obj)
        if not verdict.ready:
            ready, reason, reported = False, verdict.reason, verdict.reported
            break
    return ReplicaScan(
        key=watched.key,
        ready=ready,
        reason=reason,
        reported=reported,
        missing=missing,
        changed=changed,
        baseline=baseline,
        digest=_digest((ready, reported, reason, missing, changed)),
    )


def changed_scans(
    replicas: Iterable[WatchedReplica], listed: Iterable[Listed]
) -> list[ReplicaScan]:
    """What the workflow needs to hear: replicas whose observation differs from the digest it
    holds, whose baseline is not taken yet, or that are not healthy (each failed scan counts,
    so it is told every time). A healthy, unchanged replica is left out."""
    grouped = by_replica(listed)
    out = []
    for watched in replicas:
        scan = observe(watched, grouped.get(watched.key, []))
        healthy = scan.ready and not scan.missing and not scan.changed
        if scan.digest != watched.digest or not watched.baseline or not healthy:
            out.append(scan)
    return out
