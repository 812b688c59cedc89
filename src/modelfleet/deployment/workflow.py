"""The ModelDeployment workflow (ID ``deployment/<ns>/<name>``): holds the spec and reconciles the
deployment's replicas against it.

Every decision (what to place, what to tear down, surge or replace in place, when to pause, which
clusters to avoid) is made by the pure ``deployment.decisions`` from the workflow's one
state object. This workflow only asks it for the next action and carries that out: the Fleet's
``fleet.place`` and ``fleet.release`` activities and the engines' readings (scheduled by the
functions of ``deployment.calls``), a ModelReplica child per replica, the ``teardown`` signal to
a replica, and durable waits.

Handlers: ``apply`` (Update, validated), ``scale`` (Update, validated, and a signal of the same
name), ``pause`` and ``resume`` (Updates), ``promote`` and ``abort`` (Updates, refused when no
canary roll is under way), ``delete`` (Update), ``resync``, ``replica_progress`` and
``rollout_slot`` (signals), ``status``, ``spec``, ``revisions`` and ``decisions`` (queries).
A pass that may place or roll first waits for a slot of the RolloutSlots workflow
(``deployment.slots``: admission control).
Deterministic orchestration only: the handlers are methods of one class sharing its state, and
every decision lives in ``deployment.decisions`` (imported as ``rollout``).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import VersioningBehavior
from temporalio.exceptions import ActivityError, ApplicationError, WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from modelfleet.admission.state import SlotNotice
    from modelfleet.api.deployments import ModelDeployment
    from modelfleet.api.manifest_errors import FieldError, InvalidResourceError
    from modelfleet.api.rules import validate
    from modelfleet.contracts import search
    from modelfleet.contracts.ids import ROLLOUT_SLOTS_ID, replica_id
    from modelfleet.contracts.status import (
        DeploymentStatus,
        ReplicaPhase,
        ReplicaProgress,
        ReplicaStep,
    )
    from modelfleet.contracts.versioning import declared
    from modelfleet.contracts.wire import WireModel
    from modelfleet.deployment import calls, slots
    from modelfleet.deployment import decisions as rollout
    from modelfleet.deployment.decisions import DeploymentState
    from modelfleet.deployment.signals import scale_replicas
    from modelfleet.rendering.facts import ClusterFacts
    from modelfleet.replica.state import ReplicaInput
    from modelfleet.replica.workflow import ReplicaWorkflow

# A replica told to tear down gets this long to finish; then its workflow is cancelled (which
# cancels its current activity and compensates), and after as long again it is given up on.
TEARDOWN_GRACE = timedelta(minutes=10)
MAX_REPLICAS = 10
START_ATTEMPTS = 30
# A deployment waiting for a rollout slot asks again this often (the RolloutSlots workflow
# answers a repeated request, never counts it twice): a lost answer never wedges it.
ASK_AGAIN = timedelta(minutes=5)
# The continue-as-new input is the workflow's whole state.
DeploymentInput = DeploymentState


class ScaleRequest(WireModel):
    """What the ``scale`` Update takes (the workflow reads it raw: ``deployment.signals``)."""

    replicas: int


@workflow.defn(
    name="ModelDeployment", versioning_behavior=declared(VersioningBehavior.AUTO_UPGRADE)
)
class DeploymentWorkflow:
    @workflow.init
    def __init__(self, arg: DeploymentInput) -> None:
        # The first run stamps the creation time and revision 1; both are carried onwards.
        self._state = rollout.started(rollout.carried(arg), workflow.info().start_time)
        # Rendering settings per cluster from the Fleet's answers. Not carried across
        # continue-as-new: every replica start follows a placement answer in the same run.
        self._facts: dict[str, ClusterFacts] = {}
        # Template keys the Fleet holds (it answered a placement that carried them whole).
        self._fleet_templates: dict[str, None] = {}
        self._passes = 0  # passes ended in this run
        # The search attribute values last upserted (upserted only when they change).
        self._upserted: rollout.SearchValues | None = None
        # The held-back reason last written to the memo ("": none).
        self._rolled_back = ""
        # Releases of a rollout slot still being sent (awaited before the run ends).
        self._releasing = 0

    # --- handlers --------------------------------------------------------------------------

    @workflow.update
    def apply(self, spec: ModelDeployment) -> DeploymentStatus:
        self._state = rollout.applied(self._state, spec, workflow.now())
        return self._published()

    @apply.validator
    def _check_apply(self, spec: ModelDeployment) -> None:
        held = self._state.spec
        if (spec.namespace, spec.name) != (held.namespace, held.name):
            raise ValueError(f"this workflow holds {held.ref}, not {spec.ref}")
        if self._state.deleting:
            raise ValueError(f"{held.ref} is being deleted")
        errors = validate(spec)
        if errors:
            raise InvalidResourceError(spec.ref, errors)

    @workflow.update
    def scale(self, request: Any) -> DeploymentStatus:
        # Taken raw, like the signal, and validated below: a typed ScaleRequest made a payload
        # sent by hand with a wrong key fail with the SDK's bare "Failed decoding arguments".
        wanted = scale_replicas(request, MAX_REPLICAS)
        assert isinstance(wanted, int)  # the validator refused anything else
        self._state = rollout.scaled(self._state, wanted, workflow.now())
        return self._published()

    @scale.validator
    def _check_scale(self, request: Any) -> None:
        wanted = scale_replicas(request, MAX_REPLICAS)
        if isinstance(wanted, str):
            raise InvalidResourceError(
                self._state.spec.ref,
                [FieldError(("spec", "replicas"), wanted.removeprefix("replicas "))],
            )
        if self._state.deleting:
            raise ValueError(f"{self._state.spec.ref} is being deleted")

    @workflow.signal(name="scale")
    def scale_signal(self, replicas: Any) -> None:
        # Signals cannot be rejected. The payload is taken raw (a typed int made the SDK log a
        # decoding traceback on every replay) and validated here; a bad one is ignored and
        # logged once with the reason (workflow.logger is silent during replay).
        wanted = scale_replicas(replicas, MAX_REPLICAS)
        if isinstance(wanted, str):
            workflow.logger.warning("ignored scale signal: %s", wanted)
        elif self._state.deleting:
            workflow.logger.warning(
                "ignored scale signal: %s is being deleted", self._state.spec.ref
            )
        else:
            self._state = rollout.scaled(self._state, wanted, workflow.now(), "scale signal")

    @workflow.update
    def pause(self) -> DeploymentStatus:
        """No new roll starts; replicas keep running and scaling still works."""
        self._state = rollout.paused(self._state, workflow.now())
        return self._published()

    @workflow.update
    def resume(self) -> DeploymentStatus:
        """The next pass rolls to the spec's template."""
        self._state = rollout.resumed(self._state, workflow.now())
        return self._published()

    @pause.validator
    def _check_pause(self) -> None:
        if self._state.deleting:
            raise ValueError(f"{self._state.spec.ref} is being deleted")

    @resume.validator
    def _check_resume(self) -> None:
        self._check_pause()

    @workflow.update
    def promote(self) -> DeploymentStatus:
        """``rollout promote``: the canary roll skips its remaining analyses, to 100%."""
        self._state = rollout.promoted_canary(self._state, workflow.now())
        return self._published()

    @workflow.update
    def abort(self) -> DeploymentStatus:
        """``rollout abort``: the canary roll ends and the deployment rolls back now."""
        self._state = rollout.aborted_canary(self._state, workflow.now())
        return self._published()

    @promote.validator
    def _check_promote(self) -> None:
        self._check_pause()
        why = rollout.canary_in_progress(self._state)
        if why:
            raise ValueError(why)

    @abort.validator
    def _check_abort(self) -> None:
        self._check_promote()

    @workflow.update
    async def delete(self) -> DeploymentStatus:
        self._state = rollout.deleted(self._state)
        await workflow.wait_condition(lambda: not self._state.replicas)
        return self._status()

    @workflow.signal
    def resync(self) -> None:
        """Reconcile now (the Fleet asks when a cluster with our replicas is drained)."""
        self._state = rollout.resync(self._state)

    @workflow.signal
    def replica_progress(self, progress: ReplicaProgress) -> None:
        if progress.name not in self._state.replicas:
            return
        self._state = rollout.progressed(self._state, progress)
        self._release_if_due()
        # Keep ModelfleetPhase current for the UI and `get`, not only after a reconcile.
        self._publish()

    @workflow.signal
    def rollout_slot(self, notice: SlotNotice) -> None:
        """The RolloutSlots workflow's answer to a request (``deployment.slots``)."""
        self._state = slots.answered(self._state, notice, workflow.now())
        if self._state.stage is rollout.Stage.REST:
            self._release_if_due()  # a grant nobody waits for (while a pass runs: at its end)

    @workflow.query
    def status(self) -> DeploymentStatus:
        return self._status()

    @workflow.query
    def spec(self) -> ModelDeployment:
        """The spec held now (``modelfleet get -o yaml``, ``diff``). A query only: adding it
        changes no history."""
        return self._state.spec

    @workflow.query
    def revisions(self) -> list[rollout.Revision]:
        """The kept revisions, oldest first (``rollout history``, ``undo``). A query only."""
        return self._state.revisions

    @workflow.query
    def decisions(self) -> list[rollout.LogEntry]:
        """The decisions that changed something, oldest first (``describe``). A query only."""
        return self._state.log

    # --- main loop: ask, then carry out ----------------------------------------------------

    @workflow.run
    async def run(self, arg: DeploymentInput) -> DeploymentStatus:
        md = self._state.spec
        workflow.upsert_search_attributes(
            [
                search.KIND.value_set("ModelDeployment"),
                search.NAMESPACE.value_set(md.namespace),
                search.NAME.value_set(md.name),
                # In the run's first upsert: `get deployments` shows AGE from visibility.
                *([search.CREATED.value_set(self._state.created)] if self._state.created else []),
            ]
        )
        while True:
            self._release_if_due()
            self._state, action = rollout.next_action(self._state, workflow.now())
            if isinstance(action, rollout.Rest):
                await self._rest(action)
            elif isinstance(action, rollout.Place):
                await self._place(action)
            elif isinstance(action, rollout.CheckPlacement):
                await self._check_placement(action)
            elif isinstance(action, rollout.DryPlace):
                await self._dry_place(action)
            elif isinstance(action, rollout.StartReplica):
                await self._start_replica(action)
            elif isinstance(action, rollout.SignalTeardown):
                await self._signal_teardown(action.name)
            elif isinstance(action, rollout.Forget):
                # Release first: a replica leaves the status only once its capacity is free.
                await calls.release(self._state.spec.namespace, [action.name])
                self._state = rollout.forgotten(self._state, action.name, workflow.now())
            elif isinstance(action, rollout.Wait):
                await self._wait(action)
            elif isinstance(action, rollout.CheckErrors):
                await self._check_errors(action)
            elif isinstance(action, rollout.ReadFigures):
                await self._read_figures(action)
            elif isinstance(action, rollout.EndPass):
                self._publish()
                await self._maybe_continue_as_new()
            else:
                assert isinstance(action, rollout.Finish)
                self._publish()
                await workflow.wait_condition(
                    lambda: workflow.all_handlers_finished() and not self._releasing
                )
                return self._status()

    async def _rest(self, action: rollout.Rest) -> None:
        # A timeout is the periodic resync: it starts a pass like any change does.
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: rollout.rest_over(self._state),
                timeout=action.timeout,
                timeout_summary="periodic resync",
            )
        self._state = rollout.woke(self._state, workflow.now())
        if slots.wants_slot(self._state):
            await self._acquire_slot()

    # --- rollout slots (admission control) -------------------------------------------------

    async def _acquire_slot(self) -> None:
        """Wait for a slot from the RolloutSlots workflow; without one answering, go on."""
        gate = workflow.get_external_workflow_handle(ROLLOUT_SLOTS_ID)
        # Waiting before the request leaves: its answer may arrive in the same task.
        self._state = slots.asked(self._state)
        while self._state.slot == slots.WAITING and not self._state.deleting:
            try:
                await gate.signal("request", workflow.info().workflow_id)
            except ApplicationError:
                self._state = slots.unbounded(self._state)
                break
            with contextlib.suppress(TimeoutError):
                # Published (phase Waiting) only once queued: most requests are granted at once.
                await workflow.wait_condition(
                    lambda: (
                        self._state.slot != slots.WAITING
                        or self._state.deleting
                        or self._state.slot_ahead >= 0
                    ),
                    timeout=ASK_AGAIN,
                    timeout_summary="waiting for a rollout slot",
                )
                if self._state.slot == slots.WAITING and not self._state.deleting:
                    self._publish()
                    await workflow.wait_condition(
                        lambda: self._state.slot != slots.WAITING or self._state.deleting,
                        timeout=ASK_AGAIN,
                        timeout_summary="waiting for a rollout slot",
                    )
        if self._state.deleting and self._state.slot == slots.WAITING:
            # Deleted while waiting: leave the queue (a grant on its way is given back).
            self._state = self._state.model_copy(update={"slot": slots.HELD})
            self._release_if_due()
        self._publish()

    def _release_if_due(self) -> None:
        """Give the slot back as soon as it is due, from whichever handler made it so (the
        rest's timer is not disturbed for it); sent in a task of its own."""
        if not slots.release_due(self._state):
            return
        self._state = slots.given_back(self._state)
        self._releasing += 1
        asyncio.create_task(self._send_release())  # noqa: RUF006 (counted in _releasing)

    async def _send_release(self) -> None:
        try:
            with contextlib.suppress(ApplicationError):
                await workflow.get_external_workflow_handle(ROLLOUT_SLOTS_ID).signal(
                    "release", workflow.info().workflow_id
                )
        finally:
            self._releasing -= 1

    async def _wait(self, action: rollout.Wait) -> None:
        if action.deadline is not None:
            # One durable timer per replacement (or canary window): it ends at the deadline,
            # or sooner when the replica leaves Ready (its report is a signal), a person
            # promotes or aborts; the decision is made again then.
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: rollout.wait_over(self._state, action),
                    timeout=max(action.deadline - workflow.now(), timedelta(milliseconds=1)),
                    timeout_summary=action.summary,
                )
            return
        if action.until != "done":
            await workflow.wait_condition(
                lambda: rollout.wait_over(self._state, action), timeout_summary=action.summary
            )
            return
        handle = workflow.get_external_workflow_handle(
            replica_id(self._state.spec.namespace, action.name)
        )
        for last in (False, True):
            try:
                await workflow.wait_condition(
                    lambda: rollout.wait_over(self._state, action),
                    timeout=TEARDOWN_GRACE,
                    timeout_summary=action.summary,
                )
                return
            except TimeoutError:
                if last:
                    # Gone silent: give it up rather than hold the deployment (its own cleanup
                    # timeout bounds what it still does).
                    self._gone(action.name, "teardown did not finish in time; given up")
                    return
                # Cancelling the replica cancels its current activity; it compensates.
                with contextlib.suppress(ApplicationError):
                    await handle.cancel()

    async def _signal_teardown(self, name: str) -> None:
        handle = workflow.get_external_workflow_handle(replica_id(self._state.spec.namespace, name))
        try:
            await handle.signal("teardown")
        except ApplicationError:
            # Its workflow already ended (the signal target is gone): nothing left to wait for.
            self._gone(name, "its workflow had already ended")

    def _gone(self, name: str, reason: str) -> None:
        self._state = rollout.progressed(
            self._state,
            ReplicaProgress(
                name=name,
                phase=ReplicaPhase.TERMINATED,
                step=ReplicaStep.DONE,
                reason=reason,
                at=workflow.now(),
            ),
        )

    async def _maybe_continue_as_new(self) -> None:
        self._passes += 1
        per_run = self._state.passes_per_run
        due = bool(per_run) and self._passes >= per_run
        if not (workflow.info().is_continue_as_new_suggested() or due) or self._state.dirty:
            return
        if self._state.deleting:
            # The delete Update waits for the replicas to go: never continue-as-new under it.
            return
        await workflow.wait_condition(
            lambda: workflow.all_handlers_finished() and not self._releasing
        )
        workflow.continue_as_new(rollout.carried(self._state))

    # --- fleet calls -----------------------------------------------------------------------

    async def _place(self, action: rollout.Place) -> None:
        info = workflow.info()
        request = rollout.place_request(
            self._state,
            action,
            request_id=f"{info.workflow_id}/{info.run_id}/{action.sequence}",
            now=workflow.now(),
        )
        try:
            response = await calls.place(request, action.desired, self._fleet_templates)
        except ActivityError as exc:
            self._state = rollout.fleet_failed(self._state, calls.cause(exc))
            return
        self._facts.update(response.facts)
        self._state = rollout.placed(self._state, response)

    async def _check_errors(self, action: rollout.CheckErrors) -> None:
        answered = await calls.read_errors(self._state.spec.namespace, action)
        self._state = rollout.errors_counted(
            self._state,
            action.name,
            answered.requests,
            answered.errors,
            at=workflow.now(),
            unread=f"its engines' metrics could not be read ({answered.error})"
            if answered.error
            else "",
        )

    async def _read_figures(self, action: rollout.ReadFigures) -> None:
        reading = await calls.read_figures(self._state.spec.namespace, action)
        self._state = rollout.figures_read(self._state, reading, at=workflow.now())

    async def _check_placement(self, action: rollout.CheckPlacement) -> None:
        md = self._state.spec
        current = await calls.placement_current(md.namespace, md.name, action.version)
        self._state = rollout.placement_checked(self._state, current)

    async def _dry_place(self, action: rollout.DryPlace) -> None:
        request = rollout.dry_place_request(
            self._state, action, request_id="dry", now=workflow.now()
        )
        try:
            response = await calls.dry_place(request, action.desired)
        except ActivityError as exc:
            # Unknown is not "fits": nothing serving is touched until the Fleet answers.
            self._state = rollout.fleet_failed(self._state, calls.cause(exc))
            return
        self._state = rollout.dry_placed(self._state, response)

    # --- children --------------------------------------------------------------------------

    async def _start_replica(self, action: rollout.StartReplica) -> None:
        replica = action.replica
        arg = ReplicaInput(
            replica=replica,
            parent_id=workflow.info().workflow_id,
            progress_deadline_seconds=action.progress_deadline_seconds,
            crash_loop_restarts=action.crash_loop_restarts,
            facts=self._facts.get(replica.spec.cluster_name, ClusterFacts()),
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
                    break
                await workflow.sleep(timedelta(seconds=1), summary=f"{replica.name} still closing")
        child_id = replica_id(replica.namespace, replica.name)
        # Never fail the deployment for it: the replica counts as failed, the next pass reaps
        # it (releasing its capacity) and places again.
        self._state = rollout.progressed(
            self._state,
            ReplicaProgress(
                name=replica.name,
                phase=ReplicaPhase.FAILED,
                step=ReplicaStep.DONE,
                reason=f"could not start: workflow {child_id} is still running",
                at=workflow.now(),
            ),
        )

    # --- reporting -------------------------------------------------------------------------

    def _status(self) -> DeploymentStatus:
        return rollout.report(self._state)

    def _published(self) -> DeploymentStatus:
        """The status an Update answers, its search attributes upserted in the same workflow
        task: a ``get`` right after ``rollout pause`` reads Paused from the workflow's record
        (describe) without waiting for the pass the change starts."""
        self._publish()
        return self._status()

    def _publish(self) -> None:
        status = self._status()
        rolled_back = rollout.held_back(self._state)
        if rolled_back != self._rolled_back:
            # In the history (a properties-modified event), with the figures: why the
            # deployment runs its last good template instead of the spec's.
            workflow.upsert_memo({"heldBack": rolled_back or None})
            self._rolled_back = rolled_back
        values = rollout.search_values(status)
        if values != self._upserted:
            # One upsert event whatever changed: `get deployments` reads its rows from these.
            workflow.upsert_search_attributes(
                [
                    search.PHASE.value_set(values.phase),
                    search.CLUSTERS.value_set(list(values.clusters)),
                    search.READY.value_set(values.ready),
                    search.DESIRED.value_set(values.desired),
                    search.UPDATED.value_set(values.updated),
                ]
            )
            self._upserted = values
        workflow.set_current_details(rollout.details(status))
