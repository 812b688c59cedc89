"""Placement as the Fleet means it: the scheduler run over a book, clusters and caches of the
fleet for one request (booking nothing), and the reasons a dry placement gives. Pure: a worker's
copy of the fleet (:mod:`modelfleet.fleet.mirror`) passes its state in (:class:`PlacingView`);
the Fleet workflow books what comes back after its commit check (:mod:`modelfleet.fleet.commit`).
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime

from modelfleet.api.classes import InferenceClass
from modelfleet.api.deployments import ModelDeployment, ModelReplica
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.contracts.fleet_copy import Proposal
from modelfleet.contracts.fleet_payloads import (
    PlaceRequest,
    PlaceResponse,
    ReplicaRemoval,
    template_key,
)
from modelfleet.contracts.status import ClusterRecord, Decision
from modelfleet.contracts.workflow_inputs import FleetLimits
from modelfleet.fleet.book import FleetBook, replica_key
from modelfleet.rendering.cluster_settings import cluster_facts, has_own_settings
from modelfleet.scheduling.charging import LedgerCache
from modelfleet.scheduling.fleet_placement import place_in_fleet
from modelfleet.scheduling.selector_errors import selector_errors
from modelfleet.scheduling.snapshot import FleetSnapshot

# Deployments a worker's copy of the fleet keeps by ``template_key`` for placement requests that
# name one instead of sending it whole (memory only, per process: a request naming one this
# process does not hold is answered ``unknown_template`` and resent whole). ~1-2 KB each.
MAX_TEMPLATES = 256
# Reported for an avoided cluster when the request does not say why.
AVOIDED_WITHOUT_REASON = "a replica failed here recently"
# One evaluator for every Fleet workflow in the worker process (their commits' capacity checks):
# compiled selectors and their results per device are pure, so sharing them across workflow runs
# is safe and saves recompiling CEL (lark parsing). A worker's copy of the fleet has its own.
EVALUATOR = SelectorEvaluator()


class Templates:
    """The deployments placement requests may name by ``template_key``, most recently used last,
    at most :data:`MAX_TEMPLATES`."""

    def __init__(self) -> None:
        self._kept: dict[str, ModelDeployment] = {}

    def resolve(self, request: PlaceRequest) -> ModelDeployment | None:
        """The request's deployment: sent whole (then kept by its ``template_key`` for later
        requests that name it), or named by a key kept earlier; None when not kept."""
        if request.deployment is not None:
            key = template_key(request.deployment)
            self._kept.pop(key, None)
            self._kept[key] = request.deployment
            while len(self._kept) > MAX_TEMPLATES:
                self._kept.pop(next(iter(self._kept)))
            return request.deployment
        deployment = self._kept.pop(request.template, None)
        if deployment is not None:
            self._kept[request.template] = deployment  # most recently used last
        return deployment


@dataclass(frozen=True)
class PlacingView:
    """What a placement reads of the Fleet. ``snapshot`` gives the scheduler's view for the
    clusters left out as ``gone`` (the Fleet rebuilds it only after a change, and then clears
    ``ledger_cache``); it is asked for at the point the scheduler runs."""

    book: FleetBook
    classes: Mapping[str, InferenceClass]
    clusters: Mapping[str, ClusterRecord]
    limits: FleetLimits
    ledger_cache: LedgerCache
    snapshot: Callable[[set[str]], FleetSnapshot]


def fleet_place(
    fleet: PlacingView,
    request: PlaceRequest,
    deployment: ModelDeployment,
    *,
    gone: set[str],
    without: frozenset[str] = frozenset(),
    dry: bool = False,
    evaluator: SelectorEvaluator = EVALUATOR,
) -> PlaceResponse:
    """The scheduler's answer for ``request``, booking nothing; the caller books what it
    places unless ``dry`` (the scheduler keeps the charged-pool cache as if booked, so a
    dry placement works on a copy). ``without`` (book keys of this deployment's replicas)
    are left out as if released: a dry placement's question."""
    every = fleet.book.replicas_of((deployment.namespace, deployment.name))
    desired = request.desired
    room = fleet.limits.max_replicas - len(fleet.book) + len(every)
    if desired > room:
        # The size guard: past it the continue-as-new input would approach 2 MiB.
        desired = max(room, 0)
    by_cluster: Mapping[str, Collection[ModelReplica]] = fleet.book.by_cluster
    ledger_cache = fleet.ledger_cache
    if without:
        ours = [r for r in every if replica_key(r.namespace, r.name) not in without]
        # Clusters holding a left-out replica are charged without it, and never from or
        # into the Fleet's cache: a private copy of the rest keeps this call read-only.
        touched = {
            r.spec.cluster_name for r in every if replica_key(r.namespace, r.name) in without
        }
        by_cluster = ChainMap(
            {
                c: [fleet.book.replica(k) for k in fleet.book.keys_on(c) if k not in without]
                for c in touched
            },
            fleet.book.by_cluster,  # type: ignore[arg-type]
        )
        ledger_cache = LedgerCache(
            {c: p for c, p in fleet.ledger_cache.items() if c not in touched}
        )
    else:
        ours = every
        if dry:
            # Entries are replaced, never changed in place: a shallow copy is private.
            ledger_cache = LedgerCache(fleet.ledger_cache)
    placement = place_in_fleet(
        deployment,
        desired=desired,
        classes=fleet.classes,
        clusters={},
        replicas=(),
        gone=gone,
        avoid={
            c: request.avoid_reasons.get(c, AVOIDED_WITHOUT_REASON) for c in request.avoid_clusters
        },
        evaluator=evaluator,
        snapshot=fleet.snapshot(gone),
        indexed=(ours, by_cluster),
        ledger_cache=ledger_cache,
        retired=request.retired,
        standing=request.standing,
        borrow=request.borrow,
    )
    on = {r.spec.cluster_name for r in [*placement.kept, *placement.placed]}
    summary = placement.summary
    if desired < request.desired:
        summary = (
            f"the Fleet holds {len(fleet.book)} replicas, its limit "
            f"({fleet.limits.max_replicas}); shard the fleet to place more"
        )
        placement = placement.model_copy(update={"summary": summary})
    return PlaceResponse(
        facts={
            name: cluster_facts(fleet.clusters[name].spec)
            for name in sorted(on)
            if name in fleet.clusters and has_own_settings(fleet.clusters[name].spec)
        },
        kept=placement.kept,
        placed=placement.placed,
        victims=[
            ReplicaRemoval(replica=v.replica, reason=v.message or v.reason.value)
            for v in placement.victims
        ],
        conditions=placement.conditions,
        rejections=placement.rejections,
        summary=placement.summary,
        borrowed=placement.borrowed,
    )


def explained_rejections(
    fleet: PlacingView,
    deployment: ModelDeployment,
    placement: PlaceResponse,
    stale: set[str],
    evaluator: SelectorEvaluator = EVALUATOR,
) -> dict[str, str]:
    """A dry placement's rejections; when nothing was placed, with the clusters whose selectors
    fail at evaluation said so (such a selector looks like one that does not match)."""
    rejections = dict(placement.rejections)
    if not placement.placed:
        specs = {n: r.spec for n, r in fleet.clusters.items() if n not in stale}
        for name, why in selector_errors(deployment, fleet.classes, specs, evaluator).items():
            rejections[name] = f"{rejections[name]}; {why}" if name in rejections else why
    return rejections


def decision_of(at: datetime, proposal: Proposal) -> Decision:
    """The decision log's entry for a proposal booked ``at``."""
    borrowed = proposal.borrowed
    return Decision(
        at=at,
        namespace=proposal.namespace,
        deployment=proposal.deployment,
        desired=proposal.desired,
        placed=[
            f"{name}@{row[0]}" + (f" (borrowed: {borrowed[name]})" if name in borrowed else "")
            for row, name in zip(proposal.placed, proposal.placed_names(), strict=True)
        ],
        victims=[f"{name}: {why}" for name, why in proposal.victims],
        summary=proposal.summary,
        rejections=proposal.rejections,
    )
