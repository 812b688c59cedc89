"""The ModelDeployment workflow (ID ``deployment/<ns>/<name>``): holds the spec and reconciles the
deployment's replicas against it.

Reconcile asks the Fleet to place missing replicas (``fleet.place``), starts a ModelReplica child
per new replica, tears down victims (scale-down, drained or vanished clusters) and releases their
capacity, rolls spec changes replica by replica honouring ``strategy`` (surge first; when the fleet
has no room for a surge, replace one at a time within ``maxUnavailable``), and re-places replicas
that failed, avoiding the cluster they failed on for a while.

Handlers: ``apply`` (Update, validated), ``scale`` (Update, validated, and a signal of the same
name), ``delete`` (Update), ``status`` (query). Deterministic orchestration only.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from modelfleet.activities.contracts import (
        FLEET_PLACE,
        FLEET_RELEASE,
        PlaceRequest,
        PlaceResponse,
        ReleaseRequest,
    )
    from modelfleet.api.deployments import ModelDeployment, ModelReplica
    from modelfleet.api.errors import FieldError, InvalidResourceError
    from modelfleet.api.meta import Condition, Model
    from modelfleet.api.rules import validate
    from modelfleet.workflows import search
    from modelfleet.workflows.ids import replica_id
    from modelfleet.workflows.replica import ReplicaInput, ReplicaWorkflow
    from modelfleet.workflows.signal_payloads import scale_replicas
    from modelfleet.workflows.status import (
        DeploymentStatus,
        ReplicaPhase,
        ReplicaProgress,
        ReplicaStatus,
        ReplicaStep,
    )

FLEET_TIMEOUT = timedelta(seconds=30)
FLEET_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=10))
RESYNC_INTERVAL = timedelta(seconds=60)
AVOID_AFTER_FAILURE = timedelta(minutes=10)
MAX_REPLICAS = 10
START_ATTEMPTS = 30
PATCH_PHASE_ON_PROGRESS = "publish-phase-on-replica-progress"


class ScaleRequest(Model):
    replicas: int


class DeploymentInput(Model):
    spec: ModelDeployment
    generation: int = 1
    replicas: dict[str, ReplicaStatus] = {}
    placed: dict[str, ModelReplica] = {}
    avoid: dict[str, datetime] = {}
    avoid_reasons: dict[str, str] = {}
    sequence: int = 0


def template_hash(md: ModelDeployment) -> str:
    """Identity of what a replica runs: a change here rolls every replica."""
    body = json.dumps(md.spec.template.to_wire(), sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()[:12]


@workflow.defn(name="ModelDeployment")
class DeploymentWorkflow:
    @workflow.init
    def __init__(self, arg: DeploymentInput) -> None:
        self._spec = arg.spec
        self._generation = arg.generation
        self._replicas: dict[str, ReplicaStatus] = dict(arg.replicas)
        self._placed: dict[str, ModelReplica] = dict(arg.placed)
        self._avoid: dict[str, datetime] = dict(arg.avoid)
        # Why each avoided cluster is avoided, so the status keeps saying why a replica failed
        # after the failed replica itself is gone.
        self._avoid_reasons: dict[str, str] = dict(arg.avoid_reasons)
        self._sequence = arg.sequence
        self._dirty = True
        self._deleting = False
        self._conditions: list[Condition] = []
        self._rejections: dict[str, str] = {}
        self._summary = ""

    # --- handlers --------------------------------------------------------------------------

    @workflow.update
    def apply(self, spec: ModelDeployment) -> DeploymentStatus:
        if spec.to_wire() != self._spec.to_wire():
            self._spec = spec
            self._generation += 1
            self._dirty = True
        return self._status()

    @apply.validator
    def _check_apply(self, spec: ModelDeployment) -> None:
        if (spec.namespace, spec.name) != (self._spec.namespace, self._spec.name):
            raise ValueError(f"this workflow holds {self._spec.ref}, not {spec.ref}")
        if self._deleting:
            raise ValueError(f"{self._spec.ref} is being deleted")
        errors = validate(spec)
        if errors:
            raise InvalidResourceError(spec.ref, errors)

    @workflow.update
    def scale(self, request: ScaleRequest) -> DeploymentStatus:
        self._scale_to(request.replicas)
        return self._status()

    @scale.validator
    def _check_scale(self, request: ScaleRequest) -> None:
        if not 0 <= request.replicas <= MAX_REPLICAS:
            raise InvalidResourceError(
                self._spec.ref,
                [FieldError(("spec", "replicas"), f"must be between 0 and {MAX_REPLICAS}")],
            )
        if self._deleting:
            raise ValueError(f"{self._spec.ref} is being deleted")

    @workflow.signal(name="scale")
    def scale_signal(self, replicas: Any) -> None:
        # Signals cannot be rejected. The payload is taken raw (a typed int made the SDK log a
        # decoding traceback on every replay) and validated here; a bad one is ignored and
        # logged once with the reason (workflow.logger is silent during replay).
        wanted = scale_replicas(replicas, MAX_REPLICAS)
        if isinstance(wanted, str):
            workflow.logger.warning("ignored scale signal: %s", wanted)
        elif self._deleting:
            workflow.logger.warning("ignored scale signal: %s is being deleted", self._spec.ref)
        else:
            self._scale_to(wanted)

    def _scale_to(self, replicas: int) -> None:
        if replicas != self._spec.spec.replicas:
            spec = self._spec.model_copy(deep=True)
            spec.spec.replicas = replicas
            self._spec = spec
            self._generation += 1
            self._dirty = True

    @workflow.update
    async def delete(self) -> DeploymentStatus:
        self._deleting = True
        await workflow.wait_condition(lambda: not self._replicas)
        return self._status()

    @workflow.signal
    def resync(self) -> None:
        """Reconcile now (the Fleet asks when a cluster with our replicas is drained)."""
        self._dirty = True

    @workflow.signal
    def replica_progress(self, progress: ReplicaProgress) -> None:
        status = self._replicas.get(progress.name)
        if status is None:
            return
        status.phase, status.step, status.reason = progress.phase, progress.step, progress.reason
        status.updated = progress.at
        if workflow.patched(PATCH_PHASE_ON_PROGRESS):
            # Keep ModelfleetPhase current for the UI and `get`, not only after a reconcile.
            self._publish()
        if progress.phase in (ReplicaPhase.FAILED, ReplicaPhase.TERMINATED) and (
            progress.step is ReplicaStep.DONE
        ):
            self._dirty = True

    @workflow.query
    def status(self) -> DeploymentStatus:
        return self._status()

    @workflow.query
    def spec(self) -> ModelDeployment:
        """The spec held now (``modelfleet get -o yaml``, ``diff``). A query only: adding it
        changes no history."""
        return self._spec

    # --- main loop -------------------------------------------------------------------------

    @workflow.run
    async def run(self, arg: DeploymentInput) -> DeploymentStatus:
        md = self._spec
        workflow.upsert_search_attributes(
            [
                search.KIND.value_set("ModelDeployment"),
                search.NAMESPACE.value_set(md.namespace),
                search.NAME.value_set(md.name),
            ]
        )
        while not self._deleting:
            try:
                await workflow.wait_condition(
                    lambda: self._dirty or self._deleting,
                    timeout=RESYNC_INTERVAL,
                    timeout_summary="periodic resync",
                )
            except TimeoutError:
                self._dirty = True
            if self._deleting:
                break
            self._dirty = False
            await self._reap_finished()
            await self._reconcile()
            self._publish()
            if workflow.info().is_continue_as_new_suggested() and not self._dirty:
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self._carry())
        await self._teardown_all()
        self._publish()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._status()

    def _carry(self) -> DeploymentInput:
        return DeploymentInput(
            spec=self._spec,
            generation=self._generation,
            replicas=self._replicas,
            placed=self._placed,
            avoid=self._avoid,
            avoid_reasons=self._avoid_reasons,
            sequence=self._sequence,
        )

    async def _reconcile(self) -> None:
        now = workflow.now()
        self._avoid = {c: until for c, until in self._avoid.items() if until > now}
        self._avoid_reasons = {c: r for c, r in self._avoid_reasons.items() if c in self._avoid}
        desired = self._spec.spec.replicas
        response = await self._place(desired)
        for victim in response.victims:
            await self._teardown(victim.replica.name, victim.reason)
        for replica in response.placed:
            await self._start_replica(replica)
        await self._roll()

    async def _roll(self) -> None:
        """Replace replicas running an older template, one at a time."""
        strategy = self._spec.spec.strategy
        current = template_hash(self._spec)
        while not self._deleting:
            outdated = sorted(
                (s for s in self._replicas.values() if s.template_hash != current),
                key=lambda s: (s.phase is ReplicaPhase.READY, s.name),
            )
            if not outdated:
                return
            old = outdated[0]
            if old.phase is not ReplicaPhase.READY:
                # A replica that is not serving costs nothing to replace in place.
                await self._teardown(old.name, "template changed")
                await self._fill()
                continue
            surged = None
            if strategy.max_surge > 0:
                response = await self._place(len(self._replicas) + 1)
                surged = response.placed[0] if response.placed else None
            if surged is not None:
                await self._start_replica(surged)
                if not await self._await_ready(surged.name):
                    self._summary = f"rollout paused: surge replica {surged.name} failed"
                    return
                await self._teardown(old.name, "replaced by a newer replica (surge)")
            elif strategy.max_unavailable > 0:
                await self._teardown(old.name, "replaced (no room to surge)")
                placed = await self._fill()
                for name in placed:
                    if not await self._await_ready(name):
                        self._summary = f"rollout paused: replica {name} failed"
                        return
            else:
                self._summary = "rollout blocked: no room to surge and maxUnavailable is 0"
                return

    async def _fill(self) -> list[str]:
        response = await self._place(self._spec.spec.replicas)
        for victim in response.victims:
            await self._teardown(victim.replica.name, victim.reason)
        for replica in response.placed:
            await self._start_replica(replica)
        return [r.name for r in response.placed]

    async def _await_ready(self, name: str) -> bool:
        await workflow.wait_condition(
            lambda: (
                self._deleting
                or name not in self._replicas
                or self._replicas[name].phase in (ReplicaPhase.READY, ReplicaPhase.FAILED)
            ),
            timeout_summary=f"wait for {name} to become Ready",
        )
        status = self._replicas.get(name)
        return status is not None and status.phase is ReplicaPhase.READY

    # --- fleet calls -----------------------------------------------------------------------

    async def _place(self, desired: int) -> PlaceResponse:
        self._sequence += 1
        request = PlaceRequest(
            request_id=f"{workflow.info().workflow_id}/{workflow.info().run_id}/{self._sequence}",
            deployment=self._spec,
            desired=desired,
            avoid_clusters=sorted(self._avoid),
            avoid_reasons={c: r for c, r in self._avoid_reasons.items() if c in self._avoid},
        )
        response: PlaceResponse = await workflow.execute_activity(
            FLEET_PLACE,
            request,
            result_type=PlaceResponse,
            summary=f"place {desired} replica(s)",
            start_to_close_timeout=FLEET_TIMEOUT,
            retry_policy=FLEET_RETRY,
        )
        self._conditions = response.conditions
        self._rejections = response.rejections
        self._summary = response.summary
        for kept in response.kept:
            self._placed[kept.name] = kept
        return response

    async def _release(self, names: list[str]) -> None:
        await workflow.execute_activity(
            FLEET_RELEASE,
            ReleaseRequest(namespace=self._spec.namespace, replicas=names),
            result_type=int,
            summary=f"release {', '.join(names)}",
            start_to_close_timeout=FLEET_TIMEOUT,
            retry_policy=FLEET_RETRY,
        )

    # --- children --------------------------------------------------------------------------

    async def _start_replica(self, replica: ModelReplica) -> None:
        self._placed[replica.name] = replica
        self._replicas[replica.name] = ReplicaStatus(
            name=replica.name,
            cluster=replica.spec.cluster_name,
            index=replica.spec.index,
            phase=ReplicaPhase.PENDING,
            step=ReplicaStep.PLACED,
            template_hash=template_hash(self._spec),
            pools={e.name: e.members[0].node_pool_name for e in replica.spec.engines},
            updated=workflow.now(),
        )
        arg = ReplicaInput(
            replica=replica,
            parent_id=workflow.info().workflow_id,
            progress_deadline_seconds=self._spec.spec.strategy.progress_deadline_seconds,
        )
        # A replacement takes the name of the slot it fills; the previous holder of that name
        # may still be closing (it reports done just before it returns), so retry briefly.
        for attempt in range(START_ATTEMPTS):
            try:
                await workflow.start_child_workflow(
                    ReplicaWorkflow.run,
                    arg,
                    id=replica_id(replica.namespace, replica.name),
                    parent_close_policy=ParentClosePolicy.ABANDON,
                    static_summary=f"{replica.name} on {replica.spec.cluster_name}",
                )
                return
            except WorkflowAlreadyStartedError:
                if attempt == START_ATTEMPTS - 1:
                    raise
                await workflow.sleep(timedelta(seconds=1), summary=f"{replica.name} still closing")

    async def _teardown(self, name: str, reason: str) -> None:
        status = self._replicas.get(name)
        if status is None:
            await self._release([name])
            return
        if status.phase not in (ReplicaPhase.FAILED, ReplicaPhase.TERMINATED):
            status.phase, status.step, status.reason = (
                ReplicaPhase.TERMINATING,
                ReplicaStep.TEARDOWN,
                reason,
            )
            handle = workflow.get_external_workflow_handle(replica_id(self._spec.namespace, name))
            await handle.signal("teardown")
            await workflow.wait_condition(
                lambda: self._replicas[name].step is ReplicaStep.DONE,
                timeout_summary=f"wait for {name} teardown",
            )
        await self._forget(name)

    async def _forget(self, name: str) -> None:
        # Release first: a replica leaves the status only once its capacity is free again.
        await self._release([name])
        self._replicas.pop(name, None)
        self._placed.pop(name, None)

    async def _reap_finished(self) -> None:
        """Release replicas whose workflow ended by itself (failed and compensated)."""
        for name, status in sorted(self._replicas.items()):
            if status.step is ReplicaStep.DONE:
                if status.phase is ReplicaPhase.FAILED:
                    until = workflow.now() + AVOID_AFTER_FAILURE
                    self._avoid[status.cluster] = until
                    self._avoid_reasons[status.cluster] = f"replica {name} failed: {status.reason}"
                await self._forget(name)

    async def _teardown_all(self) -> None:
        for name in sorted(self._replicas):
            await self._teardown(name, "deployment deleted")

    # --- reporting -------------------------------------------------------------------------

    def _status(self) -> DeploymentStatus:
        current = template_hash(self._spec)
        replicas = [self._replicas[k] for k in sorted(self._replicas)]
        ready = sum(1 for r in replicas if r.phase is ReplicaPhase.READY)
        desired = self._spec.spec.replicas
        conditions = list(self._conditions)
        conditions.append(
            Condition(
                type="ReplicasReady",
                status="True" if ready >= desired and desired > 0 else "False",
                reason="AllReplicasReady"
                if ready >= desired
                else ("NoReplicasScheduled" if not replicas else "ModelStarting"),
                message=f"{ready} of {desired} ready",
            )
        )
        if self._deleting:
            phase = "Deleting"
        elif ready >= desired and all(r.template_hash == current for r in replicas):
            phase = "Ready"
        elif any(r.phase is ReplicaPhase.FAILED for r in replicas):
            phase = "Degraded"
        else:
            phase = "Progressing"
        return DeploymentStatus(
            namespace=self._spec.namespace,
            name=self._spec.name,
            generation=self._generation,
            desired=desired,
            scheduled=len(replicas),
            ready=ready,
            updated=sum(1 for r in replicas if r.template_hash == current),
            phase=phase,
            conditions=conditions,
            replicas=replicas,
            rejections=self._rejections,
            summary=self._summary,
            deleting=self._deleting,
        )

    def _publish(self) -> None:
        status = self._status()
        workflow.upsert_search_attributes(
            [
                search.PHASE.value_set(status.phase),
                search.CLUSTERS.value_set(sorted({r.cluster for r in status.replicas})),
            ]
        )
        workflow.set_current_details(
            f"**{status.phase}** · {status.ready}/{status.desired} ready"
            + (f"\n\n{status.summary}" if status.summary else "")
        )
