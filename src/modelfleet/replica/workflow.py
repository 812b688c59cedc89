"""The ModelReplica workflow (ID ``replica/<ns>/<replica>``): the rollout saga of one placed replica
on one cluster, then its health watch until it is torn down.

Steps: (wait for the ModelCache, when the deployment references one) -> ensure namespace -> stage
ResourceClaimTemplates -> create gangs -> wait for leader readiness -> wire routing -> wait for the
endpoint picker -> Ready. Then it serves: ``replica.serving`` (which this workflow extends; it holds
the reporting and the serving loop; what outlives a run is ``replica.state``) is watched by its
InferenceCluster, which scans it with the cluster's other replicas and signals a change of health or
objects missing or edited, which it repairs (re-applied, a step in the history that says why);
without a cluster workflow it polls its own health. Each step is an activity; retryable Kubernetes
errors are retried by Temporal, permanent ones fail the step. A teardown during the rollout cancels
the step in progress. On failure, deadline or cancellation the steps already taken are undone in
reverse order, the parent deployment is told why, and the workflow fails (``ReplicaFailed``). The
parent is signalled when the replica becomes Ready, Degraded or Failed and when it is done; the step
in progress is read by the ``progress`` query.

Deterministic orchestration only: rendering is a pure function, all I/O is in activities.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, VersioningBehavior
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from modelfleet.api.naming import LABEL_REPLICA
    from modelfleet.contracts import search
    from modelfleet.contracts.activity_names import (
        FLEET_SWEEP_PENDING,
        KUBE_APPLY,
        KUBE_DELETE,
        KUBE_HEARTBEAT_SECONDS,
        KUBE_POLL_READY,
    )
    from modelfleet.contracts.cache_payloads import (
        CACHE_READINESS,
        CacheReadiness,
        CacheReadinessRequest,
    )
    from modelfleet.contracts.error_types import (
        PERMANENT_KUBE_ERROR,
        READINESS_DEADLINE_EXCEEDED,
        RENDER_FAILED,
        REPLICA_FAILED,
    )
    from modelfleet.contracts.ids import cluster_id
    from modelfleet.contracts.kube_payloads import (
        ApplyRequest,
        ApplyResult,
        DeleteRequest,
        DeleteResult,
        ObjectRef,
        ReadyResult,
        WaitReadyRequest,
    )
    from modelfleet.contracts.serving_payloads import (
        SERVING_CHECK_MODELS,
        SERVING_ROUTES_CARRYING,
        ModelCheck,
        ModelCheckRequest,
        RoutesCarrying,
        RoutesRequest,
    )
    from modelfleet.contracts.status import ReplicaPhase, ReplicaProgress, ReplicaStep
    from modelfleet.contracts.versioning import declared
    from modelfleet.contracts.watch_payloads import REPLICA_HEALTH, HealthNews
    from modelfleet.contracts.workflow_inputs import ReplicaResult
    from modelfleet.rendering.replica_manifests import (
        SHARED_KINDS,
        ReadinessRule,
        RenderedReplica,
        Step,
        render_replica,
    )
    from modelfleet.replica.drain import FIRST_LOOK as DRAIN_FIRST_LOOK
    from modelfleet.replica.drain import GRACE, drain_step, next_interval
    from modelfleet.replica.failure import RolloutFailedError, reason_of, rollout_failure
    from modelfleet.replica.models import model_mismatch
    from modelfleet.replica.retries import API_RETRY
    from modelfleet.replica.serving import ServingReplica, applied_key, details
    from modelfleet.replica.state import ReplicaInput

CLEANUP_TIMEOUT = timedelta(minutes=10)
# A check that could not list the engine's models (the route just applied, a gateway busy) is
# tried again within ``MODEL_CHECK_LIMIT``.
MODEL_CHECK_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=8),
)
# Readiness waits (up to the progress deadline, 30 minutes by default) poll with short
# ``kube.poll_ready`` attempts that Temporal retries, so that no activity holds a worker slot
# for the whole wait (issue 11).
POLL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=15),
    non_retryable_error_types=[PERMANENT_KUBE_ERROR, READINESS_DEADLINE_EXCEEDED],
)
POLL_ATTEMPT = timedelta(seconds=10)
# A replica whose deployment references a ModelCache waits (a step of its own, with the
# cache's progress) until the cache is Ready on its cluster before creating anything.
CACHE_POLL_FIRST = timedelta(seconds=2)
CACHE_POLL_MAX = timedelta(seconds=30)
# A teardown's delete is tried DELETE_TRY at a time; between tries the cluster's workflow is
# asked whether it will sweep the cluster on its return (NotReady after being Ready,
# ``cluster_sweep``); if so, what is left is that sweep's and the teardown ends (a dark cluster
# would otherwise hold the deployment's pass for the whole CLEANUP_TIMEOUT).
DELETE_TRY = timedelta(seconds=10)
# How long a replica about to join may try to read its engine's model list (the route to it was
# just applied); past that it joins unchecked, and the services' probes judge it as before.
MODEL_CHECK_LIMIT = timedelta(seconds=60)

_STEP_NAMES = {
    Step.NAMESPACE: ReplicaStep.NAMESPACE,
    Step.CLAIMS: ReplicaStep.CLAIMS,
    Step.WORKLOADS: ReplicaStep.WORKLOADS,
    Step.ROUTING: ReplicaStep.ROUTING,
}


# Pinned under Worker Versioning: the rollout saga and its compensation in reverse run on the
# code that made the steps (docs/operations.md, "Upgrading workflows").
@workflow.defn(name="ModelReplica", versioning_behavior=declared(VersioningBehavior.PINNED))
class ReplicaWorkflow(ServingReplica):
    @workflow.init
    def __init__(self, arg: ReplicaInput) -> None:
        super().__init__(arg)
        # Why the drain ended without the routes' confirmation (empty: confirmed, or no drain).
        self._drain_note = ""

    @workflow.signal
    def teardown(self) -> None:
        self._state.teardown = True

    @workflow.signal(name=REPLICA_HEALTH)
    def replica_health(self, news: HealthNews) -> None:
        # Bounded: the serving loop takes them all at once; a replica tearing down stops
        # looking, and the cluster tells each finding once.
        self._state.news = [*self._state.news[-7:], news]

    @workflow.query
    def progress(self) -> ReplicaProgress:
        return self._progress()

    @workflow.run
    async def run(self, arg: ReplicaInput) -> ReplicaResult:
        r = self._replica
        workflow.upsert_search_attributes(
            [
                search.KIND.value_set("ModelReplica"),
                search.NAMESPACE.value_set(r.namespace),
                search.NAME.value_set(r.name),
                search.CLUSTERS.value_set([r.spec.cluster_name]),
            ]
        )
        try:
            rendered = render_replica(r, arg.facts)
        except Exception as exc:
            # A renderer bug must not fail the workflow task over and over: nothing was applied
            # yet, so report and end as Failed.
            reason = f"could not render the replica: {exc}"
            await self._set(ReplicaPhase.FAILED, ReplicaStep.DONE, reason)
            raise ApplicationError(reason, type=RENDER_FAILED, non_retryable=True) from exc
        # Objects this replica owns, whether or not a step got far enough to record them:
        # compensation deletes by what was rendered, so a half-applied step leaves nothing.
        owned = [
            ObjectRef.of(m)
            for s in rendered.steps
            if s.step is not Step.NAMESPACE
            for m in s.manifests
        ]
        if self._state.serving_since is None:
            try:
                await self._roll_out_unless_torn_down(rendered)
            except (RolloutFailedError, ActivityError, asyncio.CancelledError) as exc:
                failure = rollout_failure(
                    exc,
                    self._state.step,
                    r.spec.cluster_name,
                    reason=exc.reason if isinstance(exc, RolloutFailedError) else None,
                )
                reason = failure.reason
                self._infrastructure = failure.infrastructure
                if isinstance(exc, asyncio.CancelledError):
                    # Cancelled is not failed: clean up, then end as Cancelled.
                    await self._compensate(owned, reason, ReplicaPhase.TERMINATED)
                    raise
                if self._state.teardown and isinstance(exc, RolloutFailedError):
                    await self._compensate(owned, reason, ReplicaPhase.TERMINATED)
                    return ReplicaResult(name=r.name, phase=ReplicaPhase.TERMINATED)
                await self._compensate(owned, reason)
                # Failed, so Temporal's own failure views count it.
                raise ApplicationError(reason, type=REPLICA_FAILED, non_retryable=True) from None
            self._state.serving_since = workflow.now()
        else:
            # Continued while serving: the phase, the endpoint and what the deployment was told
            # are carried (``replica.state``), so nothing is published or told again.
            workflow.set_current_details(
                details(self._state.phase, self._state.step, self._state.reason)
            )
        try:
            await self._serve(rendered)
        except asyncio.CancelledError:
            # Cancelled while serving: remove what it runs, then end as Cancelled.
            await self._leave(ReplicaPhase.TERMINATING, ReplicaStep.TEARDOWN, "cancelled")
            await self._delete(owned)
            await self._set(
                ReplicaPhase.TERMINATED, ReplicaStep.DONE, _joined("cancelled", self._drain_note)
            )
            raise
        except RolloutFailedError as exc:
            # Not repaired within the progress deadline: fail like a rollout that missed it, so
            # the deployment places the replica again.
            await self._compensate(owned, exc.reason)
            raise ApplicationError(exc.reason, type=REPLICA_FAILED, non_retryable=True) from None
        await self._leave(ReplicaPhase.TERMINATING, ReplicaStep.TEARDOWN, "torn down on request")
        await self._delete(owned)
        await self._set(ReplicaPhase.TERMINATED, ReplicaStep.DONE, self._drain_note)
        return ReplicaResult(name=r.name, phase=ReplicaPhase.TERMINATED)

    # --- the saga --------------------------------------------------------------------------

    async def _roll_out_unless_torn_down(self, rendered: RenderedReplica) -> None:
        """The rollout, cancelled (its current activity with it) as soon as a teardown comes."""
        task = asyncio.ensure_future(self._roll_out(rendered))
        try:
            await workflow.wait_condition(lambda: task.done() or self._state.teardown)
        except asyncio.CancelledError:
            await _cancelled(task)
            raise
        if not task.done():
            await _cancelled(task)
            raise RolloutFailedError("torn down before it became ready")
        await task

    async def _roll_out(self, rendered: RenderedReplica) -> None:
        if self._replica.spec.model_cache_ref is not None:
            await self._wait_model_cache(self._replica.spec.model_cache_ref.name)
        deadline = workflow.now() + timedelta(seconds=self._input.progress_deadline_seconds)
        rules = {"workload": [], "endpoint-picker": []}  # type: dict[str, list[ReadinessRule]]
        for rule in rendered.readiness:
            rules.setdefault(rule.role, []).append(rule)
        for step in rendered.steps:
            if self._state.teardown:
                raise RolloutFailedError("torn down before it became ready")
            await self._set(ReplicaPhase.PROGRESSING, _STEP_NAMES[step.step], "")
            await self._apply(step.step.value, step.manifests, deadline)
            if step.step is Step.WORKLOADS:
                await self._set(ReplicaPhase.PROGRESSING, ReplicaStep.LEADER_READY, "")
                await self._wait_ready(rules.get("workload", []), deadline, "leader readiness")
        await self._set(ReplicaPhase.PROGRESSING, ReplicaStep.ROUTING_READY, "")
        await self._wait_ready(rules.get("endpoint-picker", []), deadline, "endpoint picker")
        await self._check_models(deadline)
        await self._set(ReplicaPhase.READY, ReplicaStep.SERVING, "")

    async def _check_models(self, deadline: datetime) -> None:
        """Join only answering for the model names its services expect (``replica.models``): a
        mismatch fails the rollout, so the replica never gets traffic and a roll is rolled back
        like any failed replacement."""
        r = self._replica
        await self._set(ReplicaPhase.PROGRESSING, ReplicaStep.CHECK_MODELS, "")
        limit = min(MODEL_CHECK_LIMIT, max(deadline - workflow.now(), timedelta(seconds=5)))
        try:
            check: ModelCheck = await workflow.execute_activity(
                SERVING_CHECK_MODELS,
                ModelCheckRequest(
                    namespace=r.namespace,
                    replica=r.name,
                    deployment=r.spec.deployment,
                    cluster=r.spec.cluster_name,
                    labels=dict(r.metadata.labels),
                ),
                result_type=ModelCheck,
                start_to_close_timeout=timedelta(seconds=30),
                schedule_to_close_timeout=limit,
                retry_policy=MODEL_CHECK_RETRY,
                summary="check the model names it serves",
            )
        except ActivityError as exc:
            workflow.logger.warning(
                "models of %s not checked, it joins unchecked: %s", r.name, reason_of(exc)
            )
            return
        mismatch = model_mismatch(check.served, check.expected)
        if mismatch is not None:
            raise RolloutFailedError(mismatch)

    async def _wait_model_cache(self, cache: str) -> None:
        """Hold the rollout until the replica's ModelCache is Ready on its cluster: engines that
        start before their weights are there would never load. Not counted against the
        progress deadline (staging hundreds of GiB takes as long as it takes)."""
        r = self._replica
        request = CacheReadinessRequest(
            namespace=r.namespace, name=cache, cluster=r.spec.cluster_name
        )
        await self._set(ReplicaPhase.PROGRESSING, ReplicaStep.MODEL_CACHE, f"model cache {cache}")
        interval = CACHE_POLL_FIRST
        while True:
            try:
                result: CacheReadiness = await workflow.execute_activity(
                    CACHE_READINESS,
                    request,
                    result_type=CacheReadiness,
                    start_to_close_timeout=timedelta(seconds=30),
                    retry_policy=RetryPolicy(maximum_attempts=3),
                    summary=f"model cache {cache} on {r.spec.cluster_name}",
                )
            except ActivityError as exc:
                result = CacheReadiness(ready=False, summary=f"cannot ask: {reason_of(exc)}")
            if result.ready:
                return
            reason = f"model cache {cache}: {result.summary}"
            if reason != self._state.reason:
                await self._set(ReplicaPhase.PROGRESSING, ReplicaStep.MODEL_CACHE, reason)
            await workflow.sleep(interval)
            interval = min(interval * 2, CACHE_POLL_MAX)

    async def _apply(
        self, step: str, manifests: list[dict[str, object]], deadline: datetime
    ) -> None:
        remaining = max(deadline - workflow.now(), timedelta(seconds=5))
        # Recorded so that compensation and teardown delete what was applied, not only what
        # today's render names (a renderer change that renames an object must not orphan it).
        result: ApplyResult = await workflow.execute_activity(
            KUBE_APPLY,
            ApplyRequest(cluster=self._replica.spec.cluster_name, manifests=manifests),
            result_type=ApplyResult,
            start_to_close_timeout=timedelta(seconds=60),
            heartbeat_timeout=timedelta(seconds=KUBE_HEARTBEAT_SECONDS),
            schedule_to_close_timeout=remaining,
            retry_policy=API_RETRY,
            summary=f"{step}: apply {len(manifests)} object(s)",
        )
        known = {applied_key(r) for r in self._state.applied}
        # The workload namespace is shared by the deployment's replicas: never this one's.
        self._state.applied += [
            r for r in result.applied if r.kind not in SHARED_KINDS and applied_key(r) not in known
        ]

    async def _wait_ready(self, rules: list[ReadinessRule], deadline: datetime, what: str) -> None:
        if not rules:
            return
        remaining = deadline - workflow.now()
        if remaining <= timedelta(0):
            raise RolloutFailedError(f"progress deadline passed before {what}")
        # The last attempt starts at or after the deadline and fails with the reason.
        result: ReadyResult = await workflow.execute_activity(
            KUBE_POLL_READY,
            WaitReadyRequest(
                cluster=self._replica.spec.cluster_name,
                rules=rules,
                deadline=deadline,
                crash_loop_restarts=self._input.crash_loop_restarts,
            ),
            result_type=ReadyResult,
            # One check is a few reads (milliseconds); an attempt lost with its worker (a
            # SIGKILL) is retried only once this runs out, and that delay adds to the time a
            # failed replacement takes to be rolled back.
            start_to_close_timeout=POLL_ATTEMPT,
            schedule_to_close_timeout=remaining + timedelta(seconds=90),
            retry_policy=POLL_RETRY,
            summary=f"wait for {what}",
        )
        if not result.ready:
            raise RolloutFailedError(result.reason)

    async def _leave(self, phase: ReplicaPhase, step: ReplicaStep, reason: str) -> None:
        """Stop serving (the endpoint is withdrawn) and, when it served, drain: nothing the
        routes point at is deleted until the front-door clusters report that no route carries
        it (``replica.drain``), or ``drain_seconds`` have passed. Reads and timers are in the
        history, so a worker killed mid-drain resumes the wait where it was."""
        await self._set(phase, step, reason)
        if self._state.ever_published and not self._state.published and self._input.drain_seconds:
            await self._drain(phase, step, reason)

    async def _drain(self, phase: ReplicaPhase, step: ReplicaStep, reason: str) -> None:
        r = self._replica
        started = workflow.now()
        bound = timedelta(seconds=self._input.drain_seconds)
        wait = interval = DRAIN_FIRST_LOOK
        while True:
            await workflow.sleep(wait, summary="drain: let the services' routes drop it")
            try:
                seen: RoutesCarrying | None = await workflow.execute_activity(
                    SERVING_ROUTES_CARRYING,
                    RoutesRequest(namespace=r.namespace, endpoint=r.name),
                    result_type=RoutesCarrying,
                    start_to_close_timeout=timedelta(seconds=30),
                    heartbeat_timeout=timedelta(seconds=15),
                    retry_policy=RetryPolicy(maximum_attempts=1),
                    summary="drain: which front-door routes still carry it",
                )
            except ActivityError as exc:
                workflow.logger.info("routes of %s not read: %s", r.name, reason_of(exc))
                seen = None
            interval = next_interval(interval)
            verdict = drain_step(seen, started, workflow.now(), interval, bound)
            if verdict.done:
                break
            wait = verdict.wait
        if verdict.reason:
            workflow.logger.warning("%s: %s", r.name, verdict.reason)
            self._drain_note = verdict.reason
            await self._set(phase, step, _joined(reason, verdict.reason))
        else:
            await workflow.sleep(GRACE, summary="drain: requests already routed to it finish")

    async def _compensate(
        self, owned: list[ObjectRef], reason: str, phase: ReplicaPhase = ReplicaPhase.FAILED
    ) -> None:
        await self._leave(phase, ReplicaStep.COMPENSATING, reason)
        await self._delete(owned)
        await self._set(phase, ReplicaStep.DONE, _joined(reason, self._drain_note))

    async def _delete(self, owned: list[ObjectRef]) -> None:
        # Reverse apply order: routing first, the gangs next, claims last; objects applied that
        # the render no longer names go first; then a sweep by the replica's label.
        rendered = {applied_key(r) for r in owned}
        stray = [r for r in reversed(self._state.applied) if applied_key(r) not in rendered]
        refs = stray + list(reversed(owned))
        cluster = self._replica.spec.cluster_name
        request = DeleteRequest(
            cluster=cluster, objects=refs, sweep_labels={LABEL_REPLICA: self._replica.name}
        )
        deadline = workflow.now() + CLEANUP_TIMEOUT
        while True:
            try:
                await workflow.execute_activity(
                    KUBE_DELETE,
                    request,
                    result_type=DeleteResult,
                    start_to_close_timeout=timedelta(seconds=120),
                    heartbeat_timeout=timedelta(seconds=KUBE_HEARTBEAT_SECONDS),
                    schedule_to_close_timeout=min(DELETE_TRY, deadline - workflow.now()),
                    retry_policy=API_RETRY,
                    summary=f"delete {len(refs)} object(s)",
                )
                return
            except ActivityError as exc:
                # The cluster may be gone for good; say so rather than hang the deployment.
                failure = f"cleanup incomplete on {cluster}: {reason_of(exc)}"
            if workflow.now() + timedelta(seconds=1) >= deadline:
                self._state.reason = failure
                return
            if await self._swept_on_return(cluster):
                self._state.reason = f"{failure}; what is left is swept when the cluster is back"
                return

    async def _swept_on_return(self, cluster: str) -> bool:
        """Whether ``cluster``'s workflow will sweep it of moved replicas when it is Ready again
        (unknown counts as no: the delete is tried again)."""
        try:
            pending: bool = await workflow.execute_activity(
                FLEET_SWEEP_PENDING,
                cluster_id(cluster),
                result_type=bool,
                start_to_close_timeout=timedelta(seconds=10),
                retry_policy=RetryPolicy(maximum_attempts=3),
                summary=f"will {cluster} be swept when it is back?",
            )
        except ActivityError:
            return False
        return pending


def _joined(*reasons: str) -> str:
    return "; ".join(r for r in reasons if r)


async def _cancelled(task: asyncio.Future[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, ActivityError, RolloutFailedError):
        await task
