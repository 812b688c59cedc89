"""The ModelAutoscaler workflow (ID ``autoscaler/<ns>/<name>``): a durable control loop that scales
a ModelDeployment on engine load, the way HPA scales a Deployment.

Every ``intervalSeconds`` it reads the target's replicas (``autoscaler.target``, the deployment's
``status`` query), reads each Ready replica's load (``autoscaler.read_metrics``), takes the pure
decision (``modelfleet.autoscaler.decide``) and, when the count changes, sends the deployment's
``scale`` Update (``autoscaler.scale``, with a deterministic update ID). While the target is at 0
replicas and ``minReplicas`` is 0, it also reads the requests waiting at the fleet's gateway for
the ModelServices that would route to the target (``autoscaler.gateway_waiting``): any such
request gets the first replica (scale from zero). Every decision, with its
inputs, recommendation, desired and applied counts and reason, is kept in a bounded ring and
answered by the ``decisions`` query; the HPA history (recent recommendations and scale events)
is kept pruned to the longest window. The loop continues as new every few hundred decisions,
carrying its state (``autoscaler.state``: the ring, the history, the count it set) whole, so
its own history stays bounded.

A manual scale of the target while the autoscaler is attached is noticed (the target's count
differs from what the autoscaler last set), recorded on the decision as overridden, and the
autoscaler goes on from the new count: like HPA, the autoscaler wins at its next decision,
within its behavior's limits. To pin a count, set minReplicas = maxReplicas or delete the
autoscaler.

Handlers: ``apply`` (Update, validated), ``delete`` (Update), ``resync`` (signal: decide now),
``status`` and ``decisions`` (queries). Deterministic orchestration only.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, VersioningBehavior
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from modelfleet.api.autoscalers import MetricSourceType, ModelAutoscaler
    from modelfleet.api.manifest_errors import InvalidResourceError
    from modelfleet.api.rules import validate
    from modelfleet.autoscaler.behavior import record_scale
    from modelfleet.autoscaler.decide import decide
    from modelfleet.autoscaler.records import AutoscalerStatus, Decision, History, Observation
    from modelfleet.autoscaler.state import AutoscalerInput, keep_decision
    from modelfleet.contracts import search
    from modelfleet.contracts.activity_names import (
        AUTOSCALER_GATEWAY_WAITING,
        AUTOSCALER_READ_METRICS,
        AUTOSCALER_SCALE,
        AUTOSCALER_TARGET,
    )
    from modelfleet.contracts.autoscaler_payloads import (
        GatewayWaitingRequest,
        GatewayWaitingResult,
        PromQuery,
        ReadMetricsRequest,
        ReadMetricsResult,
        ReplicaLoad,
        ScaleTargetRequest,
        ScaleTargetResult,
        TargetRequest,
        TargetState,
    )
    from modelfleet.contracts.ids import deployment_id
    from modelfleet.contracts.versioning import declared

READ_TIMEOUT = timedelta(seconds=60)
# Few attempts: a decision that cannot read its inputs is skipped, and the next interval retries.
READ_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=5), maximum_attempts=3
)
SCALE_TIMEOUT = timedelta(seconds=30)
SCALE_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=10), maximum_attempts=5)


def autoscaler_id(namespace: str, name: str) -> str:
    return f"autoscaler/{namespace}/{name}"


@workflow.defn(
    name="ModelAutoscaler", versioning_behavior=declared(VersioningBehavior.AUTO_UPGRADE)
)
class AutoscalerWorkflow:
    @workflow.init
    def __init__(self, arg: AutoscalerInput) -> None:
        self._settings = arg  # its ``state`` is ``self._state``'s first value, no more
        self._state = arg.state
        if self._state.created is None:
            self._state.created = workflow.info().start_time
        # What this run saw and does; each run finds them afresh.
        self._current: int | None = None
        self._problem = ""
        self._deleting = False
        self._wake = False
        self._phase = ""

    # --- handlers --------------------------------------------------------------------------

    @workflow.update
    def apply(self, spec: ModelAutoscaler) -> AutoscalerStatus:
        state = self._state
        if spec.to_wire() != state.spec.to_wire():
            if spec.spec.scale_target_ref != state.spec.spec.scale_target_ref:
                # Another deployment: the old one's recommendations, scale events and count
                # say nothing about it.
                state.history = History()
                state.last_applied = None
                self._current = None
            state.spec = spec
            state.generation += 1
            self._wake = True
        return self._status()

    @apply.validator
    def _check_apply(self, spec: ModelAutoscaler) -> None:
        if (spec.namespace, spec.name) != (self._state.spec.namespace, self._state.spec.name):
            raise ValueError(f"this workflow holds {self._state.spec.ref}, not {spec.ref}")
        if self._deleting:
            raise ValueError(f"{self._state.spec.ref} is being deleted")
        errors = validate(spec)
        if errors:
            raise InvalidResourceError(spec.ref, errors)

    @workflow.update
    def delete(self) -> AutoscalerStatus:
        # Deleting the autoscaler leaves the deployment at its current count.
        self._deleting = True
        return self._status()

    @workflow.signal
    def resync(self) -> None:
        """Decide now instead of at the end of the interval."""
        self._wake = True

    @workflow.query
    def status(self) -> AutoscalerStatus:
        return self._status()

    @workflow.query
    def decisions(self, limit: int = 20) -> list[Decision]:
        return self._state.decisions[-limit:] if limit > 0 else []

    @workflow.query
    def spec(self) -> ModelAutoscaler:
        """The manifest as last applied (``get -o yaml`` prints it; queries are not history)."""
        return self._state.spec

    # --- loop ------------------------------------------------------------------------------

    @workflow.run
    async def run(self, arg: AutoscalerInput) -> AutoscalerStatus:
        ma = self._state.spec
        workflow.upsert_search_attributes(
            [
                search.KIND.value_set("ModelAutoscaler"),
                search.NAMESPACE.value_set(ma.namespace),
                search.NAME.value_set(ma.name),
            ]
        )
        taken = 0
        while not self._deleting:
            self._wake = False
            await self._decide_once()
            self._publish()
            taken += 1
            per_run = self._settings.decisions_per_run
            if taken >= per_run or workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self._settings.model_copy(update={"state": self._state}))
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: self._wake or self._deleting,
                    timeout=timedelta(seconds=self._state.spec.spec.interval_seconds),
                    timeout_summary="next decision",
                )
        self._publish()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._status()

    async def _decide_once(self) -> None:
        spec = self._state.spec.spec
        target_name = spec.scale_target_ref.name
        try:
            target: TargetState = await workflow.execute_activity(
                AUTOSCALER_TARGET,
                TargetRequest(
                    workflow_id=deployment_id(self._state.spec.namespace, target_name),
                    namespace=self._state.spec.namespace,
                    name=target_name,
                ),
                result_type=TargetState,
                summary=f"read ModelDeployment {target_name}",
                start_to_close_timeout=READ_TIMEOUT,
                retry_policy=READ_RETRY,
            )
        except ActivityError as exc:
            self._problem = f"cannot read ModelDeployment {target_name}: {exc.cause or exc}"
            return
        if not target.found:
            ref = f"ModelDeployment {self._state.spec.namespace}/{target_name}"
            self._problem = f"{ref}: {target.summary}"
            return
        self._problem = ""
        self._current = target.desired
        loads = await self._read(target)
        gateway: GatewayWaitingResult | None = None
        if target.desired == 0 and spec.min_replicas == 0:
            gateway = await self._gateway_waiting()
        observation = Observation(
            at=workflow.now(),
            current=target.desired,
            replicas=loads.replicas,
            totals=loads.totals,
            scheduled=target.scheduled,
            waiting_at_gateway=gateway.waiting if gateway else None,
            gateway_note=gateway.note if gateway else "",
        )
        state = self._state
        decision, history = decide(spec, observation, state.history)
        if state.last_applied is not None and target.desired != state.last_applied:
            decision.outcome = (
                f"overridden: the target was scaled to {target.desired} outside the autoscaler "
                f"(it had set {state.last_applied}); deciding from {target.desired}"
            )
        if decision.applied != decision.current:
            result = await self._scale(decision.applied)
            if result.accepted:
                history = record_scale(history, observation.at, decision.applied - decision.current)
                state.last_applied = decision.applied
                self._current = decision.applied
                note = f"scaled to {decision.applied}"
            else:
                state.last_applied = decision.current
                note = f"scale to {decision.applied} not applied: {result.reason}"
            decision.outcome = f"{decision.outcome}; {note}" if decision.outcome else note
        else:
            state.last_applied = decision.current
        state.history = history
        keep_decision(state, decision)

    async def _read(self, target: TargetState) -> ReadMetricsResult:
        spec = self._state.spec.spec
        request = ReadMetricsRequest(
            namespace=self._state.spec.namespace,
            replicas=target.replicas,
            metrics=[m.engine.name for m in spec.metrics if m.engine is not None],
            queries=[
                PromQuery(label=m.label, url=m.prometheus.url, query=m.prometheus.query)
                for m in spec.metrics
                if m.type is MetricSourceType.PROMETHEUS and m.prometheus is not None
            ],
        )
        try:
            result: ReadMetricsResult = await workflow.execute_activity(
                AUTOSCALER_READ_METRICS,
                request,
                result_type=ReadMetricsResult,
                summary=f"read load of {sum(r.ready for r in target.replicas)} Ready replica(s)",
                start_to_close_timeout=READ_TIMEOUT,
                retry_policy=READ_RETRY,
            )
            return result
        except ActivityError as exc:
            # Every metric is missing this time; the decision holds (HPA's FailedGetMetrics).
            reason = f"reading metrics failed: {exc.cause or exc}"
            return ReadMetricsResult(
                replicas=[
                    ReplicaLoad(name=r.name, ready=r.ready, error=reason) for r in target.replicas
                ],
                totals={q.label: None for q in request.queries},
            )

    async def _gateway_waiting(self) -> GatewayWaitingResult:
        ns, name = self._state.spec.namespace, self._state.spec.spec.scale_target_ref.name
        request = GatewayWaitingRequest(
            namespace=ns,
            deployment=name,
            deployment_workflow_id=deployment_id(ns, name),
            services_query=(
                f"{search.KIND.name} = 'ModelService' AND {search.NAMESPACE.name} = '{ns}' "
                "AND ExecutionStatus = 'Running'"
            ),
        )
        try:
            result: GatewayWaitingResult = await workflow.execute_activity(
                AUTOSCALER_GATEWAY_WAITING,
                request,
                result_type=GatewayWaitingResult,
                summary="read requests waiting at the gateway",
                start_to_close_timeout=READ_TIMEOUT,
                retry_policy=READ_RETRY,
            )
            return result
        except ActivityError as exc:
            return GatewayWaitingResult(note=f"reading the gateway failed: {exc.cause or exc}")

    async def _scale(self, replicas: int) -> ScaleTargetResult:
        self._state.sequence += 1
        ns, name = self._state.spec.namespace, self._state.spec.spec.scale_target_ref.name
        info = workflow.info()
        request = ScaleTargetRequest(
            request_id=f"{info.workflow_id}/{info.run_id}/{self._state.sequence}",
            workflow_id=deployment_id(ns, name),
            namespace=ns,
            name=name,
            replicas=replicas,
        )
        try:
            result: ScaleTargetResult = await workflow.execute_activity(
                AUTOSCALER_SCALE,
                request,
                result_type=ScaleTargetResult,
                summary=f"scale {request.name} to {replicas}",
                start_to_close_timeout=SCALE_TIMEOUT,
                retry_policy=SCALE_RETRY,
            )
            return result
        except ActivityError as exc:
            return ScaleTargetResult(accepted=False, reason=str(exc.cause or exc))

    # --- reporting -------------------------------------------------------------------------

    def _status(self) -> AutoscalerStatus:
        spec = self._state.spec.spec
        return AutoscalerStatus(
            namespace=self._state.spec.namespace,
            name=self._state.spec.name,
            target=spec.scale_target_ref.name,
            min_replicas=spec.min_replicas,
            max_replicas=spec.max_replicas,
            generation=self._state.generation,
            current=self._current,
            last_applied=self._state.last_applied,
            problem=self._problem,
            last_decision=self._state.decisions[-1] if self._state.decisions else None,
            decisions_kept=len(self._state.decisions),
            deleting=self._deleting,
            created=self._state.created,
        )

    def _publish(self) -> None:
        last = self._state.decisions[-1] if self._state.decisions else None
        phase = "Deleting" if self._deleting else ("Degraded" if self._problem else "Active")
        if phase != self._phase:
            # Only on change: an upsert is a history event, and this runs every interval.
            self._phase = phase
            workflow.upsert_search_attributes([search.PHASE.value_set(phase)])
        detail = self._problem or (last.reason if last else "no decision yet")
        workflow.set_current_details(f"**{phase}** · {self._current} replica(s)\n\n{detail}")
