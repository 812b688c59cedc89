"""The ModelService workflow (ID ``service/<ns>/<name>``): one front door over the endpoints its
selectors match. It watches its endpoints in the endpoint directory (pushed on every change),
keeps the healthy ones in rotation with Modelplane's weights, applies the front-door route on the
InferenceGateway's cluster, and reports address, endpoints (weight, health, reason) and
conditions. Delete removes the route and its backends.

Health is watched by one long-running activity at a time (``serving.watch_health``,
``contracts.health_watch``): it probes every probe interval on its own clock and returns only
when a verdict or a door's health changed, or after ``watch_bound_seconds`` (one probe interval
while a door's apply is to be retried). The workflow then reconciles and starts the next watch;
a signalled change cancels the watch and starts one that answers after its first round. An
idle service writes about six events per bound (an activity and a workflow task), not a probe,
a timer and two workflow tasks every probe interval. At its bound the watch also reads each
door's route: one gone or edited (its digest annotation differs) is applied again (drift
repair within a bound).

Deterministic orchestration only: selection, weights, conditions and the route are pure functions
(``service.decide``, ``service.route``, ``service.report``, ``service.doors``,
``rendering.front_door``); probes, applies and key hashing are activities (``service.calls``). The
API key of a protected service is resolved and hashed inside an activity: only the secret's name
is here.
"""

from __future__ import annotations

import asyncio
import contextlib

from temporalio import workflow
from temporalio.common import VersioningBehavior
from temporalio.exceptions import ActivityError
from temporalio.exceptions import TimeoutError as CallTimeout
from temporalio.workflow import ActivityHandle

with workflow.unsafe.imports_passed_through():
    from modelfleet.api.manifest_errors import InvalidResourceError
    from modelfleet.api.naming import workload_namespace
    from modelfleet.api.rules import validate
    from modelfleet.api.services import InferenceGateway, ModelService
    from modelfleet.contracts import search
    from modelfleet.contracts.health_watch import HealthWatchRequest, HealthWatchResult
    from modelfleet.contracts.serving_payloads import (
        SERVICE_WORKFLOW,
        EndpointHealth,
        EndpointsChanged,
        FrontDoorHealth,
        GlobalAddressRequest,
        ProbeTarget,
        ServiceModels,
        ServiceStatus,
    )
    from modelfleet.contracts.versioning import declared
    from modelfleet.rendering.front_door import (
        FrontDoor,
        containment_summary,
        select_endpoints,
        service_path,
    )
    from modelfleet.service import calls
    from modelfleet.service.decide import (
        condition,
        global_address_condition,
        global_moved,
        resolved_condition,
        rotation_weights,
        routed_endpoints,
        routing_ready,
        service_address,
        watch_seconds,
    )
    from modelfleet.service.doors import doors_to_apply
    from modelfleet.service.report import (
        endpoint_statuses,
        front_door_statuses,
        served_model_lists,
    )
    from modelfleet.service.route import plan_route
    from modelfleet.service.state import ServiceInput, ServiceState


