"""The ModelService workflow (ID ``service/<ns>/<name>``): one front door over the endpoints its
selectors match. It watches its endpoints in the endpoint directory (pushed on every change),
probes them on a durable timer, keeps the healthy ones in rotation with Modelplane's weights,
applies the front-door route on the InferenceGateway's cluster, and reports address, endpoints
(weight, health, reason) and conditions. Delete removes the route and its backends.

Deterministic orchestration only: selection, weights and the route are pure functions
(``rendering.front_door``); probes, applies and key hashing are activities. The API key of a
protected service is resolved and hashed inside an activity: only the secret's name is here.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, VersioningBehavior
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from modelfleet.api.manifest_errors import InvalidResourceError
    from modelfleet.api.meta import Condition
    from modelfleet.api.naming import workload_namespace
    from modelfleet.api.rules import validate
    from modelfleet.api.services import GlobalAddress, InferenceGateway, ModelService
    from modelfleet.contracts import search
    from modelfleet.contracts.activity_names import KUBE_APPLY, KUBE_DELETE, KUBE_HEARTBEAT_SECONDS
    from modelfleet.contracts.error_types import (
        MISSING_CREDENTIALS,
        MISSING_SECRET,
        PERMANENT_KUBE_ERROR,
    )
    from modelfleet.contracts.kube_payloads import (
        ApplyRequest,
        ApplyResult,
        DeleteRequest,
        DeleteResult,
        ObjectRef,
    )
    from modelfleet.contracts.serving_payloads import (
        ENDPOINTS_UNWATCH,
        ENDPOINTS_WATCH,
        SERVICE_WORKFLOW,
        SERVING_GATEWAY_ADDRESS,
        SERVING_PROBE,
        SERVING_REMOVE_GLOBAL_ADDRESS,
        SERVING_SYNC_GLOBAL_ADDRESS,
        SERVING_SYNC_KEYS,
        SERVING_SYNC_PROVIDER_TOKENS,
        EndpointHealth,
        EndpointsChanged,
        FrontDoorHealth,
        FrontDoorStatus,
        GatewayAddressRequest,
        GlobalAddressRemoval,
        GlobalAddressRequest,
        GlobalAddressResult,
        ProbeEndpointsRequest,
        ProbeTarget,
        ProviderTokensRequest,
        ServiceEndpointStatus,
        ServiceModels,
        ServiceStatus,
        SyncKeysRequest,
        WatchRequest,
        WatchResult,
    )
    from modelfleet.contracts.versioning import declared
    from modelfleet.contracts.wire import WireModel
    from modelfleet.rendering.front_door import (
        EndpointRecord,
        FrontDoor,
        api_keys_secret_name,
        containment_summary,
        distribute_weights,
        front_door_route,
        provider_tokens,
        render_front_door,
        select_endpoints,
        service_path,
    )
    from modelfleet.service.doors import doors_to_apply

RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=10),
    non_retryable_error_types=[PERMANENT_KUBE_ERROR, MISSING_CREDENTIALS, MISSING_SECRET],
)


class ServiceInput(WireModel):
    spec: ModelService
    probe_interval_seconds: float = 10.0
    probe_timeout_seconds: float = 3.0
    # When the resource was created: the first run's start, carried across continue-as-new
    # (None in payloads from before it was carried: then this run's start stands in).
    created: datetime | None = None


def _condition(kind: str, ok: bool, reason: str, message: str = "") -> Condition:
    return Condition(type=kind, status="True" if ok else "False", reason=reason, message=message)


@workflow.defn(name=SERVICE_WORKFLOW, versioning_behavior=declared(VersioningBehavior.AUTO_UPGRADE))
class ServiceWorkflow:
    @workflow.init
    def __init__(self, arg: ServiceInput) -> None:
        self._spec = arg.spec
        self._created = arg.created or workflow.info().start_time
        self._endpoints: list[EndpointRecord] = []
        self._gateway: InferenceGateway | None = None
        self._health: dict[str, EndpointHealth] = {}
        self._weights: dict[str, int] = {}
        # The endpoints the applied route carries (entry index and record), so the status
        # still lists one the directory withdrew until a route without it is applied.
        self._routed: dict[str, tuple[int, EndpointRecord]] = {}
        self._backends: dict[str, int] = {}
        self._address: str | None = None
        self._conditions: list[Condition] = []
        # Per front-door cluster: the objects applied there, their content digest, the door's
        # own address, and why its last apply failed (absent: it did not).
        self._applied: dict[str, list[ObjectRef]] = {}
        self._digests: dict[str, str] = {}
        self._door_address: dict[str, str] = {}
        self._door_error: dict[str, str] = {}
        # The global load balancer's answer (address, each door's health), when there is one.
        self._global: GlobalAddressResult | None = None
        # The settings the address was last put in place with: what to remove it with when the
        # gateway drops or moves it, or the service goes.
        self._global_settings: GlobalAddress | None = None
        self._global_error = ""
        self._spec_changed = False
        self._endpoints_changed = False
        # The directory revision of ``_endpoints`` (-1: none yet this run).
        self._revision = -1
        self._deleting = False
        self._phase = "Pending"

    # --- handlers ----------------------------------------------------------------------------

    @workflow.update
    def apply(self, spec: ModelService) -> ServiceStatus:
        if spec.to_wire() != self._spec.to_wire():
            self._spec = spec
            self._spec_changed = True
        return self._status()

    @apply.validator
    def _check_apply(self, spec: ModelService) -> None:
        if (spec.namespace, spec.name) != (self._spec.namespace, self._spec.name):
            raise ValueError(f"this workflow holds {self._spec.ref}, not {spec.ref}")
        errors = validate(spec)
        if errors:
            raise InvalidResourceError(spec.ref, errors)

    @workflow.update
    def delete(self) -> ServiceStatus:
        self._deleting = True
        return self._status()

    @workflow.signal
    def endpoints_changed(self, change: EndpointsChanged) -> None:
        if change.revision < self._revision:
            return  # older than what this run already has (its watch's answer)
        self._revision = change.revision
        self._endpoints = change.endpoints
        self._gateway = change.gateway
        self._endpoints_changed = True

    @workflow.query
    def status(self) -> ServiceStatus:
        return self._status()

    @workflow.query
    def served_models(self, entries: list[int]) -> ServiceModels:
        """The distinct model lists (as its probes last read them) of its healthy endpoints in
        ``entries``: what a replica those entries select is held to before it joins
        (``replica.models``). Distinct, so the answer stays small however many endpoints."""
        groups = select_endpoints(self._spec.spec.endpoints, self._endpoints)
        lists: set[tuple[str, ...]] = set()
        for index in entries:
            for e in groups[index] if 0 <= index < len(groups) else []:
                health = self._health.get(e.key)
                if health is not None and health.healthy and health.models:
                    lists.add(tuple(health.models))
        return ServiceModels(service=self._spec.name, served=[list(m) for m in sorted(lists)])

    @workflow.query
    def spec(self) -> ModelService:
        """The manifest as last applied (``get -o yaml`` prints it; queries are not history)."""
        return self._spec

    # --- run -------------------------------------------------------------------------------

    @workflow.run
    async def run(self, arg: ServiceInput) -> ServiceStatus:
        workflow.upsert_search_attributes(
            [
                search.KIND.value_set("ModelService"),
                search.NAMESPACE.value_set(self._spec.namespace),
                search.NAME.value_set(self._spec.name),
            ]
        )
        interval = timedelta(seconds=arg.probe_interval_seconds)
        await self._watch()
        while not self._deleting:
            if self._spec_changed:
                self._spec_changed = False
                await self._watch()
            self._endpoints_changed = False
            await self._probe(arg.probe_timeout_seconds)
            await self._reconcile()
            if workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(
                    arg.model_copy(update={"spec": self._spec, "created": self._created})
                )
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: self._deleting or self._spec_changed or self._endpoints_changed,
                    timeout=interval,
                )
        self._phase = "Deleting"
        await self._unwatch()
        await self._remove_route()
        self._phase = "Deleted"
        return self._status()

    async def _watch(self) -> None:
        try:
            result: WatchResult = await workflow.execute_activity(
                ENDPOINTS_WATCH,
                WatchRequest(
                    watcher=workflow.info().workflow_id,
                    namespace=self._spec.namespace,
                    entries=self._spec.spec.endpoints,
                ),
                result_type=WatchResult,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RETRY,
                summary="watch endpoints",
            )
        except ActivityError as exc:
            self._conditions = [
                _condition(
                    "EndpointsResolved", False, "DirectoryUnavailable", str(exc.cause or exc)
                )
            ]
            return
        if result.revision < self._revision:
            # A change was signalled while the watch was in flight: that signal is newer.
            return
        self._revision = result.revision
        self._endpoints, self._gateway = result.endpoints, result.gateway

    async def _unwatch(self) -> None:
        # The directory forgets a watcher it cannot signal anyway.
        with contextlib.suppress(ActivityError):
            await workflow.execute_activity(
                ENDPOINTS_UNWATCH,
                workflow.info().workflow_id,
                start_to_close_timeout=timedelta(seconds=30),
                schedule_to_close_timeout=timedelta(minutes=2),
                retry_policy=RETRY,
                summary="stop watching endpoints",
            )

    async def _probe(self, probe_timeout: float) -> None:
        if not self._endpoints:
            self._health = {}
            return
        targets = [
            ProbeTarget(key=e.key, url=e.url, auth_secret=e.auth_secret) for e in self._endpoints
        ]
        try:
            results: list[EndpointHealth] = await workflow.execute_activity(
                SERVING_PROBE,
                ProbeEndpointsRequest(targets=targets, timeout_seconds=probe_timeout),
                result_type=list[EndpointHealth],
                start_to_close_timeout=timedelta(seconds=30 + 2 * probe_timeout * len(targets)),
                heartbeat_timeout=timedelta(seconds=10 + 2 * probe_timeout),
                retry_policy=RetryPolicy(maximum_attempts=2),
                summary=f"probe {len(targets)} endpoint(s)",
            )
        except ActivityError as exc:
            reason = f"probe failed: {exc.cause or exc}"
            results = [EndpointHealth(key=t.key, healthy=False, reason=reason) for t in targets]
        self._health = {h.key: h for h in results}

    async def _reconcile(self) -> None:
        spec = self._spec
        groups = select_endpoints(spec.spec.endpoints, self._endpoints)
        healthy = [
            [
                e
                for e in group
                if self._health.get(e.key, EndpointHealth(key=e.key, healthy=False)).healthy
            ]
            for group in groups
        ]
        weights = distribute_weights(
            [
                (entry.weight, [e.key for e in group])
                for entry, group in zip(spec.spec.endpoints, healthy, strict=True)
            ]
        )
        conditions = [
            _condition(
                "EndpointsResolved",
                True,
                "Resolved",
                f"{sum(map(len, groups))} endpoint(s) selected",
            )
            if any(groups)
            else _condition(
                "EndpointsResolved", False, "NoEndpoints", "no endpoint matches any selector"
            ),
        ]
        gateway = self._gateway
        if gateway is None:
            conditions.append(
                _condition(
                    "RoutingReady",
                    False,
                    "WaitingForGateway",
                    "no InferenceGateway 'default' is applied",
                )
            )
            self._weights = weights
            self._routed = {}
            self._conditions, self._phase = conditions, "Pending"
            return
        clusters = gateway.front_door_clusters
        for gone in [c for c in self._applied if c not in clusters]:
            # A cluster that stopped being a front door: its route goes (best effort; it is
            # tried again on the next reconcile while it fails).
            with contextlib.suppress(ActivityError):
                await self._delete(gone, self._applied[gone])
                self._forget(gone)
        # The global address first: its health says which doors are down. Then every door at
        # once, less those known down (``service.doors``): a door whose cluster is dark would
        # hold up the loop for as long as its apply is retried.
        await self._sync_global(gateway)
        await asyncio.gather(
            *(
                self._apply_door(c, gateway, weights)
                for c in doors_to_apply(clusters, self._applied, self._door_health())
            )
        )
        failed = {c: self._door_error[c] for c in clusters if c in self._door_error}
        applied = [c for c in clusters if c in self._applied and c not in failed]
        self._address = self._global.address if self._global else None
        if self._address is None and applied:
            self._address = self._door_address.get(applied[0])
        if not applied:
            reasons = "; ".join(f"{c}: {r}" for c, r in failed.items())
            conditions.append(_condition("RoutingReady", False, "Configuring", reasons))
            self._conditions, self._phase = conditions, "Degraded"
            return
        # The status shows the new weights only once the route carries them: set before the
        # apply, a status query during it said an endpoint was out of rotation while the
        # gateway still sent it traffic (seen as 503s right after "canary out").
        self._weights = weights
        self._routed = {
            e.key: (index, e)
            for index, group in enumerate(groups)
            for e in group
            if weights.get(e.key, 0) > 0
        }
        in_rotation = len(self._weights)
        doors = f" on {len(applied)} of {len(clusters)} front doors" if len(clusters) > 1 else ""
        conditions.append(
            _condition(
                "RoutingReady",
                True,
                "RouteConfigured",
                f"{in_rotation} endpoint(s) in rotation{doors}",
            )
        )
        if gateway.spec.global_address is not None:
            conditions.append(
                _condition(
                    "GlobalAddressReady",
                    self._global is not None and not self._global_error,
                    "Configured" if not self._global_error else "Unavailable",
                    self._global_error
                    or f"{sum(d.healthy for d in self._global.doors) if self._global else 0} "
                    f"of {len(clusters)} front doors in the address",
                )
            )
        self._conditions = conditions
        self._phase = "Ready" if in_rotation else "NoHealthyEndpoints"

    def _door_health(self) -> dict[str, FrontDoorHealth]:
        """Each door's health as the global load balancer last reported it (none without one)."""
        return {d.cluster: d for d in self._global.doors} if self._global else {}

    def _forget(self, cluster: str) -> None:
        for table in (self._applied, self._digests, self._door_address, self._door_error):
            table.pop(cluster, None)

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
            self._door_error[cluster] = str(exc.cause or exc)
        else:
            self._door_error.pop(cluster, None)

    async def _sync_global(self, gateway: InferenceGateway) -> None:
        """The one address in front of the doors, and each door's health as the global load
        balancer sees it. Once per reconcile (every probe interval): the balancer's own health
        checks move traffic between doors; this only keeps its origins and the status current."""
        settings = gateway.spec.global_address
        old = self._global_settings
        moved = old is not None and (
            settings is None
            or (old.account_id, old.zone_id, old.zone)
            != (settings.account_id, settings.zone_id, settings.zone)
        )
        # Dropped, or moved to another account or zone: the old address goes first.
        if moved and not await self._remove_global():
            return
        if settings is None:
            self._global, self._global_error = None, ""
            return
        try:
            self._global_settings = settings
            self._global = await workflow.execute_activity(
                SERVING_SYNC_GLOBAL_ADDRESS,
                GlobalAddressRequest(
                    namespace=self._spec.namespace,
                    service=self._spec.name,
                    clusters=gateway.front_door_clusters,
                    settings=settings,
                    auth=self._spec.spec.auth is not None,
                ),
                result_type=GlobalAddressResult,
                # Short: it runs every round, before the doors' applies, and an API outage must
                # not hold them up (the balancer keeps serving with what it has meanwhile).
                start_to_close_timeout=timedelta(seconds=15),
                schedule_to_close_timeout=timedelta(seconds=20),
                retry_policy=RetryPolicy(maximum_attempts=2),
                summary="global address",
            )
            self._global_error = ""
        except ActivityError as exc:
            self._global_error = str(exc.cause or exc)

    async def _sync_keys(self, cluster: str, source: str) -> None:
        await workflow.execute_activity(
            SERVING_SYNC_KEYS,
            SyncKeysRequest(
                cluster=cluster,
                namespace=workload_namespace(self._spec.namespace),
                secret=api_keys_secret_name(self._spec.name),
                source_secret=source,
                service=self._spec.name,
            ),
            result_type=int,
            start_to_close_timeout=timedelta(seconds=60),
            schedule_to_close_timeout=timedelta(minutes=3),
            retry_policy=RETRY,
            summary="sync API key hashes",
        )

    async def _apply_route(
        self, door: FrontDoor, gateway: InferenceGateway, weights: dict[str, int]
    ) -> None:
        """Apply the route with ``weights`` and what it needs, only when any of it changed (a
        steady service costs one probe per interval and nothing else)."""
        spec = self._spec
        manifests = render_front_door(
            door,
            spec.namespace,
            spec.name,
            weights,
            self._endpoints,
            auth=spec.spec.auth is not None,
            outlier=spec.spec.outlier_detection,
            retries=spec.spec.retries,
        )
        tokens = provider_tokens(spec.name, weights, self._endpoints)
        namespace = workload_namespace(spec.namespace)
        secrets = [
            ObjectRef(api_version="v1", kind="Secret", name=name, namespace=namespace)
            for name in ([api_keys_secret_name(spec.name)] if spec.spec.auth else [])
            + sorted(tokens)
        ]
        # Secrets first: deletion runs in reverse, so the route goes before what it uses.
        refs = secrets + [ObjectRef.of(m) for m in manifests if m["kind"] != "Namespace"]
        # Weights change the route without changing which objects exist: compare the content.
        digest = hashlib.sha256(json.dumps(manifests, sort_keys=True).encode()).hexdigest()
        if (
            self._applied.get(door.cluster) == refs
            and self._digests.get(door.cluster) == digest
            and door.cluster in self._door_address
        ):
            return
        if spec.spec.auth is not None:
            await self._sync_keys(door.cluster, spec.spec.auth.api_keys_secret_ref.name)
        if tokens:
            await workflow.execute_activity(
                SERVING_SYNC_PROVIDER_TOKENS,
                ProviderTokensRequest(
                    cluster=door.cluster, namespace=namespace, service=spec.name, tokens=tokens
                ),
                result_type=int,
                start_to_close_timeout=timedelta(seconds=60),
                schedule_to_close_timeout=timedelta(minutes=3),
                retry_policy=RETRY,
                summary=f"sync {len(tokens)} provider key(s)",
            )
        await workflow.execute_activity(
            KUBE_APPLY,
            ApplyRequest(cluster=door.cluster, manifests=manifests),
            result_type=ApplyResult,
            start_to_close_timeout=timedelta(seconds=60),
            heartbeat_timeout=timedelta(seconds=KUBE_HEARTBEAT_SECONDS),
            schedule_to_close_timeout=timedelta(minutes=3),
            retry_policy=RETRY,
            summary=f"front door: {len(weights)} backend(s)",
        )
        keep = set(map(str, refs))
        gone = [r for r in self._applied.get(door.cluster, []) if str(r) not in keep]
        if gone:
            await self._delete(door.cluster, gone)
        self._applied[door.cluster] = refs
        self._digests[door.cluster] = digest
        route = front_door_route(manifests)["spec"]["rules"][0]
        self._backends = {b["name"]: b["weight"] for b in route["backendRefs"]}
        self._door_address[door.cluster] = await self._front_address(gateway, door.cluster)

    async def _delete(self, cluster: str, refs: list[ObjectRef]) -> None:
        await workflow.execute_activity(
            KUBE_DELETE,
            DeleteRequest(cluster=cluster, objects=list(reversed(refs))),
            result_type=DeleteResult,
            start_to_close_timeout=timedelta(seconds=60),
            heartbeat_timeout=timedelta(seconds=KUBE_HEARTBEAT_SECONDS),
            schedule_to_close_timeout=timedelta(minutes=5),
            retry_policy=RETRY,
            summary=f"remove {len(refs)} front-door object(s)",
        )

    async def _front_address(self, gateway: InferenceGateway, cluster: str) -> str:
        path = service_path(self._spec.namespace, self._spec.name).rstrip("/")
        if gateway.spec.addresses and cluster == gateway.spec.cluster:
            port = gateway.spec.listeners[0].port
            host = gateway.spec.addresses[0]
            return f"http://{host}{'' if port == 80 else f':{port}'}{path}"
        authority: str = await workflow.execute_activity(
            SERVING_GATEWAY_ADDRESS,
            GatewayAddressRequest(cluster=cluster),
            result_type=str,
            start_to_close_timeout=timedelta(seconds=30),
            schedule_to_close_timeout=timedelta(minutes=2),
            retry_policy=RETRY,
            summary="front door address",
        )
        return f"http://{authority}{path}"

    async def _remove_global(self) -> bool:
        """Remove the address put in place with ``_global_settings``; False (and the reason in
        ``_global_error``) when that failed."""
        settings = self._global_settings
        if settings is None:
            return True
        try:
            await workflow.execute_activity(
                SERVING_REMOVE_GLOBAL_ADDRESS,
                GlobalAddressRemoval(
                    namespace=self._spec.namespace, service=self._spec.name, settings=settings
                ),
                result_type=int,
                start_to_close_timeout=timedelta(seconds=60),
                schedule_to_close_timeout=timedelta(minutes=3),
                retry_policy=RETRY,
                summary="remove global address",
            )
        except ActivityError as exc:
            self._global_error = f"removing the old address: {exc.cause or exc}"
            return False
        self._global, self._global_settings = None, None
        return True

    async def _remove_route(self) -> None:
        problems: list[str] = []
        # The address first: no caller is sent to a door whose route is going.
        if not await self._remove_global():
            problems.append(f"global address: {self._global_error}")
        for cluster in list(self._applied):
            try:
                await self._delete(cluster, self._applied[cluster])
            except ActivityError as exc:
                problems.append(f"{cluster}: {exc.cause or exc}")
                continue
            self._forget(cluster)
        if problems:
            self._conditions = [
                _condition("RoutingReady", False, "CleanupIncomplete", "; ".join(problems))
            ]
            return
        self._backends = {}

    def _front_doors(self) -> list[FrontDoorStatus]:
        if self._gateway is None:
            return []
        health = self._door_health()
        doors = []
        for cluster in self._gateway.front_door_clusters:
            seen = health.get(cluster)
            if cluster not in self._applied or cluster in self._door_error:
                state, reason = (
                    "Configuring",
                    self._door_error.get(cluster, "route not applied yet"),
                )
            elif seen is None:
                state, reason = "Serving", "route applied"
            elif not seen.enabled:
                state, reason = "Disabled", seen.reason
            else:
                state, reason = ("Serving" if seen.healthy else "Out"), seen.reason
            doors.append(
                FrontDoorStatus(
                    cluster=cluster,
                    address=self._door_address.get(cluster),
                    state=state,
                    reason=reason,
                )
            )
        return doors

    # --- status ----------------------------------------------------------------------------

    def _status(self) -> ServiceStatus:
        groups = select_endpoints(self._spec.spec.endpoints, self._endpoints)
        endpoints = []
        listed: set[str] = set()
        for index, group in enumerate(groups):
            for e in group:
                health = self._health.get(e.key)
                listed.add(e.key)
                endpoints.append(
                    ServiceEndpointStatus(
                        name=e.name,
                        url=e.url,
                        entry=index,
                        weight=self._weights.get(e.key, 0),
                        healthy=bool(health and health.healthy),
                        reason=health.reason if health else "not probed yet",
                        models=list(health.models) if health else [],
                    )
                )
        # Withdrawn (or no longer selected) but still in the applied route: the gateway sends
        # it traffic until the next reconcile applies a route without it, and the status says
        # so (dropped at once, a user saw "out of rotation" and then 503s from it).
        for key in sorted(self._routed.keys() - listed):
            index, e = self._routed[key]
            endpoints.append(
                ServiceEndpointStatus(
                    name=e.name,
                    url=e.url,
                    entry=index,
                    weight=self._weights.get(key, 0),
                    healthy=False,
                    reason="withdrawn; still in the route until the next reconcile",
                )
            )
        return ServiceStatus(
            name=self._spec.name,
            namespace=self._spec.namespace,
            phase=self._phase,
            address=self._address,
            gateway_cluster=self._gateway.spec.cluster if self._gateway else None,
            endpoints=endpoints,
            backends=dict(self._backends),
            conditions=list(self._conditions),
            auth=self._spec.spec.auth is not None,
            created=self._created,
            containment=containment_summary(
                self._spec.spec.outlier_detection, self._spec.spec.retries
            ),
            front_doors=self._front_doors(),
            global_address=self._global.address if self._global else None,
        )
