"""The Fleet workflow (ID ``fleet``): the one owner of the class catalog, every cluster's published
capacity and readiness, and the ledger of placed replicas.

Placement is computed outside it (issue 22): each worker keeps a copy of the fleet
(:mod:`modelfleet.fleet.mirror`), current through the ``changes`` query (what changed since a
version, from a capped change log, :mod:`modelfleet.fleet.changes`) or read whole through
``snapshot_page``; the ``fleet.place`` activity runs the scheduler on it and sends the proposal
to the ``commit`` Update. The Fleet books a proposal only if nothing it touches changed since the
version it was computed at, and its pools still have room (:mod:`modelfleet.fleet.commit`), in
time proportional to what it touches; otherwise the activity recomputes on a newer copy. Commits
are Updates, so they are serialised here and can never double-book a pool.

State stays small and bounded (issue 11): replicas live in a :class:`FleetBook` whose compact
rows are what continue-as-new carries; clusters travel as spec-without-defaults records;
remembered placement answers are kept only for the window in which a retried ``fleet.place``
can arrive; decisions are capped. The Fleet continues-as-new on history length and bytes
(``FleetLimits``), and refuses placements past ``max_replicas`` with a clear summary instead of
growing its state towards Temporal's 2 MiB payload limit. The scheduler snapshot (and the index
cached on it) is kept by the workers' copies, not here. It runs on its own task queue. See
docs/fleet.md.

The pure parts live beside it: the book (:mod:`modelfleet.fleet.book`), what continue-as-new
carries and the remembered answers (:mod:`modelfleet.fleet.carry`,
:mod:`modelfleet.contracts.fleet_state`), how reports change cluster records
(:mod:`modelfleet.fleet.records`), what the workers' copies read (:mod:`modelfleet.fleet.reading`)
and placement (:mod:`modelfleet.fleet.placing`, :mod:`modelfleet.scheduling.fleet_placement`).

Deterministic orchestration only: no I/O, clocks or randomness outside ``workflow.*``; the
checks it runs are pure functions.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import VersioningBehavior
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from modelfleet.api.classes import InferenceClass
    from modelfleet.api.clusters import InferenceCluster
    from modelfleet.api.manifest_errors import InvalidResourceError
    from modelfleet.api.rules import validate
    from modelfleet.contracts import search
    from modelfleet.contracts.cache_payloads import CacheReport
    from modelfleet.contracts.fleet_copy import (
        ChangesRequest,
        CommitAnswer,
        FleetChanges,
        Proposal,
        SnapshotPage,
        SnapshotPageRequest,
    )
    from modelfleet.contracts.fleet_payloads import (
        ClusterReport,
        FleetStats,
        PlacementCheck,
        ReleaseRequest,
        ReplicaPage,
        ReplicaPageRequest,
    )
    from modelfleet.contracts.fleet_state import (
        ClusterEntry,
        cluster_entry,
    )
    from modelfleet.contracts.ids import deployment_id
    from modelfleet.contracts.status import ClusterRecord, Decision, DecisionQuery, FleetView
    from modelfleet.contracts.versioning import declared
    from modelfleet.contracts.workflow_inputs import FleetInput, FleetLimits, FleetState
    from modelfleet.fleet.book import FleetBook, replica_key
    from modelfleet.fleet.carry import Answered, LazyRecords, carried_state, recall, remember
    from modelfleet.fleet.changes import ChangeLog
    from modelfleet.fleet.commit import CommitView, book_proposal, conflict
    from modelfleet.fleet.placing import EVALUATOR, decision_of
    from modelfleet.fleet.reading import changes_since, snapshot_page
    from modelfleet.fleet.records import class_users, take_cache_report, take_report
    from modelfleet.fleet.versions import Versions
    from modelfleet.scheduling.fleet_placement import live_snapshot
    from modelfleet.scheduling.index import FleetIndex, fleet_index
    from modelfleet.scheduling.snapshot import FleetSnapshot

# Bounded memory: a long-lived workflow must not grow without limit.
MAX_DECISIONS = 500
# A cluster NotReady for longer than this loses its replicas to re-placement (the default of
# ``FleetLimits.not_ready_grace_seconds``; each Fleet uses its own limits').
NOT_READY_GRACE = timedelta(seconds=FleetLimits().not_ready_grace_seconds)


@workflow.defn(name="Fleet", versioning_behavior=declared(VersioningBehavior.AUTO_UPGRADE))
class FleetWorkflow:
    @workflow.init
    def __init__(self, arg: FleetInput) -> None:
        state = arg.state or FleetState()
        self._limits = arg.limits
        self._grace = timedelta(seconds=arg.limits.not_ready_grace_seconds)
        self._timers: set[asyncio.Task[None]] = set()
        # Held by the handlers that await (signals) while they change cluster records, so that
        # another report cannot interleave and be overwritten by an older one.
        self._lock = asyncio.Lock()
        self._classes: dict[str, InferenceClass] = dict(state.classes)
        self._class_created: dict[str, datetime] = dict(state.class_created)
        self._clusters = LazyRecords(state.cluster_entries, state.layouts)
        # Each cluster's compact form, made when it changes rather than all at continue-as-new;
        # the carried ones as they came (making 1,000 again at the next continue-as-new took
        # seconds in that one workflow task on a busy machine).
        self._entries: dict[str, tuple[ClusterEntry, str, list[Any]]] = {
            name: (entry, entry.layout, state.layouts.get(entry.layout, []))
            for name, entry in state.cluster_entries.items()
        }
        self._book = (
            FleetBook.from_compact(state.ledger) if state.ledger is not None else FleetBook()
        )
        self._decisions: deque[Decision] = deque(state.decisions, maxlen=MAX_DECISIONS)
        # request ID -> (when answered, the answer). Carried answers stay compact until a retry
        # asks for one: expanding 32 answers of 100 replicas each at start-up costs seconds,
        # past the workflow task's deadlock timeout.
        self._answered: Answered = {rid: (a.at, a) for rid, a in state.remembered.items()}
        # One cluster's scheduler index, what a commit's capacity check charges; dropped when
        # the cluster or the catalog changes. Bounded by the clusters.
        self._indexes: dict[str, tuple[FleetSnapshot, FleetIndex]] = {}
        # Change versions (memory only): a PlacementCheck older than this run's start is
        # answered "changed", so nothing needs carrying.
        self._versions = Versions(state.version)
        # What changed at which version, for the workers' copies (capped; memory only: a copy
        # older than this run reads the fleet whole). Its start is the carried version: a copy
        # at that version is exactly this run's starting state.
        self._log = ChangeLog(start=state.version)

    @workflow.run
    async def run(self, arg: FleetInput) -> None:
        # Graces still running when the previous run continued-as-new (its timers died with
        # it); one already over is covered by the new run's version horizon.
        for name in sorted(self._clusters):
            since = self._clusters.not_ready_since(name)
            if since is not None and workflow.now() - since <= self._grace:
                self._start_grace_timer(name, since)
        workflow.upsert_search_attributes([search.KIND.value_set("Fleet")])
        await workflow.wait_condition(self._should_continue_as_new)
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(FleetInput(state=self._state(), limits=self._limits))

    def _should_continue_as_new(self) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() >= self._limits.max_history_events
            or info.get_current_history_size() >= self._limits.max_history_bytes
        )

    def _state(self) -> FleetState:
        return carried_state(
            classes=self._classes,
            class_created=self._class_created,
            entries={name: self._entry(name) for name in sorted(self._clusters)},
            book=self._book,
            decisions=self._decisions,
            answered=self._answered,
            version=self._versions.version,
            now=workflow.now(),
        )

    def _epoch(self) -> str:
        # The same across continue-as-new; another Fleet under the same ID has another.
        return workflow.info().first_execution_run_id

    # --- change tracking -------------------------------------------------------------------

    def _entry(self, name: str) -> tuple[ClusterEntry, str, list[Any]]:
        entry = self._entries.get(name)
        if entry is None:
            entry = self._entries[name] = cluster_entry(self._clusters[name])
        return entry

    def _cluster_changed(self, name: str) -> None:
        self._versions.cluster_changed(name)
        self._log.cluster(self._versions.version, name)
        self._entries.pop(name, None)
        self._indexes.pop(name, None)

    def _catalog_changed(self) -> None:
        self._versions.catalog_changed()
        self._log.catalog(self._versions.version)
        self._indexes.clear()

    def _index_of(self, name: str) -> FleetIndex:
        """``name``'s scheduler index alone (one cluster: costs its pools, not the fleet)."""
        kept = self._indexes.get(name)
        if kept is None:
            snapshot = live_snapshot(self._classes, {name: self._clusters[name].observed()})
            kept = self._indexes[name] = (snapshot, fleet_index(snapshot))
        return kept[1]

    # --- catalog ---------------------------------------------------------------------------

    @workflow.update
    def put_class(self, cls: InferenceClass) -> None:
        self._class_created.setdefault(cls.name, workflow.now())
        if self._classes.get(cls.name) != cls:
            self._classes[cls.name] = cls
            self._catalog_changed()

    @put_class.validator
    def _check_class(self, cls: InferenceClass) -> None:
        errors = validate(cls)
        if errors:
            raise InvalidResourceError(cls.ref, errors)

    @workflow.query
    def classes_named(self, names: list[str]) -> list[InferenceClass]:
        """The named classes the catalog holds (missing names are left out)."""
        return [self._classes[n] for n in names if n in self._classes]

    @workflow.update
    def remove_class(self, name: str) -> None:
        users = class_users(self._clusters.values(), name)
        if users:
            raise ApplicationError(
                f"InferenceClass {name} is used by clusters: {', '.join(users)}",
                non_retryable=True,
            )
        self._class_created.pop(name, None)
        if self._classes.pop(name, None) is not None:
            self._catalog_changed()

    # --- clusters --------------------------------------------------------------------------

    @workflow.update
    def put_cluster(self, cluster: InferenceCluster) -> None:
        record = self._clusters.get(cluster.name)
        if record is None:
            self._clusters[cluster.name] = ClusterRecord(spec=cluster)
        elif record.spec == cluster:
            return
        else:
            record.spec = cluster
        self._cluster_changed(cluster.name)

    @workflow.update
    async def report_cluster(self, report: ClusterReport) -> None:
        async with self._lock:
            await self._report_cluster(report)

    async def _report_cluster(self, report: ClusterReport) -> None:
        record = self._clusters.get(report.name)
        if record is None:
            return  # removed meanwhile; the report is stale
        before = record.observed()
        if report.draining and not record.draining:
            record.draining = True
            self._cluster_changed(report.name)
            await self._nudge_deployments_on(report.name)
        self._entries.pop(report.name, None)
        grace_from = take_report(record, report, workflow.now())
        if grace_from is not None:
            self._start_grace_timer(report.name, grace_from)
        if record.observed() != before:
            self._cluster_changed(report.name)

    def _start_grace_timer(self, name: str, since: datetime) -> None:
        task = asyncio.create_task(self._end_of_grace(name, since))
        self._timers.add(task)
        task.add_done_callback(self._timers.discard)

    async def _end_of_grace(self, name: str, since: datetime) -> None:
        """At the end of ``name``'s grace, if it has stayed NotReady since ``since``, mark it
        changed: the deployments on it find their placement no longer current at their next
        resync and are re-placed (placement leaves the cluster out from then on)."""
        await workflow.sleep(since + self._grace + timedelta(seconds=1) - workflow.now())
        record = self._clusters.get(name)
        if record is not None and record.not_ready_since == since:
            self._cluster_changed(name)
            await self._nudge_deployments_on(name)

    async def _nudge_deployments_on(self, cluster: str) -> None:
        """Ask every deployment with a replica on ``cluster`` to reconcile now."""
        owners = sorted(self._book.owners_on(cluster))
        for namespace, name in owners:
            handle = workflow.get_external_workflow_handle(deployment_id(namespace, name))
            # A deployment that is gone has nothing to move.
            with contextlib.suppress(ApplicationError):
                await handle.signal("resync")

    @workflow.update
    async def report_cache(self, report: CacheReport) -> None:
        """Where a ModelCache stands on each cluster (a cluster left out: not staged there).
        New placements of deployments referencing it go only where it is Ready; on a change,
        deployments of its namespace that were short are told to place again (so they land as
        soon as it is Ready, and meanwhile say how it stands). The cache workflow reports only
        changes, in 10% steps."""
        async with self._lock:
            await self._report_cache(report)

    async def _report_cache(self, report: CacheReport) -> None:
        changed = take_cache_report(self._clusters, report)
        for name in changed:
            self._cluster_changed(name)
        if changed:
            for namespace, deployment in sorted(self._versions.short):
                if namespace != report.namespace:
                    continue
                handle = workflow.get_external_workflow_handle(deployment_id(namespace, deployment))
                with contextlib.suppress(ApplicationError):
                    await handle.signal("resync")

    @workflow.query
    def clusters(self) -> list[ClusterRecord]:
        """Every cluster record (no replicas): what a ModelCache needs to choose its clusters."""
        return [self._clusters[k] for k in sorted(self._clusters)]

    @workflow.query
    def replicas_on(self, cluster: str) -> list[str]:
        return sorted(self._book.keys_on(cluster))

    @workflow.query
    def replicas_by_pool(self, cluster: str) -> dict[str, list[str]]:
        return self._book.pools_on(cluster)

    @workflow.update
    def remove_cluster(self, name: str) -> list[str]:
        """Forget a cluster; returns the replicas that were still placed on it."""
        if self._clusters.pop(name, None) is not None:
            self._cluster_changed(name)
        return sorted(self._book.keys_on(name))

    # --- placement -------------------------------------------------------------------------

    @workflow.update
    def commit(self, proposal: Proposal) -> CommitAnswer:
        """Book a placement a worker computed on its copy of the fleet (``fleet.place``), if
        nothing it touches changed since the copy's version and its pools have room; else say
        what changed (the worker recomputes on a newer copy). A request ID booked before is
        answered from memory, so a retried activity places nothing twice."""
        remembered = recall(self._answered, proposal.request_id)
        if remembered is not None:
            return CommitAnswer(committed=True, version=remembered.version, remembered=remembered)
        now = workflow.now()
        why = conflict(
            CommitView(
                epoch=self._epoch(),
                book=self._book,
                clusters=self._clusters,
                versions=self._versions,
                log=self._log,
                max_replicas=self._limits.max_replicas,
                grace=self._grace,
                now=now,
                index_of=self._index_of,
                evaluator=EVALUATOR,
            ),
            proposal,
        )
        if why is not None:
            return CommitAnswer(committed=False, version=self._versions.version, conflict=why)
        answer = book_proposal(self._book, self._versions, self._log, proposal, now)
        remember(self._answered, proposal.request_id, answer, now)
        self._decisions.append(decision_of(now, proposal))
        return CommitAnswer(committed=True, version=self._versions.version)

    @workflow.query
    def changes(self, request: ChangesRequest) -> FleetChanges:
        """What changed since ``request.since``, as it stands now: costs what changed. Too old
        (another Fleet, before this run, past the capped log or too many changes): the asker
        reads the fleet whole with ``snapshot_page``."""
        return changes_since(
            request,
            epoch=self._epoch(),
            now=workflow.now(),
            limits=self._limits,
            version=self._versions.version,
            log=self._log,
            classes=self._classes,
            clusters=self._clusters,
            entry_of=self._entry,
            book=self._book,
        )

    @workflow.query
    def snapshot_page(self, request: SnapshotPageRequest) -> SnapshotPage:
        """The whole fleet a bounded page at a time: clusters by name (the first page with the
        catalog), then replicas by key. Each page says the version it was read at."""
        return snapshot_page(
            request,
            epoch=self._epoch(),
            now=workflow.now(),
            limits=self._limits,
            version=self._versions.version,
            classes=self._classes,
            clusters=self._clusters,
            entry_of=self._entry,
            book=self._book,
        )

    @workflow.update
    def release(self, request: ReleaseRequest) -> int:
        released = 0
        for name in request.replicas:
            removed = self._book.remove(replica_key(request.namespace, name))
            if removed is not None:
                released += 1
                owner, cluster = removed
                self._versions.released(owner, cluster)
                self._log.replicas(self._versions.version, [replica_key(request.namespace, name)])
        return released

    @workflow.query
    def placement_current(self, check: PlacementCheck) -> bool:
        """Whether nothing that could change this deployment's placement happened since
        ``check.version``: its replicas, the clusters they are on and the class catalog are
        unchanged, and it was not short of capacity (then any change might make room)."""
        owner = (check.namespace, check.deployment)
        return self._versions.current(owner, check.version, self._book.clusters_of(owner))

    # --- queries ---------------------------------------------------------------------------

    @workflow.query
    def view(self) -> FleetView:
        """Classes, clusters and every placed replica in one answer: ~1 KB a replica, so past
        a few thousand replicas too large for one query. Kept for older CLIs; ``clusters``,
        ``cluster`` and ``replica_page`` answer the same in bounded pieces."""
        return FleetView(
            classes=sorted(self._classes),
            clusters=[self._clusters[k] for k in sorted(self._clusters)],
            replicas=[self._book.replica(k) for k in self._book.sorted_keys()],
        )

    @workflow.query
    def cluster(self, name: str) -> ClusterRecord | None:
        """One cluster's record (what an endpoint publication needs), or None."""
        return self._clusters.get(name)

    @workflow.query
    def replica_page(self, request: ReplicaPageRequest) -> ReplicaPage:
        """Placed replicas in key order, a bounded page at a time (``ReplicaPageRequest``)."""
        return self._book.page(request)

    @workflow.query
    def stats(self) -> FleetStats:
        state = self._state()
        return FleetStats(
            classes=len(self._classes),
            clusters=len(self._clusters),
            replicas=len(self._book),
            version=self._versions.version,
            state_bytes=len(state.model_dump_json(by_alias=True)),
            history_events=workflow.info().get_current_history_length(),
        )

    @workflow.query
    def classes(self) -> list[InferenceClass]:
        """The catalog's classes in full (``modelfleet get classes -o yaml``). A query only:
        adding it changes no history."""
        return [self._classes[k] for k in sorted(self._classes)]

    @workflow.query
    def class_created(self) -> dict[str, datetime]:
        """When each class was first applied, by name (``get classes``' AGE). A query only."""
        return dict(self._class_created)

    @workflow.query
    def decisions(self, query: DecisionQuery) -> list[Decision]:
        mine = [
            d
            for d in self._decisions
            if d.namespace == query.namespace and d.deployment == query.deployment
        ]
        return mine[-query.limit :]
