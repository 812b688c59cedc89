"""The serving half of the ModelReplica workflow (``replica.workflow``): after Ready, its health
is watched and drift repaired (what the replica applied compared with what the cluster holds;
what is missing or changed is re-applied by server-side apply, a step in the history whose
summary says why).

Who watches: the replica registers with its InferenceCluster workflow, whose probe loop scans
every registered replica of the cluster with one activity and signals only those whose health
changed (``cluster.watch``, ``PATCH_CLUSTER_WATCH``). A healthy, idle replica runs no
activity and no timer at all; it wakes for a health signal (Degraded/Ready, endpoint included),
for objects missing or edited (drift repair, then it registers again), for its repair deadline
or for teardown. Without a cluster workflow to register with (a replica started on its own),
or one that says nothing within ``ACK_WAIT`` of the registration (dark, or on a worker from
before the watch), and in histories recorded before, it polls: a health check every interval
judged over time, and a drift comparison on a failed check and on a slow resync.

A mixin of ``ReplicaWorkflow``, in its own module because the saga and the watch are two
concerns; the state it reads is the workflow's (declared below), the reporting (``_set``) too.
Deterministic orchestration only: the decisions are ``replica.health``'s, all I/O is in
activities.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from modelfleet.api.deployments import ModelReplica
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
    from modelfleet.contracts.status import ReplicaPhase, ReplicaStep
    from modelfleet.contracts.watch_payloads import (
        UNWATCH_REPLICA,
        WATCH_REPLICA,
        HealthNews,
        NewsKind,
        WatchedReplica,
    )
    from modelfleet.contracts.workflow_inputs import ReplicaInput
    from modelfleet.rendering.replica_manifests import RenderedReplica
    from modelfleet.replica import health as replica_health


# Transient API trouble is retried with backoff; the step's own deadline bounds the total.
API_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=20),
    non_retryable_error_types=["PermanentKubeError", "ReadinessDeadlineExceeded"],
)
# Drift repair while serving: the replica compares what it applied with what the cluster holds
# and re-applies what is missing or changed; before, an object deleted outside modelfleet (or a
# cluster that came back empty) stayed gone. New activities in the serving loop.
PATCH_DRIFT_REPAIR = "replica-drift-repair"
# Health over time: Degraded only after N consecutive failed checks or the cluster reporting the
# readiness condition False, and a check that could not be made (API errors) counts for
# nothing; before, one failed sample (one injected 500) made a Ready replica Degraded. Changes
# the commands a failed check issues (no phase-change signal) and the check's retry policy.
PATCH_HEALTH_OVER_TIME = "replica-health-over-time"
# A health check's API errors are retried a few times, quickly; past that it is no sample.
CHECK_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=5),
    maximum_attempts=4,
    non_retryable_error_types=["PermanentKubeError"],
)
# While a repair is in progress the replica checks its health this often (when its interval is
# longer), so that it reports Ready again soon after the cluster does.
REPAIR_POLL = timedelta(seconds=5)
# Longest activity summary the repair step writes (the reasons of many objects are cut).
_SUMMARY_LIMIT = 400
# Added with ModelEndpoint publishing: a Ready replica publishes its endpoint and withdraws it
# when it stops serving. Histories recorded before have no such activities.
PATCH_PUBLISH_ENDPOINT = "publish-endpoint"
# Health after Ready is watched by the cluster (issue 11): the replica registers with its
# InferenceCluster workflow, which scans all its replicas with one activity per probe and
# signals only on a change, so a healthy, idle replica runs nothing. Before, every Ready replica
# ran a health check every 30 s and a drift comparison every 5 minutes, forever (330
# activities/s at 10,000 replicas). Histories recorded before schedule those timers and checks.
PATCH_CLUSTER_WATCH = "replica-cluster-watch"
# The cluster takes a replica's baseline with its first scan after a registration: an edit made
# before that scan (between the apply, or a repair, and the scan, up to a probe interval) is
# part of the baseline, and no later scan would see it. Since this patch the first news after a
# registration is followed by one field-by-field comparison (``kube.drift``), repaired like any
# other; histories recorded before run none.
PATCH_VERIFY_BASELINE = "replica-verify-watch-baseline"
# How long a registered replica waits for its cluster's first scan (the next probe: 15 s by
# default) before it polls instead.
ACK_WAIT = timedelta(minutes=10)


class RolloutFailedError(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ReplicaWatch:
    """The serving loop; ``ReplicaWorkflow`` provides the state and the reporting."""

    _input: ReplicaInput
    _replica: ModelReplica
    _phase: ReplicaPhase
    _reason: str
    _teardown: bool
    _published: bool
    _applied: list[ObjectRef]
    _failed_checks: int
    _repair_deadline: datetime | None
    _news: list[HealthNews]
    # Registered, and the cluster's baseline not yet compared with what was applied.
    _unverified: bool

    async def _set(self, phase: ReplicaPhase, step: ReplicaStep, reason: str) -> None:
        raise NotImplementedError

    async def _sync_endpoint(self, phase: ReplicaPhase) -> None:
        raise NotImplementedError

    async def _watch_health(self, rendered: RenderedReplica, serving_since: datetime) -> None:
        if workflow.patched(PATCH_CLUSTER_WATCH) and await self._watched():
            try:
                await self._watched_by_cluster(rendered, serving_since)
            except (RolloutFailedError, asyncio.CancelledError):
                await self._unregister()
                raise
            # (Not on continue-as-new: the next run registers again.)
            await self._unregister()
            return
        # Under PATCH_CLUSTER_WATCH and no cluster workflow to watch it (started on its own, or
        # its cluster deleted): nothing may be left unwatched, so it polls as before.
        if workflow.patched(PATCH_DRIFT_REPAIR):
            await self._watch_and_repair(rendered, serving_since)
            return
        interval = timedelta(seconds=self._input.health_interval_seconds)
        while not self._teardown:
            if workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(
                    self._input.model_copy(
                        update={"serving_since": serving_since, "applied": self._applied}
                    )
                )
            try:
                await workflow.wait_condition(lambda: self._teardown, timeout=interval)
            except TimeoutError:
                await self._check_health(rendered)

    async def _watch_and_repair(self, rendered: RenderedReplica, serving_since: datetime) -> None:
        """Health checks every interval; drift compared after a failed check and on the resync;
        a repair not followed by Ready within the progress deadline fails the replica."""
        over_time = workflow.patched(PATCH_HEALTH_OVER_TIME)
        interval = timedelta(seconds=self._input.health_interval_seconds)
        resync = timedelta(seconds=self._input.drift_resync_seconds)
        next_resync = workflow.now() + resync
        while not self._teardown:
            if workflow.info().is_continue_as_new_suggested():
                await self._continue_serving(serving_since)
            wait = interval if self._repair_deadline is None else min(interval, REPAIR_POLL)
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(lambda: self._teardown, timeout=wait)
            if self._teardown:
                return
            if over_time:
                healthy = await self._judge_health(rendered)
            else:
                await self._check_health(rendered)
                healthy = self._phase is ReplicaPhase.READY
            if replica_health.drift_check_due(healthy, workflow.now(), next_resync):
                next_resync = workflow.now() + resync
                if await self._repair_drift(rendered) and self._repair_deadline is None:
                    self._repair_deadline = workflow.now() + timedelta(
                        seconds=self._input.progress_deadline_seconds
                    )
            if healthy:
                self._repair_deadline = None
            elif (
                healthy is False
                and self._repair_deadline is not None
                and workflow.now() >= self._repair_deadline
            ):
                raise RolloutFailedError(
                    f"not repaired within the progress deadline: {self._reason or 'not ready'}"
                )

    async def _continue_serving(self, serving_since: datetime) -> None:
        """Continue-as-new while serving: the next run starts in the serving loop."""
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(
            self._input.model_copy(
                update={
                    "serving_since": serving_since,
                    "applied": self._applied,
                    "repair_deadline": self._repair_deadline,
                }
            )
        )

    async def _watched_by_cluster(self, rendered: RenderedReplica, serving_since: datetime) -> None:
        """Wait for the cluster's news, a repair deadline, or teardown; no timer while healthy."""
        while not self._teardown:
            if workflow.info().is_continue_as_new_suggested():
                # The next run registers again (idempotent).
                await self._continue_serving(serving_since)
            timeout: timedelta | None = None
            if self._repair_deadline is not None:
                timeout = max(self._repair_deadline - workflow.now(), timedelta(seconds=1))
            elif self._phase is ReplicaPhase.READY and not self._published:
                # The publication at Ready failed (directory or Fleet unreachable): try again.
                timeout = timedelta(seconds=self._input.health_interval_seconds)
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: self._teardown or bool(self._news),
                    timeout=timeout,
                    timeout_summary="repair deadline or endpoint retry",
                )
            if self._teardown:
                return
            news, self._news = self._news, []
            for item in news:
                await self._on_news(rendered, item)
            if self._phase is ReplicaPhase.READY:
                self._repair_deadline = None
                if not self._published and workflow.patched(PATCH_PUBLISH_ENDPOINT):
                    await self._sync_endpoint(self._phase)
            elif self._repair_deadline is not None and workflow.now() >= self._repair_deadline:
                raise RolloutFailedError(
                    f"not repaired within the progress deadline: {self._reason or 'not ready'}"
                )

    async def _on_news(self, rendered: RenderedReplica, news: HealthNews) -> None:
        unverified, self._unverified = self._unverified, False
        if news.kind is NewsKind.REPAIR:
            await self._repair_and_register(rendered)
            return  # its comparison was the verification
        await self._on_health_news(news)
        if unverified and workflow.patched(PATCH_VERIFY_BASELINE):
            await self._repair_and_register(rendered, only_if_drifted=True)

    async def _repair_and_register(
        self, rendered: RenderedReplica, *, only_if_drifted: bool = False
    ) -> None:
        drifted = await self._repair_drift(rendered)
        if drifted and self._repair_deadline is None:
            self._repair_deadline = workflow.now() + timedelta(
                seconds=self._input.progress_deadline_seconds
            )
        if drifted or not only_if_drifted:
            # A fresh baseline for what it applied, and its phase now.
            await self._register()

    async def _on_health_news(self, news: HealthNews) -> None:
        if news.kind is NewsKind.WATCHING:
            pass  # the acknowledgement of a registration
        elif news.kind is NewsKind.HEALTHY:
            if self._phase is not ReplicaPhase.READY:
                await self._set(ReplicaPhase.READY, ReplicaStep.SERVING, "")
        elif self._phase is not ReplicaPhase.DEGRADED or self._reason != news.reason:
            await self._set(ReplicaPhase.DEGRADED, ReplicaStep.SERVING, news.reason)

    async def _watched(self) -> bool:
        """Register and wait for the cluster's first word (its next scan); False, and polling
        instead, when there is no cluster workflow or it does not answer in time (dark, or a
        worker from before the watch that leaves the registration unhandled)."""
        if not await self._register():
            return False
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: self._teardown or bool(self._news),
                timeout=ACK_WAIT,
                timeout_summary="the cluster's first scan",
            )
        if self._teardown or self._news:
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
            objects=len(self._applied),
            threshold=self._input.degraded_after_checks,
            healthy=self._phase is ReplicaPhase.READY,
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

    async def _judge_health(self, rendered: RenderedReplica) -> bool | None:
        """One health check judged over time (``replica.health``): True healthy, False
        not, None when the check could not be made."""
        result: ReadyResult | None
        try:
            result = await workflow.execute_activity(
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
            result = None
            workflow.set_current_details(
                f"**{self._phase.value}** · health unknown: {reason_of(exc)}"
            )
        else:
            # (Not a command: the UI's details only, back from "health unknown".)
            workflow.set_current_details(details(self._phase, ReplicaStep.SERVING, self._reason))
        verdict = replica_health.after_check(
            result, self._failed_checks, self._input.degraded_after_checks
        )
        self._failed_checks = verdict.failed_checks
        if verdict.phase is ReplicaPhase.READY:
            if self._phase is not ReplicaPhase.READY:
                await self._set(ReplicaPhase.READY, ReplicaStep.SERVING, "")
            elif not self._published and workflow.patched(PATCH_PUBLISH_ENDPOINT):
                await self._sync_endpoint(self._phase)
        elif verdict.phase is ReplicaPhase.DEGRADED and (
            self._phase is not ReplicaPhase.DEGRADED or self._reason != verdict.reason
        ):
            await self._set(ReplicaPhase.DEGRADED, ReplicaStep.SERVING, verdict.reason)
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
        known = {applied_key(r) for r in self._applied}
        self._applied += [
            r for r in result.applied if r.kind != "Namespace" and applied_key(r) not in known
        ]
        phase = replica_health.repair_phase(self._phase, todo)
        await self._set(phase, ReplicaStep.SERVING, why)
        return True

    async def _check_health(self, rendered: RenderedReplica) -> None:
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
                retry_policy=RetryPolicy(maximum_attempts=2),
                summary="health check",
            )
        except ActivityError as exc:
            result = ReadyResult(ready=False, reason=f"cluster unreachable: {reason_of(exc)}")
        if result.ready and self._phase is not ReplicaPhase.READY:
            await self._set(ReplicaPhase.READY, ReplicaStep.SERVING, "")
        elif not result.ready and (
            self._phase is not ReplicaPhase.DEGRADED or self._reason != result.reason
        ):
            await self._set(ReplicaPhase.DEGRADED, ReplicaStep.SERVING, result.reason)
        elif (
            self._phase is ReplicaPhase.READY
            and not self._published
            and workflow.patched(PATCH_PUBLISH_ENDPOINT)
        ):
            # The publication at Ready failed (directory or Fleet unreachable): try again.
            await self._sync_endpoint(self._phase)


def details(phase: ReplicaPhase, step: ReplicaStep, reason: str) -> str:
    """The workflow's current details in the Temporal UI."""
    return f"**{phase.value}** · step `{step.value}`" + (f"\n\n{reason}" if reason else "")


def applied_key(ref: ObjectRef) -> tuple[str, str, str, str]:
    return (ref.api_version, ref.kind, ref.namespace or "", ref.name)


def reason_of(exc: BaseException) -> str:
    if isinstance(exc, RolloutFailedError):
        return exc.reason
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    cause = exc.__cause__ if isinstance(exc, ActivityError) and exc.__cause__ else exc
    return str(cause) or type(cause).__name__
