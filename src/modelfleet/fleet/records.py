"""How the Fleet's cluster records change on what it is told: a cluster's report (readiness,
gateway, observed pools, queue, when its NotReady grace starts) and a ModelCache's report (where
it is staged), and which clusters still use a class the catalog would lose.

Pure: no I/O, no clock (the time is an argument), no Temporal. The Fleet workflow
(``fleet.workflow``) hands in its records and carries out what follows: marking what changed,
starting a grace timer, signalling the deployments concerned. May import the ``contracts``
models and the standard library.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from modelfleet.contracts.cache_payloads import CacheReport
from modelfleet.contracts.fleet_payloads import ClusterReport
from modelfleet.contracts.status import ClusterRecord


def take_report(record: ClusterRecord, report: ClusterReport, now: datetime) -> datetime | None:
    """Write ``report`` into ``record`` (all but ``draining``, which the Fleet marks first);
    returns when a NotReady grace starts, if this report starts one: the cluster has just left
    Ready, or was never Ready before."""
    was_ready = record.ready
    record.ready = report.ready
    record.reason = report.reason
    record.gateway_address = report.gateway_address
    record.observed_pools = report.observed_pools
    record.queue = report.queue
    record.unreachable_since = report.unreachable_since
    if report.ready:
        record.not_ready_since = None
        return None
    if was_ready or record.not_ready_since is None:
        # An unreachable cluster's grace counts from its first failed probe: failover then
        # has a bound from when it went silent, however many probes NotReady takes.
        record.not_ready_since = min(now, report.unreachable_since or now)
        return record.not_ready_since
    return None


def take_cache_report(records: Mapping[str, ClusterRecord], report: CacheReport) -> list[str]:
    """Write where the cache stands into every cluster's record (left out: not staged there);
    returns the clusters whose record changed, in the records' order."""
    key = f"{report.namespace}/{report.name}"
    changed = []
    for name, record in records.items():
        state = report.clusters.get(name)
        if record.caches.get(key) == state:
            continue
        if state is None:
            del record.caches[key]
        else:
            record.caches[key] = state
        changed.append(name)
    return changed


def class_users(records: Iterable[ClusterRecord], name: str) -> list[str]:
    """The clusters with a node pool of class ``name``, sorted: while any is left, the class
    cannot be removed."""
    return sorted(
        c.spec.name for c in records if any(p.class_name == name for p in c.spec.spec.node_pools)
    )
