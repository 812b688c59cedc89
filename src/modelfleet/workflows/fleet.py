"""The Fleet workflow (ID ``fleet``): the one owner of the class catalog, every cluster's published
capacity and readiness, and the ledger of placed replicas. Placement and release are Updates, so
two deployments placing at once are serialised here and can never double-book a pool.

Deterministic orchestration only: no I/O, clocks or randomness outside ``workflow.*``; the
scheduler it runs is a pure function.
"""

from __future__ import annotations

import contextlib
from collections import deque
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from modelfleet.api.classes import InferenceClass
    from modelfleet.api.clusters import InferenceCluster
    from modelfleet.api.deployments import ModelReplica
    from modelfleet.api.manifest_errors import InvalidResourceError
    from modelfleet.api.rules import validate
    from modelfleet.cel.evaluator import SelectorEvaluator
    from modelfleet.contracts.fleet_payloads import (
        ClusterReport,
        DryPlaceRequest,
        PlaceRequest,
        PlaceResponse,
        ReleaseRequest,
        ReplicaRemoval,
    )
    from modelfleet.contracts.status import ClusterRecord, Decision, DecisionQuery, FleetView
    from modelfleet.contracts.workflow_inputs import FleetInput, FleetState
    from modelfleet.scheduling.fleet_placement import ObservedCluster, place_in_fleet
    from modelfleet.scheduling.selector_errors import selector_errors
    from modelfleet.workflows import search
    from modelfleet.workflows.ids import deployment_id

# Bounded memory: a long-lived workflow must not grow without limit.
MAX_DECISIONS = 500
MAX_REMEMBERED_REQUESTS = 200
# A cluster NotReady for longer than this loses its replicas to re-placement.
NOT_READY_GRACE = timedelta(minutes=5)
# Reported for an avoided cluster when the request does not say why.
AVOIDED_WITHOUT_REASON = "a replica failed here recently"
# One evaluator for every placement in the worker process: compiled selectors and their results
# per device are pure, so sharing them across workflow runs is safe and saves recompiling CEL
# (lark parsing) on every placement.
_EVALUATOR = SelectorEvaluator()


