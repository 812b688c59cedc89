"""The Fleet's check of a placement proposal (issue 22): a worker computed it on its copy of
the fleet at version ``base``; the Fleet books it only if what it was decided from is unchanged
and its new replicas still fit.

Versions: the deployment's own replicas (its kept, placed and removed ones were decided from
them), the records of every cluster the proposal keeps, places or removes a replica on (spec,
readiness, reported pools, caches, draining) and the class catalog must not have changed after
``base``. Capacity: the pools each new replica lands on are charged again from the Fleet's own
ledger, with everything booked there now, and must take its pods (``scheduling.verify``). Other
deployments' replicas booked on those clusters since ``base`` are therefore no conflict while
there is room (a version per cluster would refuse every second proposal, since spread-then-pack
sends concurrent deployments to the same clusters); when they took the room, the proposal is
refused and recomputed. Commits are Updates, run one at a time, and each books only pods the
ledger has room for at that moment: the ledger can never double-book.

Everything here costs what the proposal touches, never the fleet: a workflow task stays small.
Pure: no I/O, no Temporal calls; the Fleet workflow passes its state in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from modelfleet.api.deployments import ModelReplica
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.contracts.fleet_copy import (
    Proposal,
)
from modelfleet.contracts.fleet_payloads import (
    PlaceResponse,
)
from modelfleet.contracts.status import ClusterRecord
from modelfleet.fleet.book import FleetBook, replica_key
from modelfleet.fleet.changes import ChangeLog
from modelfleet.fleet.versions import Versions
from modelfleet.scheduling.index import FleetIndex
from modelfleet.scheduling.verify import shortfall


@dataclass(frozen=True, slots=True)
class CommitView:
    """What the check reads of the Fleet."""

    epoch: str
    book: FleetBook
    clusters: Mapping[str, ClusterRecord]
    versions: Versions
    log: ChangeLog
    max_replicas: int
    grace: timedelta
    now: datetime
    # One cluster's scheduler index (the Fleet keeps them until the cluster changes).
    index_of: Callable[[str], FleetIndex]
    evaluator: SelectorEvaluator


def touched_clusters(proposal: Proposal, book: FleetBook) -> set[str]:
    response = proposal.response
    owner = (proposal.namespace, proposal.deployment)
    return (
        {r.spec.cluster_name for r in [*response.kept, *response.placed]}
        | {v.replica.spec.cluster_name for v in response.victims}
        | book.clusters_of(owner)
    )


def conflict(fleet: CommitView, proposal: Proposal) -> str | None:
    """Why ``proposal`` cannot be booked as it stands (recompute it on a newer copy), or None."""
    base = proposal.base
    log = fleet.log
    if proposal.epoch != fleet.epoch:
        return "the proposal was made for another Fleet"
    if base < log.start or base > fleet.versions.version:
        return f"version {base} is not one of this Fleet run's (it starts at {log.start})"
    if log.catalog_at > base:
        return "the class catalog changed"
    owner = (proposal.namespace, proposal.deployment)
    if fleet.versions.deployments.get(owner, 0) > base:
        return f"the replicas of {proposal.namespace}/{proposal.deployment} changed"
    response = proposal.response
    changed = log.changed_since(base, touched_clusters(proposal, fleet.book))
    if changed:
        return f"cluster {', '.join(changed[:5])} changed"
    if response.placed:
        room = fleet.max_replicas - len(fleet.book) + fleet.book.count_of(owner)
        if len(response.kept) + len(response.placed) > room:
            return "the Fleet's replica limit was reached"
    return _placed_problem(fleet, proposal)


def _placed_problem(fleet: CommitView, proposal: Proposal) -> str | None:
    """Whether every new replica is new, goes to a cluster that takes new replicas, and fits."""
    response = proposal.response
    kept = {r.name for r in response.kept}
    new_by_cluster: dict[str, list[ModelReplica]] = {}
    for replica in response.placed:
        if (replica.namespace or "", replica.spec.deployment) != (
            proposal.namespace,
            proposal.deployment,
        ):
            return f"replica {replica.name} is not of {proposal.namespace}/{proposal.deployment}"
        key = replica_key(proposal.namespace, replica.name)
        if key in fleet.book or replica.name in kept:
            return f"replica {key} is already placed"
        new_by_cluster.setdefault(replica.spec.cluster_name, []).append(replica)
    owner = (proposal.namespace, proposal.deployment)
    # What the scheduler charged: everyone else's replicas here and this deployment's kept ones
    # (its others are removed by the proposal and free their room).
    kept_keys = {replica_key(proposal.namespace, name) for name in kept}
    for cluster in sorted(new_by_cluster):
        record = fleet.clusters.get(cluster)
        if record is None:
            return f"cluster {cluster} left the fleet"
        since = record.not_ready_since
        if since is not None and fleet.now - since > fleet.grace:
            return f"cluster {cluster} is NotReady past its grace"
        running = [
            fleet.book.charged_form(k)
            for k in fleet.book.keys_on(cluster)
            if fleet.book.owner(k) != owner or k in kept_keys
        ]
        why = shortfall(
            fleet.index_of(cluster), cluster, running, new_by_cluster[cluster], fleet.evaluator
        )
        if why is not None:
            return why
    return None


def book_proposal(
    book: FleetBook, versions: Versions, log: ChangeLog, proposal: Proposal
) -> PlaceResponse:
    """Book a proposal ``conflict`` found nothing against; the answer, at the new version."""
    response = proposal.response
    owner = (proposal.namespace, proposal.deployment)
    if response.placed:
        versions.deployment_changed(owner)
        for replica in response.placed:
            book.add(replica)
        log.replicas(
            versions.version, [replica_key(proposal.namespace, r.name) for r in response.placed]
        )
    versions.placed(owner, short=bool(response.summary))
    return response.model_copy(update={"version": versions.version})
