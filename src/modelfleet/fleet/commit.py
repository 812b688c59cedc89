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
from modelfleet.contracts.fleet_copy import Proposal
from modelfleet.contracts.fleet_state import CompactAnswer, shape_key
from modelfleet.contracts.status import ClusterRecord
from modelfleet.fleet.book import FleetBook, replica_key
from modelfleet.fleet.carry import CARRIED_REJECTIONS
from modelfleet.fleet.changes import ChangeLog
from modelfleet.fleet.versions import Versions
from modelfleet.scheduling.index import FleetIndex
from modelfleet.scheduling.verify import NewReplica, shortfall_of


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
    """The clusters the proposal places a replica on, and those of the deployment's replicas
    (the kept and removed ones are among them: ``conflict`` checks they are still booked)."""
    owner = (proposal.namespace, proposal.deployment)
    named = [replica_key(proposal.namespace, n) for n in _named(proposal)]
    return (
        {row[0] for row in proposal.placed}
        | {c for c in map(book.cluster_of, named) if c is not None}
        | book.clusters_of(owner)
    )


def _named(proposal: Proposal) -> list[str]:
    return [*proposal.kept, *(name for name, _ in proposal.victims)]


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
    # Named by key, the kept and removed replicas must be the deployment's booked ones (they
    # are, when its replicas did not change since ``base``: the copy read them from the book).
    for name in _named(proposal):
        key = replica_key(proposal.namespace, name)
        if key not in fleet.book or fleet.book.owner(key) != owner:
            return f"replica {key} is not booked for {proposal.namespace}/{proposal.deployment}"
    changed = log.changed_since(base, touched_clusters(proposal, fleet.book))
    if changed:
        return f"cluster {', '.join(changed[:5])} changed"
    if proposal.placed:
        room = fleet.max_replicas - len(fleet.book) + fleet.book.count_of(owner)
        if len(proposal.kept) + len(proposal.placed) > room:
            return "the Fleet's replica limit was reached"
    return _placed_problem(fleet, proposal)


def _placed_problem(fleet: CommitView, proposal: Proposal) -> str | None:
    """Whether every new replica is new, goes to a cluster that takes new replicas, and fits."""
    kept = set(proposal.kept)
    new_by_cluster: dict[str, list[NewReplica]] = {}
    seen: set[str] = set()
    for row, name in zip(proposal.placed, proposal.placed_names(), strict=True):
        key = replica_key(proposal.namespace, name)
        if key in fleet.book or name in kept or key in seen:
            return f"replica {key} is already placed"
        seen.add(key)
        if row[1] < 0:  # what ModelReplica's validation refused when proposals were whole
            return f"replica {key} has index {row[1]}"
        shape = _shape_of(fleet.book, proposal, row[2])
        if isinstance(shape, str):
            return shape
        new_by_cluster.setdefault(row[0], []).append((name, shape, row[3]))
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
        why = shortfall_of(
            fleet.index_of(cluster), cluster, running, new_by_cluster[cluster], fleet.evaluator
        )
        if why is not None:
            return why
    return None


def _shape_of(book: FleetBook, proposal: Proposal, skey: str) -> ModelReplica | str:
    """The replica standing for a placed row's shape, or why the proposal's shape is unusable:
    missing, not matching its key (the book stores shapes by content key) or invalid."""
    if book.shape(skey) is not None:
        return book.shape_form(skey, {})
    shape = proposal.shapes.get(skey)
    if shape is None:
        return f"shape {skey} of a placed replica is not in the proposal"
    if shape_key(shape) != skey:
        return f"shape {skey} of the proposal is not its content's"
    # Anything a malformed shape raises is a refusal: raised out of the Update handler, it
    # would fail the Fleet's workflow task instead.
    try:
        return book.shape_form(skey, shape)
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        return f"shape {skey} of the proposal is not a valid replica: {err!r}"[:500]


def book_proposal(
    book: FleetBook, versions: Versions, log: ChangeLog, proposal: Proposal, at: datetime
) -> CompactAnswer:
    """Book a proposal ``conflict`` found nothing against, its rows as they are; the answer a
    retry of its request gets (compact: rows of the book's and the proposal's shapes)."""
    owner = (proposal.namespace, proposal.deployment)
    if proposal.placed:
        versions.deployment_changed(owner)
        keys = book.add_rows(owner, proposal.placed, proposal.shapes)
        log.replicas(versions.version, keys)
    versions.placed(owner, short=bool(proposal.summary))
    kept = [book.row(replica_key(proposal.namespace, n)) for n in proposal.kept]
    victims = [(book.row(replica_key(proposal.namespace, n)), why) for n, why in proposal.victims]
    used = {row[2] for row in [*kept, *proposal.placed, *(v for v, _ in victims)]}
    return CompactAnswer(
        at=at,
        namespace=proposal.namespace,
        deployment=proposal.deployment,
        shapes={k: proposal.shapes.get(k) or book.shape(k) or {} for k in sorted(used)},
        kept=kept,
        placed=list(proposal.placed),
        victims=victims,
        conditions=proposal.conditions,
        rejections=dict(sorted(proposal.rejections.items())[:CARRIED_REJECTIONS]),
        summary=proposal.summary,
        version=versions.version,
    )