@workflow.defn(name="Fleet")
class FleetWorkflow:
    @workflow.init
    def __init__(self, arg: FleetInput) -> None:
        state = arg.state or FleetState()
        self._classes: dict[str, InferenceClass] = dict(state.classes)
        self._clusters: dict[str, ClusterRecord] = dict(state.clusters)
        self._replicas: dict[str, ModelReplica] = dict(state.replicas)
        self._decisions: deque[Decision] = deque(state.decisions, maxlen=MAX_DECISIONS)
        self._answered: dict[str, PlaceResponse] = dict(state.answered)

    @workflow.run
    async def run(self, arg: FleetInput) -> None:
        workflow.upsert_search_attributes([search.KIND.value_set("Fleet")])
        await workflow.wait_condition(lambda: workflow.info().is_continue_as_new_suggested())
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(FleetInput(state=self._state()))

    def _state(self) -> FleetState:
        return FleetState(
            classes=self._classes,
            clusters=self._clusters,
            replicas=self._replicas,
            decisions=list(self._decisions),
            answered=self._answered,
        )

    # --- catalog ---------------------------------------------------------------------------

    @workflow.update
    def put_class(self, cls: InferenceClass) -> None:
        self._classes[cls.name] = cls

    @put_class.validator
    def _check_class(self, cls: InferenceClass) -> None:
        errors = validate(cls)
        if errors:
            raise InvalidResourceError(cls.ref, errors)

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
        self._classes.pop(name, None)

    # --- clusters --------------------------------------------------------------------------

    @workflow.update
    def put_cluster(self, cluster: InferenceCluster) -> None:
        record = self._clusters.get(cluster.name)
        if record is None:
            self._clusters[cluster.name] = ClusterRecord(spec=cluster)
        else:
            record.spec = cluster

    @workflow.update
    async def report_cluster(self, report: ClusterReport) -> None:
        record = self._clusters.get(report.name)
        if record is None:
            return  # removed meanwhile; the report is stale
        if report.draining and not record.draining:
            record.draining = True
            await self._nudge_deployments_on(report.name)
        was_ready = record.ready
        record.ready = report.ready
        record.reason = report.reason
        record.gateway_address = report.gateway_address
        record.observed_pools = report.observed_pools
        if report.ready:
            record.not_ready_since = None
        elif was_ready or record.not_ready_since is None:
            record.not_ready_since = workflow.now()

    async def _nudge_deployments_on(self, cluster: str) -> None:
        """Ask every deployment with a replica on ``cluster`` to reconcile now."""
        owners = sorted(
            {
                (r.namespace, r.spec.deployment)
                for r in self._replicas.values()
                if r.spec.cluster_name == cluster
            }
        )
        for namespace, name in owners:
            handle = workflow.get_external_workflow_handle(deployment_id(namespace, name))
            # A deployment that is gone has nothing to move.
            with contextlib.suppress(ApplicationError):
                await handle.signal("resync")

    @workflow.query
    def replicas_on(self, cluster: str) -> list[str]:
        return sorted(k for k, r in self._replicas.items() if r.spec.cluster_name == cluster)

    @workflow.update
    def remove_cluster(self, name: str) -> list[str]:
        """Forget a cluster; returns the replicas that were still placed on it."""
        self._clusters.pop(name, None)
        return sorted(k for k, r in self._replicas.items() if r.spec.cluster_name == name)

    # --- placement -------------------------------------------------------------------------

    @workflow.update
    def place(self, request: PlaceRequest) -> PlaceResponse:
        # Updates with one ID are deduplicated by the server; this also covers a retried
        # activity after the Fleet continued-as-new.
        if request.request_id in self._answered:
            return self._answered[request.request_id]
        now = workflow.now()
        stale = {
            name
            for name, rec in self._clusters.items()
            if (rec.not_ready_since is not None and now - rec.not_ready_since > NOT_READY_GRACE)
        }
        response = self._place(request, gone=stale)
        for replica in response.placed:
            self._replicas[_key(replica.namespace, replica.name)] = replica
        self._remember(request.request_id, response)
        self._decisions.append(
            Decision(
                at=now,
                namespace=request.deployment.namespace,
                deployment=request.deployment.name,
                desired=request.desired,
                placed=[f"{r.name}@{r.spec.cluster_name}" for r in response.placed],
                victims=[f"{v.replica.name}: {v.reason}" for v in response.victims],
                summary=response.summary,
                rejections=response.rejections,
            )
        )
        return response

    def _place(self, request: PlaceRequest, *, gone: set[str]) -> PlaceResponse:
        placement = place_in_fleet(
            request.deployment,
            desired=request.desired,
            classes=self._classes,
            clusters={name: _observed(record) for name, record in self._clusters.items()},
            replicas=list(self._replicas.values()),
            gone=gone,
            avoid={
                c: request.avoid_reasons.get(c, AVOIDED_WITHOUT_REASON)
                for c in request.avoid_clusters
            },
            evaluator=_EVALUATOR,
        )
        return PlaceResponse(
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
        errors = validate(request.deployment)
        if errors:
            raise InvalidResourceError(request.deployment.ref, errors)

    def _remember(self, request_id: str, response: PlaceResponse) -> None:
        self._answered[request_id] = response
        while len(self._answered) > MAX_REMEMBERED_REQUESTS:
            self._answered.pop(next(iter(self._answered)))

    @workflow.update
    def dry_place(self, request: DryPlaceRequest) -> PlaceResponse:
        """Where ``request``'s replicas would go, with its replicas in ``without`` not counted:
        a rollout asks before it removes anything that serves. Read-only: nothing is booked,
        remembered or logged as a decision (an Update, not a query, so it is ordered after the
        placements and releases sent before it)."""
        now = workflow.now()
        stale = {
            name
            for name, rec in self._clusters.items()
            if (rec.not_ready_since is not None and now - rec.not_ready_since > NOT_READY_GRACE)
        }
        dropped = {_key(request.deployment.namespace, n) for n in request.without}
        placement = place_in_fleet(
            request.deployment,
            desired=request.desired,
            classes=self._classes,
            clusters={name: _observed(record) for name, record in self._clusters.items()},
            replicas=[r for k, r in self._replicas.items() if k not in dropped],
            gone=stale,
            avoid={
                c: request.avoid_reasons.get(c, AVOIDED_WITHOUT_REASON)
                for c in request.avoid_clusters
            },
            evaluator=_EVALUATOR,
        )
        rejections = dict(placement.rejections)
        if not placement.placed:
            # A selector that fails at evaluation looks like one that does not match; say so.
            specs = {n: r.spec for n, r in self._clusters.items() if n not in stale}
            for name, why in selector_errors(
                request.deployment, self._classes, specs, _EVALUATOR
            ).items():
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
            if self._replicas.pop(_key(request.namespace, name), None) is not None:
                released += 1
        return released

    # --- queries ---------------------------------------------------------------------------

    @workflow.query
    def view(self) -> FleetView:
        return FleetView(
            classes=sorted(self._classes),
            clusters=[self._clusters[k] for k in sorted(self._clusters)],
            replicas=[self._replicas[k] for k in sorted(self._replicas)],
        )

    @workflow.query
    def decisions(self, query: DecisionQuery) -> list[Decision]:
        mine = [
            d
            for d in self._decisions
            if d.namespace == query.namespace and d.deployment == query.deployment
        ]
        return mine[-query.limit :]


def _key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def _observed(record: ClusterRecord) -> ObservedCluster:
    return ObservedCluster(
        spec=record.spec,
        ready=record.ready,
        gateway_address=record.gateway_address,
        ready_nodes={pool: seen.ready_nodes for pool, seen in record.observed_pools.items()},
        draining=record.draining,
    )
