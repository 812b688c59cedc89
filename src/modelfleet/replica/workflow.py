"""The ModelReplica workflow (ID ``replica/<ns>/<replica>``): the rollout saga of one placed replica
on one cluster, then its health watch until it is torn down.

Steps: (wait for the ModelCache, when the deployment references one) -> ensure namespace ->
stage ResourceClaimTemplates -> create gangs -> wait for leader readiness -> wire routing ->
wait for the endpoint picker -> Ready. Then it is watched (``replica.serving``): its
InferenceCluster scans it with the cluster's other replicas and signals a change of health or
objects missing or edited, which it repairs (re-applied, a step in the history that says why);
without a cluster workflow it polls its own health. Each step is an activity;
retryable Kubernetes errors are retried by Temporal, permanent ones fail the step. On failure,
deadline or cancellation the steps already taken are undone in reverse order, and the parent
deployment is told why. The parent is signalled when the replica becomes Ready, Degraded or
Failed and when it is done; the step in progress is read by the ``progress`` query.

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
        KUBE_WAIT_READY,
    )
    from modelfleet.contracts.cache_payloads import (
        CACHE_READINESS,
        CacheReadiness,
        CacheReadinessRequest,
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
        ENDPOINTS_PUBLISH_REPLICA,
        ENDPOINTS_WITHDRAW,
        EndpointKey,
        ReplicaEndpointRequest,
    )
    from modelfleet.contracts.status import ReplicaPhase, ReplicaProgress, ReplicaStep
    from modelfleet.contracts.versioning import declared
    from modelfleet.contracts.watch_payloads import REPLICA_HEALTH, HealthNews
    from modelfleet.contracts.workflow_inputs import ReplicaInput, ReplicaResult
    from modelfleet.rendering.replica_manifests import (
        ReadinessRule,
        RenderedReplica,
        Step,
        render_replica,
    )
    from modelfleet.replica.progress import parent_needs
    from modelfleet.replica.serving import (
        API_RETRY,
        PATCH_PUBLISH_ENDPOINT,
        ReplicaWatch,
        RolloutFailedError,
        applied_key,
        details,
        reason_of,
    )

CLEANUP_TIMEOUT = timedelta(minutes=10)
# A teardown during the rollout cancels the step in progress (its activity) instead of waiting
# for it to end: before, a replica checked for teardown only between steps, so a delete could
# wait out a whole readiness wait (the progress deadline, 30 minutes by default).
PATCH_TEARDOWN_CANCELS_ROLLOUT = "replica-teardown-cancels-rollout"
# A replica that fails ends its workflow as Failed (after compensating), so Temporal's own
# failure views count it; before, it completed with a FAILED result.
PATCH_FAILS_AS_FAILED = "replica-fails-as-failed"
# Rollout work per replica (issue 11): the parent deployment is signalled only when what it
# decides or reports changes (Ready, Degraded, Failed, Done), not on every step (it read 7
# signals per replica, each a workflow task on both sides); the steps in between are read by
# the ``progress`` query (``describe`` and ``rollout status`` do). ModelfleetPhase is upserted
# only when its value changes (it was rewritten as Progressing five times). Histories recorded
# before hold a signal and an upsert per step.
PATCH_QUIET_PROGRESS = "replica-quiet-progress"
# Readiness waits (up to the progress deadline, 30 minutes by default) poll with short
# ``kube.poll_ready`` attempts that Temporal retries, instead of one ``kube.wait_ready``
# activity that held a worker slot (and thread) the whole time: 32 replicas loading a model
# took every slot probes, placements and applies need (issue 11). Histories recorded before
# schedule ``kube.wait_ready``.
PATCH_POLL_READY = "replica-poll-readiness"
POLL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=15),
    non_retryable_error_types=["PermanentKubeError", "ReadinessDeadlineExceeded"],
)
ENDPOINT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10)
)

# Added with ModelCache staging: a replica whose deployment references a ModelCache waits (a
# step of its own, with the cache's progress) until the cache is Ready on its cluster before
# creating anything. Histories recorded before have no such step.
PATCH_WAIT_MODEL_CACHE = "replica-waits-for-model-cache"
CACHE_POLL_FIRST = timedelta(seconds=2)
CACHE_POLL_MAX = timedelta(seconds=30)
# A teardown aimed at a dark cluster retried its delete for the whole CLEANUP_TIMEOUT, and the
# deployment's pass (its scale-ups included) waited for it. From this patch the delete is tried
# DELETE_TRY at a time; between tries the cluster's workflow is asked whether it will sweep the
# cluster on its return (NotReady after being Ready, ``cluster_sweep``); if so, what is left is
# that sweep's and the teardown ends. Histories recorded before have one delete activity only.
PATCH_DARK_TEARDOWN = "replica-teardown-leaves-dark-cluster-to-sweep"
DELETE_TRY = timedelta(seconds=10)

_STEP_NAMES = {
    Step.NAMESPACE: ReplicaStep.NAMESPACE,
    Step.CLAIMS: ReplicaStep.CLAIMS,
    Step.WORKLOADS: ReplicaStep.WORKLOADS,
    Step.ROUTING: ReplicaStep.ROUTING,
}


# Pinned under Worker Versioning: the rollout saga and its compensation in reverse run on the
# code that made the steps (docs/operations.md, "Upgrading workflows").
@workflow.defn(name="ModelReplica", versioning_behavior=declared(VersioningBehavior.PINNED))
class ReplicaWorkflow(ReplicaWatch):
    @workflow.init
    def __init__(self, arg: ReplicaInput) -> None:
        self._input = arg
        self._replica = arg.replica
        self._phase = ReplicaPhase.PENDING
        self._step = ReplicaStep.PLACED
        self._reason = ""
        self._teardown = False
        self._published = False
        # What the parent and the visibility store were last told (PATCH_QUIET_PROGRESS).
        self._told: ReplicaProgress | None = None
        self._phase_upserted: ReplicaPhase | None = None
        # References of every object a step applied (from kube.apply's answer), in order.
        self._applied: list[ObjectRef] = list(arg.applied)
        self._failed_checks = 0
        self._repair_deadline = arg.repair_deadline
        # What the cluster's replica watch said since the serving loop last looked.
        self._news: list[HealthNews] = []
        self._unverified = False

    @workflow.signal
    def teardown(self) -> None:
        self._teardown = True

    @workflow.signal(name=REPLICA_HEALTH)
    def replica_health(self, news: HealthNews) -> None:
        # Bounded: the serving loop takes them all at once; a replica tearing down stops
        # looking, and the cluster tells each finding once.
        self._news = [*self._news[-7:], news]

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
            raise ApplicationError(reason, type="RenderFailed", non_retryable=True) from exc
        # Objects this replica owns, whether or not a step got far enough to record them:
        # compensation deletes by what was rendered, so a half-applied step leaves nothing.
        owned = [
            ObjectRef.of(m)
            for s in rendered.steps
            if s.step is not Step.NAMESPACE
            for m in s.manifests
        ]
        if arg.serving_since is None:
            try:
                if workflow.patched(PATCH_TEARDOWN_CANCELS_ROLLOUT):
                    await self._roll_out_unless_torn_down(rendered)
                else:
                    await self._roll_out(rendered)
            except (RolloutFailedError, ActivityError, asyncio.CancelledError) as exc:
                reason = reason_of(exc)
                if isinstance(exc, asyncio.CancelledError):
                    # Cancelled is not failed: clean up, then end as Cancelled.
                    await self._compensate(owned, reason, ReplicaPhase.TERMINATED)
                    raise
                if self._teardown and isinstance(exc, RolloutFailedError):
                    await self._compensate(owned, reason, ReplicaPhase.TERMINATED)
                    return ReplicaResult(name=r.name, phase=ReplicaPhase.TERMINATED)
                await self._compensate(owned, reason)
                if workflow.patched(PATCH_FAILS_AS_FAILED):
                    raise ApplicationError(
                        reason, type="ReplicaFailed", non_retryable=True
                    ) from None
                return ReplicaResult(name=r.name, phase=ReplicaPhase.FAILED, reason=reason)
            serving_since = workflow.now()
        else:
            serving_since = arg.serving_since
            await self._set(ReplicaPhase.READY, ReplicaStep.SERVING, "")
        try:
            await self._watch_health(rendered, serving_since)
        except asyncio.CancelledError:
            # Cancelled while serving: remove what it runs, then end as Cancelled.
            await self._set(ReplicaPhase.TERMINATING, ReplicaStep.TEARDOWN, "cancelled")
            await self._delete(owned)
            await self._set(ReplicaPhase.TERMINATED, ReplicaStep.DONE, "cancelled")
            raise
        except RolloutFailedError as exc:
            # Not repaired within the progress deadline (only under PATCH_DRIFT_REPAIR): fail
            # like a rollout that missed it, so the deployment places the replica again.
            await self._compensate(owned, exc.reason)
            raise ApplicationError(exc.reason, type="ReplicaFailed", non_retryable=True) from None
        await self._set(ReplicaPhase.TERMINATING, ReplicaStep.TEARDOWN, "torn down on request")
        await self._delete(owned)
        await self._set(ReplicaPhase.TERMINATED, ReplicaStep.DONE, "")
        return ReplicaResult(name=r.name, phase=ReplicaPhase.TERMINATED)

    # --- the saga --------------------------------------------------------------------------

    async def _roll_out_unless_torn_down(self, rendered: RenderedReplica) -> None:
        """The rollout, cancelled (its current activity with it) as soon as a teardown comes."""
        task = asyncio.ensure_future(self._roll_out(rendered))
        try:
            await workflow.wait_condition(lambda: task.done() or self._teardown)
        except asyncio.CancelledError:
            await _cancelled(task)
            raise
        if not task.done():
            await _cancelled(task)
            raise RolloutFailedError("torn down before it became ready")
        await task

    async def _roll_out(self, rendered: RenderedReplica) -> None:
        if self._replica.spec.model_cache_ref is not None and workflow.patched(
            PATCH_WAIT_MODEL_CACHE
        ):
            await self._wait_model_cache(self._replica.spec.model_cache_ref.name)
        deadline = workflow.now() + timedelta(seconds=self._input.progress_deadline_seconds)
        rules = {"workload": [], "endpoint-picker": []}  # type: dict[str, list[ReadinessRule]]
        for rule in rendered.readiness:
            rules.setdefault(rule.role, []).append(rule)
        for step in rendered.steps:
            if self._teardown:
                raise RolloutFailedError("torn down before it became ready")
            await self._set(ReplicaPhase.PROGRESSING, _STEP_NAMES[step.step], "")
            await self._apply(step.step.value, step.manifests, deadline)
            if step.step is Step.WORKLOADS:
                await self._set(ReplicaPhase.PROGRESSING, ReplicaStep.LEADER_READY, "")
                await self._wait_ready(rules.get("workload", []), deadline, "leader readiness")
        await self._set(ReplicaPhase.PROGRESSING, ReplicaStep.ROUTING_READY, "")
        await self._wait_ready(rules.get("endpoint-picker", []), deadline, "endpoint picker")
        await self._set(ReplicaPhase.READY, ReplicaStep.SERVING, "")

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
            if reason != self._reason:
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
        known = {applied_key(r) for r in self._applied}
        # The workload namespace is shared by the deployment's replicas: never this one's.
        self._applied += [
            r for r in result.applied if r.kind != "Namespace" and applied_key(r) not in known
        ]

    async def _wait_ready(self, rules: list[ReadinessRule], deadline: datetime, what: str) -> None:
        if not rules:
            return
        remaining = deadline - workflow.now()
        if remaining <= timedelta(0):
            raise RolloutFailedError(f"progress deadline passed before {what}")
        if workflow.patched(PATCH_POLL_READY):
            # The last attempt starts at or after the deadline and fails with the reason.
            result: ReadyResult = await workflow.execute_activity(
                KUBE_POLL_READY,
                WaitReadyRequest(
                    cluster=self._replica.spec.cluster_name, rules=rules, deadline=deadline
                ),
                result_type=ReadyResult,
                start_to_close_timeout=timedelta(seconds=60),
                schedule_to_close_timeout=remaining + timedelta(seconds=90),
                retry_policy=POLL_RETRY,
                summary=f"wait for {what}",
            )
            if not result.ready:
                raise RolloutFailedError(result.reason)
            return
        result = await workflow.execute_activity(
            KUBE_WAIT_READY,
            WaitReadyRequest(
                cluster=self._replica.spec.cluster_name, rules=rules, deadline=deadline
            ),
            result_type=ReadyResult,
            start_to_close_timeout=remaining + timedelta(seconds=30),
            heartbeat_timeout=timedelta(seconds=20),
            retry_policy=API_RETRY,
            summary=f"wait for {what}",
        )
        if not result.ready:
            raise RolloutFailedError(result.reason)

    async def _compensate(
        self, owned: list[ObjectRef], reason: str, phase: ReplicaPhase = ReplicaPhase.FAILED
    ) -> None:
        await self._set(phase, ReplicaStep.COMPENSATING, reason)
        await self._delete(owned)
        await self._set(phase, ReplicaStep.DONE, reason)

    async def _delete(self, owned: list[ObjectRef]) -> None:
        # Reverse apply order: routing first, the gangs next, claims last; objects applied that
        # the render no longer names go first; then a sweep by the replica's label.
        rendered = {applied_key(r) for r in owned}
        stray = [r for r in reversed(self._applied) if applied_key(r) not in rendered]
        refs = stray + list(reversed(owned))
        cluster = self._replica.spec.cluster_name
        request = DeleteRequest(
            cluster=cluster, objects=refs, sweep_labels={LABEL_REPLICA: self._replica.name}
        )
        tries = workflow.patched(PATCH_DARK_TEARDOWN)
        deadline = workflow.now() + CLEANUP_TIMEOUT
        while True:
            try:
                await workflow.execute_activity(
                    KUBE_DELETE,
                    request,
                    result_type=DeleteResult,
                    start_to_close_timeout=timedelta(seconds=120),
                    heartbeat_timeout=timedelta(seconds=KUBE_HEARTBEAT_SECONDS),
                    schedule_to_close_timeout=(
                        min(DELETE_TRY, deadline - workflow.now()) if tries else CLEANUP_TIMEOUT
                    ),
                    retry_policy=API_RETRY,
                    summary=f"delete {len(refs)} object(s)",
                )
                return
            except ActivityError as exc:
                # The cluster may be gone for good; say so rather than hang the deployment.
                failure = f"cleanup incomplete on {cluster}: {reason_of(exc)}"
            if not tries or workflow.now() + timedelta(seconds=1) >= deadline:
                self._reason = failure
                return
            if await self._swept_on_return(cluster):
                self._reason = f"{failure}; what is left is swept when the cluster is back"
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

    # --- reporting ---------------------------------------------------------------------------

    def _progress(self) -> ReplicaProgress:
        return ReplicaProgress(
            name=self._replica.name,
            phase=self._phase,
            step=self._step,
            reason=self._reason,
            at=workflow.now(),
        )

    async def _set(self, phase: ReplicaPhase, step: ReplicaStep, reason: str) -> None:
        self._phase, self._step, self._reason = phase, step, reason
        quiet = workflow.patched(PATCH_QUIET_PROGRESS)
        if not quiet or phase is not self._phase_upserted:
            workflow.upsert_search_attributes([search.PHASE.value_set(phase.value)])
            self._phase_upserted = phase
        workflow.set_current_details(details(phase, step, reason))
        progress = self._progress()
        if not quiet or parent_needs(progress, self._told):
            parent = workflow.get_external_workflow_handle(self._input.parent_id)
            # The deployment may be gone; then there is nobody to tell.
            with contextlib.suppress(ApplicationError):
                await parent.signal("replica_progress", progress)
            self._told = progress
        if workflow.patched(PATCH_PUBLISH_ENDPOINT):
            await self._sync_endpoint(phase)

    async def _sync_endpoint(self, phase: ReplicaPhase) -> None:
        """Ready: publish this replica's ModelEndpoint; anything else: withdraw it (before the
        teardown deletes the route, so services stop sending traffic first)."""
        r = self._replica
        serving = phase is ReplicaPhase.READY
        if serving == self._published:
            return
        try:
            if serving:
                await workflow.execute_activity(
                    ENDPOINTS_PUBLISH_REPLICA,
                    ReplicaEndpointRequest(
                        namespace=r.namespace,
                        replica=r.name,
                        deployment=r.spec.deployment,
                        cluster=r.spec.cluster_name,
                        labels=dict(r.metadata.labels),
                    ),
                    start_to_close_timeout=timedelta(seconds=30),
                    schedule_to_close_timeout=timedelta(minutes=2),
                    retry_policy=ENDPOINT_RETRY,
                    summary="publish endpoint",
                )
            else:
                await workflow.execute_activity(
                    ENDPOINTS_WITHDRAW,
                    EndpointKey(namespace=r.namespace, name=r.name),
                    start_to_close_timeout=timedelta(seconds=30),
                    schedule_to_close_timeout=timedelta(minutes=2),
                    retry_policy=ENDPOINT_RETRY,
                    summary="withdraw endpoint",
                )
        except ActivityError as exc:
            # Serving goes on; the next phase change tries again. Say why meanwhile.
            workflow.logger.warning("endpoint of %s not updated: %s", r.name, reason_of(exc))
            return
        self._published = serving


async def _cancelled(task: asyncio.Future[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, ActivityError, RolloutFailedError):
        await task
