"""The Fleet workflow (ID ``fleet``): the one owner of the class catalog, every cluster's published
capacity and readiness, and the ledger of placed replicas. Placement and release are Updates, so
two deployments placing at once are serialised here and can never double-book a pool.

State stays small and bounded (issue 11): replicas live in a :class:`FleetBook` whose compact
rows are what continue-as-new carries; clusters travel as spec-without-defaults records;
remembered placement answers are kept only for the window in which a retried ``fleet.place``
can arrive; decisions are capped. The Fleet continues-as-new on history length and bytes
(``FleetLimits``), and refuses placements past ``max_replicas`` with a clear summary instead of
growing its state towards Temporal's 2 MiB payload limit. The scheduler snapshot (and the index
cached on it) is kept between placements and dropped only when a class, a cluster's spec or a
scheduling-relevant part of its report changes. It runs on its own task queue. See docs/fleet.md.

One piece on purpose (over 500 lines): a workflow's handlers are methods of one class sharing
its state; the pure parts (the book, compact state, placement) already live in
:mod:`modelfleet.fleet.book`, :mod:`modelfleet.contracts.fleet_state` and
:mod:`modelfleet.scheduling.fleet_placement`.

Deterministic orchestration only: no I/O, clocks or randomness outside ``workflow.*``; the
scheduler it runs is a pure function.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
from collections import ChainMap, deque
from collections.abc import Collection, Mapping
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import VersioningBehavior
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from modelfleet.api.classes import InferenceClass
    from modelfleet.api.clusters import InferenceCluster
    from modelfleet.api.deployments import ModelDeployment, ModelReplica
    from modelfleet.api.manifest_errors import InvalidResourceError
    from modelfleet.api.rules import validate
    from modelfleet.cel.evaluator import SelectorEvaluator
    from modelfleet.contracts import search
    from modelfleet.contracts.cache_payloads import CacheReport
    from modelfleet.contracts.fleet_payloads import (
        ClusterReport,
        DryPlaceRequest,
        FleetStats,
        PlacementCheck,
        PlaceRequest,
        PlaceResponse,
        ReleaseRequest,
        ReplicaPage,
        ReplicaPageRequest,
        ReplicaRemoval,
        template_key,
    )
    from modelfleet.contracts.fleet_state import (
        ClusterEntry,
        CompactAnswer,
        answer_from_compact,
        cluster_entry,
        cluster_record,
        compact_answer,
    )
    from modelfleet.contracts.ids import deployment_id
    from modelfleet.contracts.status import ClusterRecord, Decision, DecisionQuery, FleetView
    from modelfleet.contracts.workflow_inputs import (
        FleetInput,
        FleetLimits,
        FleetState,
    )
    from modelfleet.fleet.book import FleetBook, replica_key
    from modelfleet.rendering.cluster_settings import cluster_facts, has_own_settings
    from modelfleet.scheduling.fill import LedgerCache
    from modelfleet.scheduling.fleet_placement import (
        live_snapshot,
        place_in_fleet,
    )
    from modelfleet.scheduling.selector_errors import selector_errors
    from modelfleet.scheduling.snapshot import FleetSnapshot

# Bounded memory: a long-lived workflow must not grow without limit.
MAX_DECISIONS = 500
MAX_REMEMBERED_REQUESTS = 200
# Carried across continue-as-new: the latest decisions (rejections capped, one per cluster at
# 1,000 clusters would be ~60 KB each) and the answers a retried ``fleet.place`` can still ask
# for. The activity's attempts are 30 s apart at most (timeout) plus a 10 s backoff, so an
# answer older than the window has been received or will be re-asked as a fresh placement.
CARRIED_DECISIONS = 50
CARRIED_REJECTIONS = 20
CARRIED_ANSWERS = 32
RETRY_WINDOW = timedelta(minutes=15)
# A cluster NotReady for longer than this loses its replicas to re-placement (the default of
# ``FleetLimits.not_ready_grace_seconds``; each Fleet uses its own limits').
NOT_READY_GRACE = timedelta(seconds=FleetLimits().not_ready_grace_seconds)
# Deployments kept by ``template_key`` for placement requests that name one instead of sending
# it whole (memory only, never carried into continue-as-new: a request naming one the new run
# does not hold is answered ``unknown_template`` and resent whole). ~1-2 KB each.
MAX_TEMPLATES = 256
# Reported for an avoided cluster when the request does not say why.
AVOIDED_WITHOUT_REASON = "a replica failed here recently"
# One evaluator for every placement in the worker process: compiled selectors and their results
# per device are pure, so sharing them across workflow runs is safe and saves recompiling CEL
# (lark parsing) on every placement.
_EVALUATOR = SelectorEvaluator()


@workflow.defn(name="Fleet", versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
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
        self._clusters: dict[str, ClusterRecord] = {
            name: cluster_record(entry, state.layouts)
            for name, entry in state.cluster_entries.items()
        }
        # Each cluster's compact form, made when it changes rather than all at continue-as-new.
        self._entries: dict[str, tuple[ClusterEntry, str, list[Any]]] = {}
        self._ledger_cache: LedgerCache = LedgerCache()
        self._book = (
            FleetBook.from_compact(state.ledger) if state.ledger is not None else FleetBook()
        )
        self._decisions: deque[Decision] = deque(state.decisions, maxlen=MAX_DECISIONS)
        # request ID -> (when answered, the answer). Carried answers stay compact until a retry
        # asks for one: expanding 32 answers of 100 replicas each at start-up costs seconds,
        # past the workflow task's deadlock timeout.
        self._answered: dict[str, tuple[datetime, PlaceResponse | CompactAnswer]] = {
            rid: (a.at, a) for rid, a in state.remembered.items()
        }
        self._snapshot: FleetSnapshot | None = None
        self._snapshot_gone: frozenset[str] = frozenset()
        # Change versions (memory only): a PlacementCheck older than this run's start is
        # answered "changed", so nothing needs carrying.
        self._version = state.version + 1
        self._horizon = self._version
        self._catalog_version = self._version
        self._cluster_version: dict[str, int] = {}
        self._deployment_version: dict[tuple[str, str], int] = {}
        self._short: set[tuple[str, str]] = set()
        self._templates: dict[str, ModelDeployment] = {}

    @workflow.run
    async def run(self, arg: FleetInput) -> None:
        # Graces still running when the previous run continued-as-new (its timers died with
        # it); one already over is covered by the new run's version horizon.
        for name in sorted(self._clusters):
            since = self._clusters[name].not_ready_since
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
        """The compact state (see ``contracts.fleet_state``)."""
        now = workflow.now()
        recent = [
            (rid, at, response)
            for rid, (at, response) in self._answered.items()
            if now - at <= RETRY_WINDOW
        ][-CARRIED_ANSWERS:]
        decisions = list(self._decisions)[-CARRIED_DECISIONS:]
        entries = {name: self._entry(name) for name in sorted(self._clusters)}
        return FleetState(
            classes=self._classes,
            cluster_entries={name: entry for name, (entry, _, _) in entries.items()},
            layouts={key: layout for _, key, layout in entries.values()},
            ledger=self._book.compact(),
            decisions=[_trimmed(d) for d in decisions],
            remembered={
                rid: response
                if isinstance(response, CompactAnswer)
                else compact_answer(response, at, rejections=CARRIED_REJECTIONS)
                for rid, at, response in recent
            },
            version=self._version,
        )

    # --- change tracking -------------------------------------------------------------------

    def _bump(self) -> int:
        self._version += 1
        return self._version

    def _entry(self, name: str) -> tuple[ClusterEntry, str, list[Any]]:
        entry = self._entries.get(name)
        if entry is None:
            entry = self._entries[name] = cluster_entry(self._clusters[name])
        return entry

    def _cluster_changed(self, name: str) -> None:
        self._cluster_version[name] = self._bump()
        self._entries.pop(name, None)
        self._snapshot = None

    def _catalog_changed(self) -> None:
        self._catalog_version = self._bump()
        self._snapshot = None

    def _live_snapshot(self, gone: set[str]) -> FleetSnapshot:
        """The scheduler's view, rebuilt only after a change (or a change of ``gone``)."""
        frozen = frozenset(gone)
        if self._snapshot is None or frozen != self._snapshot_gone:
            self._snapshot = live_snapshot(
                self._classes,
                {name: record.observed() for name, record in self._clusters.items()},
                gone=frozen,
            )
            self._snapshot_gone = frozen
            self._ledger_cache.clear()
        return self._snapshot

    # --- catalog ---------------------------------------------------------------------------

    @workflow.update
    def put_class(self, cls: InferenceClass) -> None:
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
        users = sorted(
            c.spec.name
            for c in self._clusters.values()
            if any(p.class_name == name for p in c.spec.spec.node_pools)
        )
        if users:
            raise ApplicationError(
                f"InferenceClass {name} is used by clusters: {', '.join(users)}",
                non_retryable=True,
            )
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
        was_ready = record.ready
        record.ready = report.ready
        record.reason = report.reason
        record.gateway_address = report.gateway_address
        record.observed_pools = report.observed_pools
        if report.ready:
            record.not_ready_since = None
        elif was_ready or record.not_ready_since is None:
            record.not_ready_since = workflow.now()
            self._start_grace_timer(report.name, record.not_ready_since)
        if record.observed() != before:
            self._cluster_changed(report.name)

    def _start_grace_timer(self, name: str, since: datetime) -> None:
        task = asyncio.create_task(self._end_of_grace(name, since))
        self._timers.add(task)
        task.add_done_callback(self._timers.discard)

    async def _end_of_grace(self, name: str, since: datetime) -> None:
        """At the end of ``name``'s grace, if it has stayed NotReady since ``since``, mark it
        changed: the deployments on it find their placement no longer current at their next
        resync and are re-placed (``_stale`` leaves the cluster out from then on)."""
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
        key = f"{report.namespace}/{report.name}"
        changed = False
        for name, record in self._clusters.items():
            state = report.clusters.get(name)
            if record.caches.get(key) == state:
                continue
            if state is None:
                del record.caches[key]
            else:
                record.caches[key] = state
            changed = True
            self._cluster_changed(name)
        if changed:
            for namespace, deployment in sorted(self._short):
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
    def place(self, request: PlaceRequest) -> PlaceResponse:
        # Updates with one ID are deduplicated by the server; this also covers a retried
        # activity after the Fleet continued-as-new.
        if request.request_id in self._answered:
            at, answer = self._answered[request.request_id]
            if isinstance(answer, CompactAnswer):
                answer = answer_from_compact(answer)
                self._answered[request.request_id] = (at, answer)
            return answer
        deployment = self._resolve(request)
        if deployment is None:
            # Named by a template this Fleet does not hold (evicted, or the Fleet continued-
            # as-new since): nothing decided or remembered; the sender resends it whole under
            # a new request ID.
            return PlaceResponse(unknown_template=True, version=self._version)
        now = workflow.now()
        stale = self._stale(now)
        response = self._place(request, deployment, gone=stale)
        owner = (deployment.namespace, deployment.name)
        if response.placed:
            self._deployment_version[owner] = self._bump()
        # The scheduler already brought the charged-pool cache up to date with these (or
        # dropped their clusters' entries): see ``placement.place``.
        for replica in response.placed:
            self._book.add(replica)
        if response.summary:
            self._short.add(owner)
        else:
            self._short.discard(owner)
        response.version = self._version
        self._remember(request.request_id, response)
        self._decisions.append(
            Decision(
                at=now,
                namespace=deployment.namespace,
                deployment=deployment.name,
                desired=request.desired,
                placed=[f"{r.name}@{r.spec.cluster_name}" for r in response.placed],
                victims=[f"{v.replica.name}: {v.reason}" for v in response.victims],
                summary=response.summary,
                rejections=response.rejections,
            )
        )
        return response

    def _resolve(self, request: PlaceRequest) -> ModelDeployment | None:
        """The request's deployment: sent whole (then kept by its ``template_key`` for later
        requests that name it), or named by a key kept earlier; None when not kept."""
        if request.deployment is not None:
            key = template_key(request.deployment)
            self._templates.pop(key, None)
            self._templates[key] = request.deployment
            while len(self._templates) > MAX_TEMPLATES:
                self._templates.pop(next(iter(self._templates)))
            return request.deployment
        deployment = self._templates.pop(request.template, None)
        if deployment is not None:
            self._templates[request.template] = deployment  # most recently used last
        return deployment

    def _stale(self, now: datetime) -> set[str]:
        """Clusters NotReady past their grace: left out of the fleet for placement."""
        return {
            name
            for name, rec in self._clusters.items()
            if (rec.not_ready_since is not None and now - rec.not_ready_since > self._grace)
        }

    def _place(
        self,
        request: PlaceRequest,
        deployment: ModelDeployment,
        *,
        gone: set[str],
        without: frozenset[str] = frozenset(),
        dry: bool = False,
    ) -> PlaceResponse:
        """The scheduler's answer for ``request``, booking nothing; the caller books what it
        places unless ``dry`` (the scheduler keeps the charged-pool cache as if booked, so a
        dry placement works on a copy). ``without`` (book keys of this deployment's replicas)
        are left out as if released: a dry placement's question."""
        every = self._book.replicas_of((deployment.namespace, deployment.name))
        desired = request.desired
        room = self._limits.max_replicas - len(self._book) + len(every)
        if desired > room:
            # The size guard: past it the continue-as-new input would approach 2 MiB.
            desired = max(room, 0)
        by_cluster: Mapping[str, Collection[ModelReplica]] = self._book.by_cluster
        ledger_cache = self._ledger_cache
        if without:
            ours = [r for r in every if replica_key(r.namespace, r.name) not in without]
            # Clusters holding a left-out replica are charged without it, and never from or
            # into the Fleet's cache: a private copy of the rest keeps this call read-only.
            touched = {
                r.spec.cluster_name for r in every if replica_key(r.namespace, r.name) in without
            }
            by_cluster = ChainMap(
                {
                    c: [self._book.replica(k) for k in self._book.keys_on(c) if k not in without]
                    for c in touched
                },
                self._book.by_cluster,  # type: ignore[arg-type]
            )
            ledger_cache = LedgerCache(
                {c: p for c, p in self._ledger_cache.items() if c not in touched}
            )
        else:
            ours = every
            if dry:
                # Entries are replaced, never changed in place: a shallow copy is private.
                ledger_cache = LedgerCache(self._ledger_cache)
        placement = place_in_fleet(
            deployment,
            desired=desired,
            classes=self._classes,
            clusters={},
            replicas=(),
            gone=gone,
            avoid={
                c: request.avoid_reasons.get(c, AVOIDED_WITHOUT_REASON)
                for c in request.avoid_clusters
            },
            evaluator=_EVALUATOR,
            snapshot=self._live_snapshot(gone),
            indexed=(ours, by_cluster),
            ledger_cache=ledger_cache,
        )
        on = {r.spec.cluster_name for r in [*placement.kept, *placement.placed]}
        summary = placement.summary
        if desired < request.desired:
            summary = (
                f"the Fleet holds {len(self._book)} replicas, its limit "
                f"({self._limits.max_replicas}); shard the fleet to place more"
            )
            placement = placement.model_copy(update={"summary": summary})
        return PlaceResponse(
            facts={
                name: cluster_facts(self._clusters[name].spec)
                for name in sorted(on)
                if name in self._clusters and has_own_settings(self._clusters[name].spec)
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
        )

    @place.validator
    def _check_place(self, request: PlaceRequest) -> None:
        if request.deployment is None:
            return  # named by template: validated when it was sent whole
        errors = validate(request.deployment)
        if errors:
            raise InvalidResourceError(request.deployment.ref, errors)

    def _remember(self, request_id: str, response: PlaceResponse) -> None:
        self._answered[request_id] = (workflow.now(), response)
        while len(self._answered) > MAX_REMEMBERED_REQUESTS:
            self._answered.pop(next(iter(self._answered)))

    @workflow.update
    def dry_place(self, request: DryPlaceRequest) -> PlaceResponse:
        """Where ``request``'s replicas would go, with its replicas in ``without`` not counted:
        a rollout asks before it removes anything that serves. Read-only: nothing is booked,
        remembered or logged as a decision (an Update, not a query, so it is ordered after the
        placements and releases sent before it)."""
        deployment = self._resolve(request)
        if deployment is None:
            return PlaceResponse(unknown_template=True, version=self._version)
        stale = self._stale(workflow.now())
        namespace = deployment.namespace
        placement = self._place(
            request,
            deployment,
            gone=stale,
            without=frozenset(replica_key(namespace, n) for n in request.without),
            dry=True,
        )
        rejections = dict(placement.rejections)
        if not placement.placed:
            # A selector that fails at evaluation looks like one that does not match; say so.
            specs = {n: r.spec for n, r in self._clusters.items() if n not in stale}
            for name, why in selector_errors(deployment, self._classes, specs, _EVALUATOR).items():
                rejections[name] = f"{rejections[name]}; {why}" if name in rejections else why
        return PlaceResponse(
            placed=placement.placed,
            conditions=placement.conditions,
            rejections=rejections,
            summary=placement.summary,
        )

    @dry_place.validator
    def _check_dry_place(self, request: DryPlaceRequest) -> None:
        self._check_place(request)

    @workflow.update
    def release(self, request: ReleaseRequest) -> int:
        released = 0
        for name in request.replicas:
            removed = self._book.remove(replica_key(request.namespace, name))
            if removed is not None:
                released += 1
                owner, cluster = removed
                self._ledger_cache.pop(cluster, None)
                self._deployment_version[owner] = self._bump()
                # Freed capacity there may change where others' replicas go.
                self._cluster_version[cluster] = self._version
        return released

    @workflow.query
    def placement_current(self, check: PlacementCheck) -> bool:
        """Whether nothing that could change this deployment's placement happened since
        ``check.version``: its replicas, the clusters they are on and the class catalog are
        unchanged, and it was not short of capacity (then any change might make room)."""
        owner = (check.namespace, check.deployment)
        if owner in self._short:
            return False
        if check.version == self._version:
            return True
        if check.version < self._horizon or check.version > self._version:
            return False
        if self._catalog_version > check.version:
            return False
        if self._deployment_version.get(owner, 0) > check.version:
            return False
        clusters = self._book.clusters_of(owner)
        return all(self._cluster_version.get(c, 0) <= check.version for c in clusters)

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
        keys = sorted(self._book.keys_on(request.cluster)) if request.cluster else None
        keys = keys if keys is not None else self._book.sorted_keys()
        start = bisect.bisect_right(keys, request.after) if request.after else 0
        page: list[ModelReplica] = []
        for i in range(start, len(keys)):
            replica = self._book.replica(keys[i])
            if request.namespace and replica.namespace != request.namespace:
                continue
            if len(page) == request.limit:
                return ReplicaPage(replicas=page, next_after=keys[i - 1])
            page.append(replica)
        return ReplicaPage(replicas=page)

    @workflow.query
    def stats(self) -> FleetStats:
        state = self._state()
        return FleetStats(
            classes=len(self._classes),
            clusters=len(self._clusters),
            replicas=len(self._book),
            version=self._version,
            state_bytes=len(state.model_dump_json(by_alias=True)),
            history_events=workflow.info().get_current_history_length(),
        )

    @workflow.query
    def classes(self) -> list[InferenceClass]:
        """The catalog's classes in full (``modelfleet get classes -o yaml``). A query only:
        adding it changes no history."""
        return [self._classes[k] for k in sorted(self._classes)]

    @workflow.query
    def decisions(self, query: DecisionQuery) -> list[Decision]:
        mine = [
            d
            for d in self._decisions
            if d.namespace == query.namespace and d.deployment == query.deployment
        ]
        return mine[-query.limit :]


def _trimmed(decision: Decision) -> Decision:
    """A decision as carried across continue-as-new: at most ``CARRIED_REJECTIONS`` cluster
    reasons and names (its summary still counts them all)."""
    cap = CARRIED_REJECTIONS

    def names(items: list[str]) -> list[str]:
        return items if len(items) <= cap else [*items[:cap], f"... and {len(items) - cap} more"]

    return decision.model_copy(
        update={
            "rejections": dict(sorted(decision.rejections.items())[:cap]),
            "placed": names(decision.placed),
            "victims": names(decision.victims),
        }
    )
