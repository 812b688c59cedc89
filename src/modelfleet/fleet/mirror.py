"""A worker's copy of the Fleet (issue 22): the classes, cluster records and placed replicas at
one version of the Fleet, kept current by applying what changed since (the Fleet's ``changes``
query), or read whole in pages when the Fleet's change log no longer reaches back that far.
Placement runs here, on any worker, instead of inside the Fleet's workflow task; the Fleet only
checks and books the proposal (``fleet.commit``).

The copy keeps what made the Fleet's own placements fast: the scheduler snapshot (rebuilt only
after a class or cluster changes) and each cluster's charged pools (dropped when a replica on it
changes). Pure: no I/O, no Temporal calls; the activity that owns it does the reading.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from modelfleet.api.classes import InferenceClass
from modelfleet.api.deployments import ModelDeployment
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.contracts.fleet_copy import (
    FleetChanges,
    SnapshotPage,
)
from modelfleet.contracts.fleet_payloads import (
    DryPlaceRequest,
    PlaceRequest,
    PlaceResponse,
)
from modelfleet.contracts.fleet_state import CompactLedger
from modelfleet.contracts.status import ClusterRecord
from modelfleet.contracts.workflow_inputs import FleetLimits
from modelfleet.fleet.book import FleetBook, replica_key
from modelfleet.fleet.placing import PlacingView, Templates, explained_rejections, fleet_place
from modelfleet.scheduling.charging import LedgerCache
from modelfleet.scheduling.fleet_placement import live_snapshot
from modelfleet.scheduling.snapshot import FleetSnapshot


class FleetMirror:
    def __init__(self) -> None:
        self.epoch = ""
        # -1: nothing read yet.
        self.version = -1
        self.templates = Templates()
        # Its own: placements on the copy run in a thread beside the workflows' evaluator.
        self._evaluator = SelectorEvaluator()
        self._reset()

    def _reset(self) -> None:
        self.classes: dict[str, InferenceClass] = {}
        self.clusters: dict[str, ClusterRecord] = {}
        self.book = FleetBook()
        self.now = datetime.fromtimestamp(0, UTC)
        self.grace = timedelta(seconds=FleetLimits().not_ready_grace_seconds)
        self.max_replicas = FleetLimits().max_replicas
        self._ledger_cache = LedgerCache()
        self._snapshot: FleetSnapshot | None = None
        self._snapshot_gone: frozenset[str] = frozenset()

    # --- keeping current -----------------------------------------------------------------------

    def _clock(self, now: datetime, grace_seconds: int, max_replicas: int) -> None:
        self.now = now
        self.grace = timedelta(seconds=grace_seconds)
        self.max_replicas = max_replicas

    def apply(self, changes: FleetChanges) -> None:
        """Bring the copy to ``changes.version`` (asked for since this copy's version)."""
        if changes.too_old:
            raise ValueError("a too-old answer carries no changes: read the fleet whole")
        self._clock(changes.now, changes.grace_seconds, changes.max_replicas)
        if changes.classes is not None:
            self.classes = {c.name: c for c in changes.classes}
            self._snapshot = None
        for name in changes.removed_clusters:
            self.clusters.pop(name, None)
            self._snapshot = None
        for record in changes.clusters.records():
            self.clusters[record.spec.name] = record
            self._snapshot = None
        for key in changes.removed_replicas:
            self._forget(key)
        self._merge(changes.replicas)
        self.version = changes.version

    def _merge(self, rows: CompactLedger) -> None:
        for _, before, now in self.book.merge(rows):
            if before is not None:
                self._ledger_cache.pop(before, None)
            self._ledger_cache.pop(now, None)

    def _forget(self, key: str) -> None:
        removed = self.book.remove(key)
        if removed is not None:
            self._ledger_cache.pop(removed[1], None)

    def start_reading(self, page: SnapshotPage) -> None:
        """Start over from the first page of a whole read: the copy is at ``page.version`` once
        every page is in and the changes since that version are applied (pages read later may
        already hold some of them; applying them again is harmless)."""
        self._reset()
        self.epoch = page.epoch
        self.version = page.version
        self.read(page)

    def read(self, page: SnapshotPage) -> None:
        self._clock(page.now, page.grace_seconds, page.max_replicas)
        if page.classes:
            self.classes = {c.name: c for c in page.classes}
        for record in page.clusters.records():
            self.clusters[record.spec.name] = record
        self._merge(page.replicas)
        if page.clusters.entries or page.classes:
            self._snapshot = None

    # --- placing -------------------------------------------------------------------------------

    def resolve(self, request: PlaceRequest) -> ModelDeployment | None:
        """The request's deployment: sent whole, or named by a ``template_key`` this process
        was sent whole before (None when it was not: the sender resends it whole)."""
        return self.templates.resolve(request)

    def stale(self) -> set[str]:
        """Clusters NotReady past their grace by the Fleet's clock: left out of placement."""
        return {
            name
            for name, rec in self.clusters.items()
            if rec.not_ready_since is not None and self.now - rec.not_ready_since > self.grace
        }

    def _view(self) -> PlacingView:
        return PlacingView(
            book=self.book,
            classes=self.classes,
            clusters=self.clusters,
            limits=FleetLimits(max_replicas=self.max_replicas),
            ledger_cache=self._ledger_cache,
            snapshot=self._live_snapshot,
        )

    def _live_snapshot(self, gone: set[str]) -> FleetSnapshot:
        frozen = frozenset(gone)
        if self._snapshot is None or frozen != self._snapshot_gone:
            self._snapshot = live_snapshot(
                self.classes,
                {name: record.observed() for name, record in self.clusters.items()},
                gone=frozen,
            )
            self._snapshot_gone = frozen
            self._ledger_cache.clear()
        return self._snapshot

    def propose(self, request: PlaceRequest, deployment: ModelDeployment) -> PlaceResponse:
        """Where ``request``'s replicas go on this copy: the proposal the Fleet is asked to
        book. The copy itself does not book it: it learns the outcome from the Fleet."""
        response = fleet_place(
            self._view(), request, deployment, gone=self.stale(), evaluator=self._evaluator
        )
        # The scheduler charged the placed replicas into the pool cache as if booked; they are
        # not booked here until the Fleet says so.
        for replica in response.placed:
            self._ledger_cache.pop(replica.spec.cluster_name, None)
        response.version = self.version
        return response

    def dry_place(self, request: DryPlaceRequest, deployment: ModelDeployment) -> PlaceResponse:
        """Where ``request``'s replicas would go with its replicas in ``without`` not counted;
        books nothing and leaves the pool cache as it was."""
        stale = self.stale()
        view = self._view()
        placement = fleet_place(
            view,
            request,
            deployment,
            gone=stale,
            without=frozenset(replica_key(deployment.namespace, n) for n in request.without),
            dry=True,
            evaluator=self._evaluator,
        )
        return PlaceResponse(
            placed=placement.placed,
            conditions=placement.conditions,
            rejections=explained_rejections(view, deployment, placement, stale, self._evaluator),
            summary=placement.summary,
        )
