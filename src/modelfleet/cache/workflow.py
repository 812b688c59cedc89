"""The ModelCache workflow (ID ``cache/<ns>/<name>``): stages a cache's weights on every cluster its
selector matches (and each that starts to match), and keeps them staged while the cache exists.

Every pass asks the Fleet which clusters exist, looks at the cache's objects on each cluster
(``cache.observe``), lets the pure :mod:`modelfleet.cache.decide` choose the next step, and
carries it out: create the volume, start the hydration Job (with the token Secret the worker
writes), follow its progress, retry a failed download after a growing back-off, clean the Job
and the Secret once Ready, re-hydrate when the revision changes, and remove what a cluster no
longer needs, never a volume a workload still mounts unless forced. The per-cluster result goes
to the Fleet (``cache.report``), which places replicas of deployments referencing the cache only
where it is Ready.

State stays bounded: one small record per cluster (``cache.state``), carried whole across
continue-as-new. Handlers:
``apply`` and ``delete`` (Updates), ``resync`` (signal), ``status`` (query). Deterministic
orchestration only: decisions and rendering are pure, all I/O is in activities.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, VersioningBehavior
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from modelfleet.api.caches import ModelCache
    from modelfleet.api.manifest_errors import InvalidResourceError
    from modelfleet.api.rules import validate
    from modelfleet.cache.decide import (
        Act,
        ClusterPlan,
        Want,
        failed_attempt,
        overall,
        plan_cluster,
        plan_removal,
        targets_for,
    )
    from modelfleet.cache.decide import (
        RetryPolicy as StagingRetry,
    )
    from modelfleet.cache.state import CacheInput
    from modelfleet.contracts import search
    from modelfleet.contracts.cache_payloads import (
        CACHE_CLEAN,
        CACHE_OBSERVE,
        CACHE_REPORT,
        CACHE_STAGE,
        CACHE_TARGETS,
        CacheObjects,
        CacheObservation,
        CachePhase,
        CacheReport,
        CacheStatus,
        CacheTarget,
        CleanRequest,
        ClusterCache,
        DeleteCache,
        ObserveRequest,
        StageRequest,
    )
    from modelfleet.contracts.error_types import (
        MISSING_CREDENTIALS,
        MISSING_SECRET,
        PERMANENT_KUBE_ERROR,
    )
    from modelfleet.contracts.versioning import declared
    from modelfleet.rendering.model_cache import (
        auth_secret_name,
        cache_bytes,
        cache_labels,
        claim_name,
        job_name,
        render_auth_secret,
        render_claim,
        render_job,
        source_digest,
    )

# Kubernetes trouble is retried briefly inside a pass; the next pass tries again anyway.
KUBE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=3,
    non_retryable_error_types=[PERMANENT_KUBE_ERROR, MISSING_SECRET, MISSING_CREDENTIALS],
)
FLEET_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)
# Progress goes to the Fleet in steps of this many percent: each report is a Fleet Update that
# refreshes its scheduler snapshot, and placement only needs Ready or not (plus a fair reason).
REPORT_STEP = 10
# Continue-as-new well before Temporal's limits: a pass adds a few events per cluster.
MAX_HISTORY_EVENTS = 4000


@workflow.defn(name="ModelCache", versioning_behavior=declared(VersioningBehavior.AUTO_UPGRADE))
class CacheWorkflow:
    @workflow.init
    def __init__(self, arg: CacheInput) -> None:
        self._input = arg  # the settings; its ``state`` is ``self._state``'s first value, no more
        self._state = arg.state
        self._wake = False
        # What the Fleet was last told; None: tell it (again) on the next pass.
        self._reported: dict[str, str] | None = None
        self._reason = ""
        self._attributes: tuple[str, tuple[str, ...]] | None = None

    # --- handlers --------------------------------------------------------------------------

    @workflow.update
    def apply(self, cache: ModelCache) -> CacheStatus:
        self._state.spec = cache
        self._wake = True
        return self._status()

    @apply.validator
    def _check_apply(self, cache: ModelCache) -> None:
        errors = validate(cache)
        if errors:
            raise InvalidResourceError(cache.ref, errors)
        if cache.ref != self._state.spec.ref:
            raise ValueError(f"this workflow holds {self._state.spec.ref}, not {cache.ref}")
        if self._state.deleting:
            raise ValueError(f"{cache.ref} is being deleted")

    @workflow.update
    def delete(self, request: DeleteCache) -> CacheStatus:
        self._state.deleting = True
        self._state.force = self._state.force or request.force
        self._wake = True
        return self._status()

    @workflow.signal
    def resync(self) -> None:
        self._wake = True

    @workflow.query
    def status(self) -> CacheStatus:
        return self._status()

    @workflow.query
    def spec(self) -> ModelCache:
        return self._state.spec

    # --- the loop --------------------------------------------------------------------------

    @workflow.run
    async def run(self, arg: CacheInput) -> CacheStatus:
        c = self._state.spec
        workflow.upsert_search_attributes(
            [
                search.KIND.value_set("ModelCache"),
                search.NAMESPACE.value_set(c.namespace),
                search.NAME.value_set(c.name),
            ]
        )
        while True:
            await self._pass()
            if self._state.deleting and not self._state.clusters:
                break
            if self._should_continue_as_new():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self._input.model_copy(update={"state": self._state}))
            settled = all(s.phase is CachePhase.READY for s in self._state.clusters.values())
            seconds = self._input.idle_poll_seconds if settled else self._input.busy_poll_seconds
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(lambda: self._wake, timeout=seconds)
            self._wake = False
        await self._report(force=True)
        workflow.upsert_search_attributes([search.PHASE.value_set("Deleted")])
        workflow.set_current_details("**Deleted**")
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._status()

    def _should_continue_as_new(self) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() >= MAX_HISTORY_EVENTS
        )

    async def _pass(self) -> None:
        # One spec for the whole pass, even if an apply lands while its activities run.
        cache = self._state.spec
        try:
            targets: list[CacheTarget] = await workflow.execute_activity(
                CACHE_TARGETS,
                cache.namespace,
                result_type=list[CacheTarget],
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=FLEET_RETRY,
                summary="which clusters exist",
            )
        except ActivityError as exc:
            self._reason = f"cannot read the fleet's clusters: {_cause(exc)}"
            self._show()
            return
        self._reason = ""
        wanted = {} if self._state.deleting else {t.cluster: t for t in targets_for(cache, targets)}
        known = {t.cluster: t for t in targets}
        for name in list(self._state.clusters):
            if name not in known:
                # The cluster left the fleet: nothing left there to talk to or clean.
                del self._state.clusters[name]
        names = sorted((set(self._state.clusters) | set(wanted)) & set(known))
        await asyncio.gather(*(self._step(cache, n, known[n], n in wanted) for n in names))
        await self._report()
        self._show()

    async def _step(self, cache: ModelCache, name: str, target: CacheTarget, wanted: bool) -> None:
        record = self._state.clusters.get(name)
        if record is None:
            record = self._state.clusters[name] = ClusterCache(
                cluster=name, namespace=target.namespace
            )
        if not target.ready:
            self._state.clusters[name] = record.model_copy(
                update={"message": "cluster not ready; waiting for it"}
            )
            return
        digest = source_digest(cache)
        objects = CacheObjects(
            cluster=name,
            namespace=record.namespace or target.namespace,
            claim=claim_name(cache.namespace, cache.name),
            job=job_name(cache.namespace, cache.name, digest),
            secret=auth_secret_name(cache.namespace, cache.name),
        )
        try:
            obs: CacheObservation = await workflow.execute_activity(
                CACHE_OBSERVE,
                ObserveRequest(objects=objects),
                result_type=CacheObservation,
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=KUBE_RETRY,
                summary=f"observe on {name}",
            )
        except ActivityError as exc:
            self._state.clusters[name] = record.model_copy(
                update={"message": f"cannot look at the cluster: {_cause(exc)}"}
            )
            return
        now = workflow.now()
        if wanted:
            want = Want(digest=digest, job=objects.job, bytes_total=cache_bytes(cache))
            retry = StagingRetry(self._input.retry_seconds, self._input.max_retry_seconds)
            plan = plan_cluster(record, obs, want, now, retry)
        else:
            plan = plan_removal(record, obs, now, force=self._state.force)
        self._state.clusters[name] = await self._carry_out(cache, plan, objects, target)
        if plan.gone:
            del self._state.clusters[name]

    async def _carry_out(
        self, cache: ModelCache, plan: ClusterPlan, objects: CacheObjects, target: CacheTarget
    ) -> ClusterCache:
        state = plan.state
        acts = set(plan.acts)
        where = {"cluster": objects.cluster, "namespace": objects.namespace}
        try:
            if Act.APPLY_CLAIM in acts:
                storage = cache.spec.storage_class_name or target.storage_class
                claim = render_claim(cache, storage_class=storage, **where)
                await self._stage(
                    StageRequest(objects=objects, manifests=[claim]), "create the volume"
                )
            cleaning = {Act.DELETE_JOB, Act.DELETE_SECRET, Act.DELETE_CLAIM} & acts
            if cleaning:
                await workflow.execute_activity(
                    CACHE_CLEAN,
                    CleanRequest(
                        objects=objects,
                        jobs=Act.DELETE_JOB in acts,
                        secret=Act.DELETE_SECRET in acts,
                        claim=Act.DELETE_CLAIM in acts,
                        labels=cache_labels(cache, objects.cluster),
                    ),
                    result_type=int,
                    start_to_close_timeout=timedelta(seconds=60),
                    retry_policy=KUBE_RETRY,
                    summary="clean up on " + objects.cluster,
                )
        except ActivityError as exc:
            return state.model_copy(update={"message": f"{state.message}; {_cause(exc)}"})
        if Act.APPLY_JOB in acts:
            art = cache.spec.artifact
            auth = art.auth_secret if art is not None else None
            request = StageRequest(
                objects=objects,
                manifests=[render_job(cache, with_token=auth is not None, **where)],
            )
            if auth is not None:
                request.auth_secret = f"{cache.namespace}/{auth.name}"
                request.auth_key = auth.key
                request.secret_manifest = render_auth_secret(cache, **where)
            try:
                await self._stage(request, "start the download")
            except ActivityError as exc:
                retry = StagingRetry(self._input.retry_seconds, self._input.max_retry_seconds)
                return failed_attempt(state, _cause(exc), workflow.now(), retry)
        return state

    async def _stage(self, request: StageRequest, what: str) -> None:
        await workflow.execute_activity(
            CACHE_STAGE,
            request,
            result_type=int,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=KUBE_RETRY,
            summary=f"{what} on {request.objects.cluster}",
        )

    async def _report(self, *, force: bool = False) -> None:
        """Tell the Fleet where the cache is Ready (and how it stands elsewhere), on change."""
        cache = self._state.spec
        states = {} if self._state.deleting else self._state.clusters
        clusters = {name: states[name].summary(REPORT_STEP) for name in sorted(states)}
        if clusters == self._reported and not force:
            return
        try:
            await workflow.execute_activity(
                CACHE_REPORT,
                CacheReport(namespace=cache.namespace, name=cache.name, clusters=clusters),
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=FLEET_RETRY,
                summary="report readiness to the Fleet",
            )
        except ActivityError as exc:
            self._reason = f"cannot report to the Fleet: {_cause(exc)}"
            return
        self._reported = clusters

    # --- reporting -------------------------------------------------------------------------

    def _show(self) -> None:
        phase, ready = overall(list(self._state.clusters.values()), deleting=self._state.deleting)
        attributes = (phase, tuple(sorted(self._state.clusters)))
        if attributes != self._attributes:
            # An upsert is an event in history: only when something findable changed.
            self._attributes = attributes
            workflow.upsert_search_attributes(
                [
                    search.PHASE.value_set(phase),
                    search.CLUSTERS.value_set(list(attributes[1])),
                ]
            )
        lines = [f"**{phase}** · {ready}/{len(self._state.clusters)} clusters Ready"]
        lines += [f"- {name}: {s.summary()}" for name, s in sorted(self._state.clusters.items())]
        if self._reason:
            lines.append(self._reason)
        workflow.set_current_details("\n".join(lines))

    def _status(self) -> CacheStatus:
        hf = self._state.spec.spec.hugging_face
        art = self._state.spec.spec.artifact
        phase, ready = overall(list(self._state.clusters.values()), deleting=self._state.deleting)
        return CacheStatus(
            namespace=self._state.spec.namespace,
            name=self._state.spec.name,
            repo=hf.repo if hf is not None else getattr(art, "uri", ""),
            revision=(hf.revision or "") if hf is not None else "",
            size_gib=art.size_gib if art is not None else 0,
            phase=phase,
            ready=ready,
            total=len(self._state.clusters),
            clusters=[self._state.clusters[k] for k in sorted(self._state.clusters)],
            deleting=self._state.deleting,
            reason=self._reason,
        )


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__ if isinstance(exc, ActivityError) and exc.__cause__ else exc
    return str(cause) or type(cause).__name__
