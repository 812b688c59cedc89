"""What the workers' copies of the fleet (:mod:`modelfleet.fleet.mirror`) read from the Fleet:
what changed since a version (the ``changes`` query, from the change log,
:mod:`modelfleet.fleet.changes`), and the whole fleet a bounded page at a time (the
``snapshot_page`` query) when the log no longer reaches back that far. Each answer costs what it
returns, never the fleet.

Pure: no I/O, no Temporal calls; the Fleet workflow passes its state in (its clock, epoch and
version as arguments). May import the ``api`` and ``contracts`` models, the Fleet's book and
change log, and the standard library.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from modelfleet.api.classes import InferenceClass
from modelfleet.contracts.fleet_copy import (
    MAX_CHANGES_PER_ANSWER,
    SNAPSHOT_CLUSTER_PAGE,
    SNAPSHOT_REPLICA_PAGE,
    ChangesRequest,
    CompactClusters,
    FleetChanges,
    SnapshotPage,
    SnapshotPageRequest,
)
from modelfleet.contracts.fleet_state import ClusterEntry
from modelfleet.contracts.status import ClusterRecord
from modelfleet.contracts.workflow_inputs import FleetLimits
from modelfleet.fleet.book import FleetBook
from modelfleet.fleet.changes import ChangeLog

EntryOf = Callable[[str], tuple[ClusterEntry, str, list[Any]]]


def changes_since(
    request: ChangesRequest,
    *,
    epoch: str,
    now: datetime,
    limits: FleetLimits,
    version: int,
    log: ChangeLog,
    classes: Mapping[str, InferenceClass],
    clusters: Mapping[str, ClusterRecord],
    entry_of: EntryOf,
    book: FleetBook,
) -> FleetChanges:
    """The ``changes`` query's answer: what changed since ``request.since``, as it stands now,
    costing what changed; ``too_old`` when the log cannot say (the asker reads it whole)."""
    answer = FleetChanges(
        epoch=epoch,
        version=version,
        now=now,
        grace_seconds=limits.not_ready_grace_seconds,
        max_replicas=limits.max_replicas,
        too_old=True,
    )
    if request.epoch != epoch:
        return answer
    since = log.since(request.since, now=version, limit=MAX_CHANGES_PER_ANSWER)
    if since.too_old:
        return answer
    return answer.model_copy(
        update={
            "too_old": False,
            "classes": [classes[k] for k in sorted(classes)] if since.catalog else None,
            "clusters": compact_clusters([n for n in since.clusters if n in clusters], entry_of),
            "removed_clusters": [n for n in since.clusters if n not in clusters],
            "replicas": book.compact(since.replicas),
            "removed_replicas": [k for k in since.replicas if k not in book],
        }
    )


def compact_clusters(names: Iterable[str], entry_of: EntryOf) -> CompactClusters:
    """The named clusters in the form the Fleet keeps them (``Fleet._entry``)."""
    out = CompactClusters()
    for name in names:
        entry, key, layout = entry_of(name)
        out.entries[name] = entry
        if key:
            out.layouts[key] = layout
    return out


def snapshot_page(
    request: SnapshotPageRequest,
    *,
    epoch: str,
    now: datetime,
    limits: FleetLimits,
    version: int,
    classes: Mapping[str, InferenceClass],
    clusters: Iterable[str],
    entry_of: EntryOf,
    book: FleetBook,
) -> SnapshotPage:
    """The ``snapshot_page`` query's answer: clusters by name after ``request.after`` (the
    first page with the catalog), then replicas by key, a bounded page at a time; each page
    says the version it was read at."""
    page = SnapshotPage(
        epoch=epoch,
        version=version,
        now=now,
        grace_seconds=limits.not_ready_grace_seconds,
        max_replicas=limits.max_replicas,
    )
    if request.part == "replicas":
        rows, after = book.rows_page(request.after, SNAPSHOT_REPLICA_PAGE)
        return page.model_copy(update={"replicas": rows, "next_after": after})
    names = sorted(n for n in clusters if n > request.after)
    chosen = names[:SNAPSHOT_CLUSTER_PAGE]
    return page.model_copy(
        update={
            "classes": [classes[k] for k in sorted(classes)] if not request.after else [],
            "clusters": compact_clusters(chosen, entry_of),
            "next_after": chosen[-1] if len(names) > len(chosen) else "",
        }
    )
