"""What one scan of a cluster says about each replica the cluster watches, from one list per
kind: its objects are found by their namespace and replica labels (no names travel); it is
ready when every workload of it (Deployment, LeaderWorkerSet, the endpoint picker's included)
meets the rule of ``rendering.readiness`` (explained by ``adapters.kube_readiness``); objects
are missing when fewer stand than it applied; and they changed when the digest of what
modelfleet set differs from the baseline taken at the first scan that found them all. That
digest covers each object's kind and name (deleted and re-created), ``metadata.generation``
(its spec edited outside modelfleet), the labels and annotations modelfleet's field manager
owns (``metadata.managedFields``: another writer that changes or removes one takes it over, so
the set changes; labels others add, or annotations controllers write, are not ours and do not
count), and, for kinds without a generation (ConfigMap, Service, Role ...), their content. The
replica then compares field by field with ``kube.drift`` and repairs.

Pure: works on the JSON dicts the activity listed. It may not do I/O or import SDKs.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from modelfleet.adapters.kube_client import FIELD_MANAGER
from modelfleet.adapters.kube_readiness import evaluate, is_workload
from modelfleet.api.naming import LABEL_NAMESPACE, LABEL_REPLICA
from modelfleet.contracts.watch_payloads import ReplicaScan, WatchedReplica
from modelfleet.rendering.readiness import ReadinessRole, ReadinessRule

__all__ = ["Listed", "by_replica", "changed_scans", "observe"]

# (apiVersion, kind, the object as listed)
Listed = tuple[str, str, Mapping[str, Any]]


# Marks baselines of the digest described above; one without it was taken by a worker that
# digested generations only, and is taken anew instead of read as a change (else an upgrade
# would send every watched replica through a repair at once).
BASELINE_FORM = "v2:"
# What an object's content is, for kinds without a generation: all of it but these.
_NOT_CONTENT = frozenset({"apiVersion", "kind", "metadata", "status"})


def _digest(value: object) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def _owned_metadata(meta: Mapping[str, Any]) -> list[tuple[str, str, object]]:
    """The labels and annotations modelfleet's field manager owns, with their live values."""
    out: list[tuple[str, str, object]] = []
    for entry in meta.get("managedFields") or []:
        if entry.get("manager") != FIELD_MANAGER:
            continue
        fields = ((entry.get("fieldsV1") or {}).get("f:metadata")) or {}
        for section in ("labels", "annotations"):
            live = meta.get(section) or {}
            for owned in fields.get(f"f:{section}") or {}:
                if owned.startswith("f:"):
                    key = owned[2:]
                    out.append((section, key, live.get(key)))
    return sorted(set(out), key=repr)


def _identity(api_version: str, kind: str, obj: Mapping[str, Any]) -> tuple[object, ...]:
    meta = obj.get("metadata") or {}
    generation = meta.get("generation")
    # Without a generation the content stands in for it (all of it but metadata and status:
    # nothing in these kinds is written by anyone else once created).
    content = (
        None
        if generation is not None
        # Key order as JSON sorts it: two listings of the same object digest the same.
        else _digest(
            json.dumps(
                {k: v for k, v in obj.items() if k not in _NOT_CONTENT}, sort_keys=True, default=str
            )
        )
    )
    return (
        api_version,
        kind,
        str(meta.get("namespace") or ""),
        str(meta.get("name")),
        generation,
        content,
        _owned_metadata(meta),
    )


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
    now = BASELINE_FORM + _digest(sorted((_identity(*o) for o in live), key=repr))
    kept = watched.baseline if _current(watched) else ""
    baseline = kept or ("" if missing else now)
    changed = bool(kept) and now != kept
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
    holds, whose baseline is not taken yet, that are not healthy (each failed scan counts,
    so it is told every time), or that were told their cluster was unreachable (they wait for
    this scan's word). A healthy, unchanged replica is left out."""
    grouped = by_replica(listed)
    out = []
    for watched in replicas:
        scan = observe(watched, grouped.get(watched.key, []))
        healthy = scan.ready and not scan.missing and not scan.changed
        if (
            scan.digest != watched.digest
            or not _current(watched)
            or not healthy
            or watched.unreachable
        ):
            out.append(scan)
    return out


def _current(watched: WatchedReplica) -> bool:
    """The replica has a baseline of this digest's form (else the scan takes one)."""
    return watched.baseline.startswith(BASELINE_FORM)