@workflow.defn(name=SERVICE_WORKFLOW, versioning_behavior=declared(VersioningBehavior.AUTO_UPGRADE))
class ServiceWorkflow:
    @workflow.init
    def __init__(self, arg: ServiceInput) -> None:
        # Everything that outlives a run is in ``_state`` (``service.state``); the next run gets
        # it whole.
        self._state: ServiceState = arg.state
        if self._state.created is None:
            self._state.created = workflow.info().start_time
        # A change was signalled since the loop last looked (the loop probes and reconciles
        # at once when a run starts, so this is not carried).
        self._endpoints_changed = False
        # The last health watch cancelled by a change, until it is known to have stopped.
        self._cancelled_watch: ActivityHandle[HealthWatchResult] | None = None

    # --- handlers ----------------------------------------------------------------------------

    @workflow.update
    def apply(self, spec: ModelService) -> ServiceStatus:
        if spec.to_wire() != self._state.spec.to_wire():
            self._state.spec = spec
            self._state.spec_changed = True
        return self._status()

    @apply.validator
    def _check_apply(self, spec: ModelService) -> None:
        if (spec.namespace, spec.name) != (self._state.spec.namespace, self._state.spec.name):
            raise ValueError(f"this workflow holds {self._state.spec.ref}, not {spec.ref}")
        errors = validate(spec)
        if errors:
            raise InvalidResourceError(spec.ref, errors)

    @workflow.update
    def delete(self) -> ServiceStatus:
        self._state.deleting = True
        return self._status()

    @workflow.signal
    def endpoints_changed(self, change: EndpointsChanged) -> None:
        if change.revision < self._state.revision:
            return  # older than what this run already has (its watch's answer)
        self._state.revision = change.revision
        self._state.endpoints = change.endpoints
        self._state.gateway = change.gateway
        self._endpoints_changed = True

    @workflow.query
    def status(self) -> ServiceStatus:
        return self._status()

    @workflow.query
    def served_models(self, entries: list[int]) -> ServiceModels:
        """The distinct model lists of its healthy endpoints in ``entries``: what a replica
        those entries select is held to before it joins (``replica.models``)."""
        groups = select_endpoints(self._state.spec.spec.endpoints, self._state.endpoints)
        served = served_model_lists(groups, entries, self._state.health)
        return ServiceModels(service=self._state.spec.name, served=served)

    @workflow.query
    def spec(self) -> ModelService:
        """The manifest as last applied (``get -o yaml`` prints it; queries are not history)."""
        return self._state.spec

    # --- run -------------------------------------------------------------------------------

    @workflow.run
    async def run(self, arg: ServiceInput) -> ServiceStatus:
        workflow.upsert_search_attributes(
            [
                search.KIND.value_set("ModelService"),
                search.NAMESPACE.value_set(self._state.spec.namespace),
                search.NAME.value_set(self._state.spec.name),
            ]
        )
        state = self._state
        # A run continued from another has the directory's answer already (it signals this
        # workflow ID, whichever run holds it): only a first run, one whose watch failed, or a
        # changed spec asks again.
        if state.revision < 0 or state.spec_changed:
            state.spec_changed = False
            await self._watch()
        reconciles = 0
        # Something to reconcile that the health watch has not answered for yet: a run's
        # start, a changed spec, endpoint set or gateway. The watch then answers after its
        # first round; otherwise only when a verdict changes or its bound runs out.
        pending = True
        while not state.deleting:
            if state.spec_changed:
                state.spec_changed = False
                await self._watch()
                pending = True
            if self._endpoints_changed:
                self._endpoints_changed = False
                pending = True
            if not await self._watch_health(arg, answer_first=pending):
                pending = True  # interrupted by a change: watch again at once
                continue
            pending = False
            await self._reconcile()
            reconciles += 1
            per_run = arg.reconciles_per_run
            if (
                per_run and reconciles >= per_run
            ) or workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(arg.model_copy(update={"state": state}))
        self._state.phase = "Deleting"
        # The directory forgets a watcher it cannot signal anyway.
        with contextlib.suppress(ActivityError):
            await calls.unwatch()
        await self._remove_route()
        self._state.phase = "Deleted"
        return self._status()

    def _interrupted(self) -> bool:
        state = self._state
        return state.deleting or state.spec_changed or self._endpoints_changed

    async def _watch(self) -> None:
        try:
            result = await calls.watch(self._state.spec)
        except ActivityError as exc:
            reason = str(exc.cause or exc)
            self._state.conditions = [
                condition("EndpointsResolved", False, "DirectoryUnavailable", reason)
            ]
            return
        if result.revision < self._state.revision:
            # A change was signalled while the watch was in flight: that signal is newer.
            return
        self._state.revision = result.revision
        self._state.endpoints, self._state.gateway = result.endpoints, result.gateway

    async def _watch_health(self, arg: ServiceInput, *, answer_first: bool) -> bool:
        """Run one health watch until it answers (its verdicts, and the global address's view
        of the doors, taken into the state: True) or a change interrupts it (cancelled: False).

        The probes and the global address's sync run in the activity on their own clock; only
        what changed comes back, so an idle service writes one activity and one workflow task
        per ``watch_bound_seconds`` instead of a probe, a timer and two tasks per probe
        interval."""
        state = self._state
        if self._interrupted():
            return False
        global_request = await self._global_request()
        gateway = state.gateway
        bound = watch_seconds(
            arg.probe_interval_seconds,
            arg.watch_bound_seconds,
            door_errors=state.doors.error,
            applied=state.doors.applied,
            clusters=gateway.front_door_clusters if gateway else [],
            global_moving=global_moved(
                state.global_settings, gateway.spec.global_address if gateway else None
            ),
        )
        handle = calls.watch_health(
            HealthWatchRequest(
                targets=[
                    ProbeTarget(key=e.key, url=e.url, auth_secret=e.auth_secret)
                    for e in state.endpoints
                ],
                known=list(state.health.values()),
                global_address=global_request,
                known_doors=state.global_result.doors if state.global_result else [],
                known_global_failed=bool(state.global_error),
                interval_seconds=arg.probe_interval_seconds,
                timeout_seconds=arg.probe_timeout_seconds,
                max_seconds=bound,
                answer_first=answer_first,
                doors=state.doors.checks(gateway.front_door_clusters if gateway else []),
            )
        )
        await workflow.wait_condition(lambda: handle.done() or self._interrupted())
        if not handle.done():
            handle.cancel()
            self._cancelled_watch = handle
            return False
        try:
            result = handle.result()
        except (ActivityError, asyncio.CancelledError) as exc:
            # Retried without limit, it fails only when its start-to-close runs out: every
            # endpoint is then unhealthy, with the reason (as a failed probe made them).
            reason = f"probe failed: {getattr(exc, 'cause', None) or exc}"
            state.health = {
                e.key: EndpointHealth(key=e.key, healthy=False, reason=reason)
                for e in state.endpoints
            }
            return True
        state.health = {h.key: h for h in result.health}
        for cluster in result.drifted:
            state.doors.drifted(cluster)
        if global_request is not None:
            if result.global_error:
                state.global_error = result.global_error
            else:
                state.global_result, state.global_error = result.global_result, ""
        return True

    async def _global_request(self) -> GlobalAddressRequest | None:
        """The global address the next watch keeps in place, once one the gateway dropped or
        moved is removed (None: there is none, or the old one could not be removed yet)."""
        gateway = self._state.gateway
        if gateway is None:
            return None  # no gateway, no doors to put an address in front of (nor to remove)
        settings = gateway.spec.global_address
        if global_moved(self._state.global_settings, settings) and not await self._remove_global():
            return None
        if settings is None:
            self._state.global_result, self._state.global_error = None, ""
            return None
        self._state.global_settings = settings
        return GlobalAddressRequest(
            namespace=self._state.spec.namespace,
            service=self._state.spec.name,
            clusters=gateway.front_door_clusters,
            settings=settings,
            auth=self._state.spec.spec.auth is not None,
        )

    async def _reconcile(self) -> None:
        spec = self._state.spec
        groups = select_endpoints(spec.spec.endpoints, self._state.endpoints)
        weights = rotation_weights(spec.spec.endpoints, groups, self._state.health)
        conditions = [resolved_condition(groups)]
        gateway = self._state.gateway
        if gateway is None:
            conditions.append(
                condition(
                    "RoutingReady",
                    False,
                    "WaitingForGateway",
                    "no InferenceGateway 'default' is applied",
                )
            )
            self._state.weights = weights
            self._state.routed = {}
            self._state.conditions, self._state.phase = conditions, "Pending"
            return
        clusters = gateway.front_door_clusters
        doors = self._state.doors
        for gone in [c for c in doors.applied if c not in clusters]:
            # A cluster that stopped being a front door: its route goes (best effort; it is
            # tried again on the next reconcile while it fails).
            with contextlib.suppress(ActivityError):
                await calls.delete_objects(gone, doors.applied[gone])
                doors.forget(gone)
        # Every door at once, less those the global address (synced by the health watch just
        # before) knows down (``service.doors``): a door whose cluster is dark would hold up
        # the loop for as long as its apply is retried.
        await asyncio.gather(
            *(
                self._apply_door(c, gateway, weights)
                for c in doors_to_apply(clusters, doors.applied, self._door_health())
            )
        )
        failed = {c: doors.error[c] for c in clusters if c in doors.error}
        applied = [c for c in clusters if c in doors.applied and c not in failed]
        self._state.address = service_address(self._state.global_result, doors.address, applied)
        if not applied:
            reasons = "; ".join(f"{c}: {r}" for c, r in failed.items())
            conditions.append(condition("RoutingReady", False, "Configuring", reasons))
            self._state.conditions, self._state.phase = conditions, "Degraded"
            return
        # The status shows the new weights only once the route carries them: set before the
        # apply, a status query during it said an endpoint was out of rotation while the
        # gateway still sent it traffic (seen as 503s right after "canary out").
        self._state.weights = weights
        self._state.routed = routed_endpoints(groups, weights)
        in_rotation = len(self._state.weights)
        conditions.append(routing_ready(in_rotation, len(applied), len(clusters)))
        if gateway.spec.global_address is not None:
            conditions.append(
                global_address_condition(
                    self._state.global_result, self._state.global_error, len(clusters)
                )
            )
        self._state.conditions = conditions
        self._state.phase = "Ready" if in_rotation else "NoHealthyEndpoints"

    def _door_health(self) -> dict[str, FrontDoorHealth]:
        """Each door's health as the global load balancer last reported it (none without one)."""
        return (
            {d.cluster: d for d in self._state.global_result.doors}
            if self._state.global_result
            else {}
        )

    async def _apply_door(
        self, cluster: str, gateway: InferenceGateway, weights: dict[str, int]
    ) -> None:
        door = FrontDoor(
            cluster=cluster,
            gateway_name=gateway.spec.gateway_name,
            gateway_namespace=gateway.spec.gateway_namespace,
        )
        try:
            await self._apply_route(door, gateway, weights)
        except ActivityError as exc:
            cause = exc.cause
            if isinstance(cause, CallTimeout):  # out of ``calls.DOOR_CALL_BOUND``
                last = f": {cause.cause}" if cause.cause else ""
                bound = calls.DOOR_CALL_BOUND.total_seconds()
                self._state.doors.error[cluster] = f"no answer within {bound:g} s{last}"
            else:
                self._state.doors.error[cluster] = str(cause or exc)
        else:
            self._state.doors.error.pop(cluster, None)

    async def _apply_route(
        self, door: FrontDoor, gateway: InferenceGateway, weights: dict[str, int]
    ) -> None:
        """Apply the route with ``weights`` and what it needs, only when any of it changed."""
        spec = self._state.spec
        plan = plan_route(door, spec, weights, self._state.endpoints)
        if self._state.doors.current(door.cluster, plan):
            return
        if spec.spec.auth is not None:
            await calls.sync_keys(door.cluster, spec, spec.spec.auth.api_keys_secret_ref.name)
        if plan.tokens:
            namespace = workload_namespace(spec.namespace)
            await calls.sync_provider_tokens(door.cluster, namespace, spec.name, plan.tokens)
        await calls.apply_door(door.cluster, plan.manifests, len(weights))
        gone = self._state.doors.stale(door.cluster, plan)
        if gone:
            await calls.delete_objects(door.cluster, gone)
        self._state.doors.record(door.cluster, plan)
        self._state.backends = plan.backends()
        self._state.doors.address[door.cluster] = await self._front_address(gateway, door.cluster)

    async def _front_address(self, gateway: InferenceGateway, cluster: str) -> str:
        path = service_path(self._state.spec.namespace, self._state.spec.name).rstrip("/")
        if gateway.spec.addresses and cluster == gateway.spec.cluster:
            port = gateway.spec.listeners[0].port
            host = gateway.spec.addresses[0]
            return f"http://{host}{'' if port == 80 else f':{port}'}{path}"
        return f"http://{await calls.gateway_authority(cluster)}{path}"

    async def _stopped_watch(self) -> None:
        """Wait until the last cancelled health watch has stopped: until it notices, a round of
        it may still put the global address in place again after it was removed (seen: a
        deleted service's hostname back within a second of its removal)."""
        handle, self._cancelled_watch = self._cancelled_watch, None
        if handle is not None:
            with contextlib.suppress(ActivityError, asyncio.CancelledError):
                await handle

    async def _remove_global(self) -> bool:
        """Remove the address put in place with ``_global_settings``; False (and the reason in
        ``_global_error``) when that failed."""
        settings = self._state.global_settings
        if settings is None:
            return True
        await self._stopped_watch()
        try:
            await calls.remove_global(self._state.spec, settings)
        except ActivityError as exc:
            self._state.global_error = f"removing the old address: {exc.cause or exc}"
            return False
        self._state.global_result, self._state.global_settings = None, None
        return True

    async def _remove_route(self) -> None:
        problems: list[str] = []
        # The address first: no caller is sent to a door whose route is going.
        if not await self._remove_global():
            problems.append(f"global address: {self._state.global_error}")
        for cluster in list(self._state.doors.applied):
            try:
                await calls.delete_objects(cluster, self._state.doors.applied[cluster])
            except ActivityError as exc:
                problems.append(f"{cluster}: {exc.cause or exc}")
                continue
            self._state.doors.forget(cluster)
        if problems:
            self._state.conditions = [
                condition("RoutingReady", False, "CleanupIncomplete", "; ".join(problems))
            ]
            return
        self._state.backends = {}

    # --- status ----------------------------------------------------------------------------

    def _status(self) -> ServiceStatus:
        groups = select_endpoints(self._state.spec.spec.endpoints, self._state.endpoints)
        doors = self._state.doors
        return ServiceStatus(
            name=self._state.spec.name,
            namespace=self._state.spec.namespace,
            phase=self._state.phase,
            address=self._state.address,
            gateway_cluster=self._state.gateway.spec.cluster if self._state.gateway else None,
            endpoints=endpoint_statuses(
                groups, self._state.health, self._state.weights, self._state.routed
            ),
            backends=dict(self._state.backends),
            conditions=list(self._state.conditions),
            auth=self._state.spec.spec.auth is not None,
            created=self._state.created,
            containment=containment_summary(
                self._state.spec.spec.outlier_detection, self._state.spec.spec.retries
            ),
            front_doors=front_door_statuses(
                self._state.gateway.front_door_clusters if self._state.gateway else [],
                doors.applied,
                doors.error,
                doors.address,
                self._door_health(),
            ),
            global_address=self._state.global_result.address if self._state.global_result else None,
        )
