"""What one scan of a cluster says about each replica the cluster watches: its readiness (the
rule of ``rendering.readiness``, explained by ``adapters.kube_readiness``), the objects it
applied that are gone or being deleted, and those whose ``metadata.generation`` moved since the
baseline (someone edited the spec: drift, which the replica then compares field by field with
``kube.drift`` and repairs). Objects without a generation (ConfigMap, Service, ...) are judged
by presence only; a label or annotation edit moves no generation and is not seen here.

Pure: works on the JSON dicts the activity listed (one list per kind, every namespace). It may
not do I/O or import SDKs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from modelfleet.adapters.kube_readiness import evaluate
from modelfleet.contracts.kube_payloads import ObjectRef
from modelfleet.contracts.watch_payloads import ReplicaScan, WatchedReplica

__all__ = ["ObjectIndex", "changed_scans", "index_objects", "kinds_of", "observe"]

# (apiVersion, kind, namespace, name) -> the object as listed.
ObjectIndex = dict[tuple[str, str, str, str], Mapping[str, Any]]


def kinds_of(replicas: Iterable[WatchedReplica]) -> list[tuple[str, str]]:
    """The (apiVersion, kind) pairs to list: those the replicas applied or are judged by."""
    kinds = {(r.api_version, r.kind) for w in replicas for r in w.refs}
    kinds |= {(r.api_version, r.kind) for w in replicas for r in w.rules}
    return sorted(kinds)


def index_objects(api_version: str, kind: str, objects: Iterable[Mapping[str, Any]]) -> ObjectIndex:
    out: ObjectIndex = {}
    for obj in objects:
        meta = obj.get("metadata") or {}
        out[(api_version, kind, str(meta.get("namespace") or ""), str(meta.get("name")))] = obj
    return out


def _key(ref: ObjectRef) -> tuple[str, str, str, str]:
    return (ref.api_version, ref.kind, ref.namespace or "", ref.name)


def _generation(obj: Mapping[str, Any] | None) -> int:
    value = ((obj or {}).get("metadata") or {}).get("generation")
    return value if isinstance(value, int) else 0


def observe(watched: WatchedReplica, objects: ObjectIndex) -> ReplicaScan:
    """One replica as the listing shows it."""
    live = [objects.get(_key(ref)) for ref in watched.refs]
    missing = [
        str(ref)
        for ref, obj in zip(watched.refs, live, strict=True)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp")
    ]
    generations = [_generation(obj) for obj in live]
    baseline = watched.generations if len(watched.generations) == len(watched.refs) else []
    drifted = [
        str(ref)
        for ref, was, now in zip(watched.refs, baseline, generations, strict=False)
        if was and now and now != was
    ]
    ready, reason, reported = True, "", False
    for rule in watched.rules:
        verdict = evaluate(
            rule, objects.get((rule.api_version, rule.kind, rule.namespace, rule.name))
        )
        if not verdict.ready:
            ready, reason, reported = False, verdict.reason, verdict.reported
            break
    text = repr((ready, reported, reason, missing, drifted))
    return ReplicaScan(
        key=watched.key,
        ready=ready,
        reason=reason,
        reported=reported,
        missing=missing,
        drifted=drifted,
        generations=baseline or generations,
        digest=hashlib.sha256(text.encode()).hexdigest()[:16],
    )


def changed_scans(replicas: Iterable[WatchedReplica], objects: ObjectIndex) -> list[ReplicaScan]:
    """What the workflow needs to hear: replicas whose observation differs from the digest it
    holds, whose generation baseline is not taken yet, or that are not healthy (each failed
    scan counts, so it is told every time). A healthy, unchanged replica is left out."""
    out = []
    for watched in replicas:
        scan = observe(watched, objects)
        healthy = scan.ready and not scan.missing and not scan.drifted
        if scan.digest != watched.digest or not watched.generations or not healthy:
            out.append(scan)
    return out
