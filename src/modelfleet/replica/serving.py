"""The ModelReplica workflow's reporting and its serving half (``replica.workflow`` holds the
rollout saga and extends this class; what outlives a run is ``replica.state.ReplicaState``):
after Ready, its health is watched and drift repaired (what the replica applied compared with
what the cluster holds; what is missing or changed is re-applied by server-side apply, a step in
the history whose summary says why).

Who watches: the replica registers with its InferenceCluster workflow, whose probe loop scans
every registered replica of the cluster with one activity and signals only those whose health
changed (``cluster.watch``). A healthy, idle replica runs no activity and no timer at all; it
wakes for a health signal (Degraded/Ready, endpoint included), for objects missing or edited
(drift repair, then it registers again), for its repair deadline or for teardown. Without a
cluster workflow to register with (a replica started on its own, or its cluster deleted), or
one that says nothing within ``ACK_WAIT`` of the registration (dark), it polls instead: a
health check every interval judged over time, and a drift comparison on a failed check and on a
slow resync. Both are the one serving loop (``_serve``); only how it learns its health differs.
A watched replica that hears it is no longer healthy (a new verdict) runs one health check of
its own, which reads the pods: the deployment hears why in the pods' words and how many times
its engines restarted (a crash loop after Ready fails a replacement,
``deployment.failures``).

Reporting (``_set``): the parent deployment is signalled only when what it decides or reports
changes (Ready, Degraded, Failed, Done; the steps in between are read by the ``progress``
query), ModelfleetPhase is upserted only when it changes, and a Ready replica publishes its
ModelEndpoint (withdrawn when it stops serving).

Deterministic orchestration only: the decisions are ``replica.health``'s, all I/O is in
activities.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from modelfleet.contracts import search
    from modelfleet.contracts.activity_names import KUBE_APPLY, KUBE_CHECK_READY, KUBE_DRIFT
    from modelfleet.contracts.ids import cluster_id
    from modelfleet.contracts.kube_payloads import (
        ApplyRequest,
        ApplyResult,
        DriftRequest,
        DriftResult,
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
    from modelfleet.contracts.watch_payloads import (
        UNWATCH_REPLICA,
        WATCH_REPLICA,
        HealthNews,
        NewsKind,
        WatchedReplica,
    )
    from modelfleet.rendering.replica_manifests import SHARED_KINDS, RenderedReplica
    from modelfleet.replica import health as replica_health
    from modelfleet.replica.failure import RolloutFailedError, reason_of
    from modelfleet.replica.progress import parent_needs
    from modelfleet.replica.retries import API_RETRY, CHECK_RETRY, ENDPOINT_RETRY
    from modelfleet.replica.state import ReplicaInput, ReplicaState


# While a repair is in progress a polling replica checks its health this often (when its
# interval is longer), so that it reports Ready again soon after the cluster does.
REPAIR_POLL = timedelta(seconds=5)
# Longest activity summary the repair step writes (the reasons of many objects are cut).
_SUMMARY_LIMIT = 400
# How long a registered replica waits for its cluster's first scan (the next probe: 15 s by
# default) before it polls instead.
ACK_WAIT = timedelta(minutes=10)


class ServingReplica:
    """The replica's state, its reporting and its serving loop; ``ReplicaWorkflow`` adds the
    rollout saga, the handlers and the run."""

    def __init__(self, arg: ReplicaInput) -> None:
        self._input = arg
        self._replica = arg.replica
        # Everything that outlives a run (``replica.state``); the next run gets it whole.
        self._state: ReplicaState = arg.state
        # The rollout failed because its cluster could not be reached (``replica.failure``).
        self._infrastructure = False
        # The phase upserted to the visibility store by this run.
        self._phase_upserted: ReplicaPhase | None = None
        # Registered, and the cluster's baseline not yet compared with what was applied.
        self._unverified = False

    # --- the serving loop ----------------------------------------------------------------

    async def _serve(self, rendered: RenderedReplica) -> None:
        """Serve until torn down: watched by the cluster when it answers a registration, else
        polling. A repair not followed by Ready within the progress deadline fails the replica
        (``RolloutFailedError``)."""
        watched = await self._watched()
        try:
            await self._serving_loop(rendered, watched)
        except (RolloutFailedError, asyncio.CancelledError):
            if watched:
                await self._unregister()
            raise
        # (Not on continue-as-new: the next run registers again.)
        if watched:
            await self._unregister()

    async def _serving_loop(self, rendered: RenderedReplica, watched: bool) -> None:
        interval = timedelta(seconds=self._input.health_interval_seconds)
        resync = timedelta(seconds=self._input.drift_resync_seconds)
        next_resync = workflow.now() + resync
        turns = 0
        while not self._state.teardown:
            per_run = self._input.turns_per_run
            if (per_run and turns >= per_run) or workflow.info().is_continue_as_new_suggested():
                await self._continue_serving()
            turns += 1
            with contextlib.suppress(TimeoutError):
                if watched:
                    # No timer while healthy: the cluster's news, a repair deadline or teardown.
                    await workflow.wait_condition(
                        lambda: self._state.teardown or bool(self._state.news),
                        timeout=self._watched_timeout(interval),
                        timeout_summary="repair deadline or endpoint retry",
                    )
                else:
                    await workflow.wait_condition(
                        lambda: self._state.teardown,
                        timeout=interval
                        if self._state.repair_deadline is None
                        else min(interval, REPAIR_POLL),
                    )
            if self._state.teardown:
                return
            healthy: bool | None
            if watched:
                healthy = await self._take_news(rendered)
            else:
                healthy = await self._judge_health(rendered)
                if replica_health.drift_check_due(healthy, workflow.now(), next_resync):
                    next_resync = workflow.now() + resync
                    if await self._repair_drift(rendered):
                        self._start_repair_deadline()
            if healthy:
                self._state.repair_deadline = None
            elif (
                healthy is False
                and self._state.repair_deadline is not None
                and workflow.now() >= self._state.repair_deadline
            ):
                why = self._state.reason or "not ready"
                raise RolloutFailedError(f"not repaired within the progress deadline: {why}")

    def _watched_timeout(self, interval: timedelta) -> timedelta | None:
        if self._state.repair_deadline is not None:
            return max(self._state.repair_deadline - workflow.now(), timedelta(seconds=1))
        if self._state.phase is ReplicaPhase.READY and not self._state.published:
            # The publication at Ready failed (directory or Fleet unreachable): try again.
            return interval
        return None

    def _start_repair_deadline(self) -> None:
        if self._state.repair_deadline is None:
            self._state.repair_deadline = workflow.now() + timedelta(
                seconds=self._input.progress_deadline_seconds
            )

    async def _continue_serving(self) -> None:
        """Continue-as-new while serving: the next run starts in the serving loop, with the
        state whole (``replica.state``)."""
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(self._input.model_copy(update={"state": self._state}))

    # --- watched by the cluster ------------------------------------------------------------

    async def _take_news(self, rendered: RenderedReplica) -> bool:
        """Act on what the cluster said since the loop last looked; whether it is Ready."""
        news, self._state.news = self._state.news, []
        for item in news:
            await self._on_news(rendered, item)
        if self._state.phase is not ReplicaPhase.READY:
            return False
        if not self._state.published:
            await self._sync_endpoint(self._state.phase)
        return True

    async def _on_news(self, rendered: RenderedReplica, news: HealthNews) -> None:
        if news.kind is NewsKind.UNREACHABLE:
            # Nothing to check or compare against a silent API: the cluster's next answering
            # scan says how it is (and the pending comparison waits for that).
            await self._set(ReplicaPhase.UNKNOWN, ReplicaStep.SERVING, news.reason)
            return
        unverified, self._unverified = self._unverified, False
        if news.kind is NewsKind.REPAIR:
            await self._repair_and_register(rendered)
            return  # its comparison was the verification
        await self._on_health_news(rendered, news)
        if unverified:
            # The cluster's baseline is its first scan after a registration: an edit made
            # before that scan is part of it, so compare once, field by field.
            await self._repair_and_register(rendered, only_if_drifted=True)

    async def _repair_and_register(
        self, rendered: RenderedReplica, *, only_if_drifted: bool = False
    ) -> None:
        drifted = await self._repair_drift(rendered)
        if drifted:
            self._start_repair_deadline()
        if drifted or not only_if_drifted:
            # A fresh baseline for what it applied, and its phase now.
            await self._register()

    async def _on_health_news(self, rendered: RenderedReplica, news: HealthNews) -> None:
        if news.kind is NewsKind.WATCHING:
            pass  # the acknowledgement of a registration
        elif news.kind is NewsKind.HEALTHY:
            if self._state.phase is not ReplicaPhase.READY:
                await self._set(ReplicaPhase.READY, ReplicaStep.SERVING, "")
        elif (
            self._state.phase is not ReplicaPhase.DEGRADED
            or self._state.health_reason != news.reason
        ):
            # The cluster's scan reads the workloads only ("not Available"); once per new
            # verdict, one check reads their pods too, so that the deployment hears the
            # pods' story and their restarts (a crash loop is a failed replacement).
            self._state.health_reason = news.reason
            explained = await self._check(rendered)
            if explained is not None and not explained.ready:
                await self._set(
                    ReplicaPhase.DEGRADED,
                    ReplicaStep.SERVING,
                    explained.reason,
                    restarts=explained.restarts,
                )
            else:
                await self._set(ReplicaPhase.DEGRADED, ReplicaStep.SERVING, news.reason)

    async def _watched(self) -> bool:
        """Register and wait for the cluster's first word (its next scan); False, and polling
        instead, when there is no cluster workflow or it does not answer in time (dark)."""
        if not await self._register():
            return False
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: self._state.teardown or bool(self._state.news),
                timeout=ACK_WAIT,
                timeout_summary="the cluster's first scan",
            )
        if self._state.teardown or self._state.news:
            return True
        await self._unregister()
        workflow.logger.warning("no scan of %s by its cluster: polling", self._replica.name)
        return False

    async def _register(self) -> bool:
        """Ask the cluster's workflow to watch this replica; False when there is none."""
        r = self._replica
        entry = WatchedReplica(
            key=f"{r.namespace}/{r.name}",
            workflow_id=workflow.info().workflow_id,
            objects=len(self._state.applied),
            threshold=self._input.degraded_after_checks,
            healthy=self._state.phase is ReplicaPhase.READY,
        )
        cluster = workflow.get_external_workflow_handle(cluster_id(r.spec.cluster_name))
        try:
            await cluster.signal(WATCH_REPLICA, entry)
        except ApplicationError as exc:
            workflow.logger.info("no cluster workflow watches %s: %s", r.name, exc)
            return False
        self._unverified = True
        return True

    async def _unregister(self) -> None:
        r = self._replica
        cluster = workflow.get_external_workflow_handle(cluster_id(r.spec.cluster_name))
        # A cluster gone meanwhile has nothing to forget; one that missed it drops the replica
        # at the first signal that cannot reach it.
        with contextlib.suppress(ApplicationError):
            await cluster.signal(UNWATCH_REPLICA, f"{r.namespace}/{r.name}")

    # --- polling and repair ----------------------------------------------------------------

    async def _check(self, rendered: RenderedReplica) -> ReadyResult | None:
        """One health check, explained in the pods' words; None when it could not be made."""
        try:
            result: ReadyResult = await workflow.execute_activity(
                KUBE_CHECK_READY,
                WaitReadyRequest(
                    cluster=self._replica.spec.cluster_name,
                    rules=rendered.readiness,
                    deadline=workflow.now(),
                ),
                result_type=ReadyResult,
                start_to_close_timeout=timedelta(seconds=30),
                schedule_to_close_timeout=timedelta(seconds=90),
                retry_policy=CHECK_RETRY,
                summary="health check",
            )
        except ActivityError as exc:
            workflow.set_current_details(
                f"**{self._state.phase.value}** · health unknown: {reason_of(exc)}"
            )
            return None
        # (Not a command: the UI's details only, back from "health unknown".)
        workflow.set_current_details(
            details(self._state.phase, ReplicaStep.SERVING, self._state.reason)
        )
        return result

    async def _judge_health(self, rendered: RenderedReplica) -> bool | None:
        """One health check judged over time (``replica.health``): True healthy, False
        not, None when the check could not be made."""
        result = await self._check(rendered)
        verdict = replica_health.after_check(
            result, self._state.failed_checks, self._input.degraded_after_checks
        )
        self._state.failed_checks = verdict.failed_checks
        if verdict.phase is ReplicaPhase.READY:
            if self._state.phase is not ReplicaPhase.READY:
                await self._set(ReplicaPhase.READY, ReplicaStep.SERVING, "")
            elif not self._state.published:
                # The publication at Ready failed (directory or Fleet unreachable): try again.
                await self._sync_endpoint(self._state.phase)
        elif verdict.phase is ReplicaPhase.DEGRADED and (
            self._state.phase is not ReplicaPhase.DEGRADED or self._state.reason != verdict.reason
        ):
            await self._set(
                ReplicaPhase.DEGRADED,
                ReplicaStep.SERVING,
                verdict.reason,
                restarts=result.restarts if result is not None else 0,
            )
        return None if result is None else result.ready

    async def _repair_drift(self, rendered: RenderedReplica) -> bool:
        """Compare what this replica applies with the cluster and re-apply (server-side apply,
        modelfleet's field manager) what is missing or changed. True when something was."""
        manifests = [m for step in rendered.steps for m in step.manifests]
        cluster = self._replica.spec.cluster_name
        try:
            found: DriftResult = await workflow.execute_activity(
                KUBE_DRIFT,
                DriftRequest(cluster=cluster, manifests=manifests),
                result_type=DriftResult,
                start_to_close_timeout=timedelta(seconds=60),
                schedule_to_close_timeout=timedelta(minutes=2),
                retry_policy=API_RETRY,
                summary=f"drift check: {len(manifests)} applied object(s) against {cluster}",
            )
        except ActivityError as exc:
            workflow.logger.warning(
                "drift check of %s failed: %s", self._replica.name, reason_of(exc)
            )
            return False
        todo = replica_health.repairable(found.drifted)
        if not todo:
            return False
        why = "; ".join(d.reason for d in todo)
        summary = f"repair: {why}"
        if len(summary) > _SUMMARY_LIMIT:
            summary = summary[: _SUMMARY_LIMIT - 1] + "…"
        try:
            result: ApplyResult = await workflow.execute_activity(
                KUBE_APPLY,
                ApplyRequest(cluster=cluster, manifests=[manifests[d.index] for d in todo]),
                result_type=ApplyResult,
                start_to_close_timeout=timedelta(seconds=60),
                schedule_to_close_timeout=timedelta(minutes=5),
                retry_policy=API_RETRY,
                summary=summary,
            )
        except ActivityError as exc:
            await self._set(
                ReplicaPhase.DEGRADED,
                ReplicaStep.SERVING,
                f"repair failed ({why}): {reason_of(exc)}",
            )
            return True
        known = {applied_key(r) for r in self._state.applied}
        self._state.applied += [
            r for r in result.applied if r.kind not in SHARED_KINDS and applied_key(r) not in known
        ]
        phase = replica_health.repair_phase(self._state.phase, todo)
        await self._set(phase, ReplicaStep.SERVING, why)
        return True

    # --- reporting ---------------------------------------------------------------------------

    def _progress(self) -> ReplicaProgress:
        return ReplicaProgress(
            name=self._replica.name,
            phase=self._state.phase,
            step=self._state.step,
            reason=self._state.reason,
            at=workflow.now(),
            restarts=self._state.restarts,
            infrastructure=self._infrastructure,
        )

    async def _set(
        self, phase: ReplicaPhase, step: ReplicaStep, reason: str, *, restarts: int = 0
    ) -> None:
        self._state.phase, self._state.step, self._state.reason = phase, step, reason
        self._state.restarts = restarts
        if phase is not self._phase_upserted:
            workflow.upsert_search_attributes([search.PHASE.value_set(phase.value)])
            self._phase_upserted = phase
        workflow.set_current_details(details(phase, step, reason))
        progress = self._progress()
        if parent_needs(progress, self._state.told):
            parent = workflow.get_external_workflow_handle(self._input.parent_id)
            # The deployment may be gone; then there is nobody to tell.
            with contextlib.suppress(ApplicationError):
                await parent.signal("replica_progress", progress)
            self._state.told = progress
        await self._sync_endpoint(phase)

    async def _sync_endpoint(self, phase: ReplicaPhase) -> None:
        """Ready: publish this replica's ModelEndpoint; anything else: withdraw it (before the
        teardown deletes the route, so services stop sending traffic first)."""
        r = self._replica
        serving = phase is ReplicaPhase.READY
        # Unknown (its cluster's API is silent) leaves routing as it is: an API outage does not
        # stop a data plane, and the gateways' own health checks eject a backend that is down.
        if serving == self._state.published or phase is ReplicaPhase.UNKNOWN:
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
        self._state.published = serving
        self._state.ever_published = self._state.ever_published or serving


def details(phase: ReplicaPhase, step: ReplicaStep, reason: str) -> str:
    """The workflow's current details in the Temporal UI."""
    return f"**{phase.value}** · step `{step.value}`" + (f"\n\n{reason}" if reason else "")


def applied_key(ref: ObjectRef) -> tuple[str, str, str, str]:
    return (ref.api_version, ref.kind, ref.namespace or "", ref.name)
