"""Serving activities: publish and withdraw endpoints in the endpoint directory (Temporal
Updates with start, so the directory need not exist yet), watch a service's endpoints, probe
endpoints over HTTP, find the front door's address, and write the hashes of a service's API
keys to the gateway cluster.

Side effects: Temporal client calls, HTTP probes (through ``adapters.endpoint_probe``) and one
Kubernetes apply (through ``adapters.kube``). Secrets are read here, from the worker's
credentials directory, and never returned, logged or put in an error message.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from modelfleet.activities.errors import missing_secret, to_temporal
from modelfleet.activities.fleet_updates import FLEET_WORKFLOW_ID
from modelfleet.activities.kube_ops import KubeconfigStore
from modelfleet.adapters.endpoint_probe import probe_models
from modelfleet.adapters.global_lb import CloudflareLoadBalancing, GlobalLBError
from modelfleet.adapters.kube_client import KubeCluster
from modelfleet.adapters.kube_errors import KubeError
from modelfleet.adapters.temporal_updates import (
    UpdateShare,
    asked_again_when_refused,
    update_with_start,
)
from modelfleet.api.naming import (
    LABEL_CLUSTER,
    LABEL_DEPLOYMENT,
    LABEL_MANAGED_BY,
    workload_namespace,
)
from modelfleet.api.services import GlobalAddress, InferenceGateway
from modelfleet.contracts.activity_names import TASK_QUEUE
from modelfleet.contracts.health_watch import (
    ROUTE_DIGEST_ANNOTATION,
    SERVING_WATCH_HEALTH,
    DoorCheck,
    HealthWatchRequest,
    HealthWatchResult,
    doors_changed,
    endpoints_changed,
)
from modelfleet.contracts.serving_payloads import (
    ENDPOINT_DIRECTORY_WORKFLOW,
    ENDPOINTS_ID,
    ENDPOINTS_PUBLISH_REPLICA,
    ENDPOINTS_UNWATCH,
    ENDPOINTS_WATCH,
    ENDPOINTS_WITHDRAW,
    LABEL_REGION,
    SERVING_CHECK_MODELS,
    SERVING_GATEWAY_ADDRESS,
    SERVING_REMOVE_GLOBAL_ADDRESS,
    SERVING_ROUTES_CARRYING,
    SERVING_SYNC_KEYS,
    SERVING_SYNC_PROVIDER_TOKENS,
    DirectoryStart,
    EndpointHealth,
    EndpointKey,
    FrontDoorHealth,
    GatewayAddressRequest,
    GlobalAddressRemoval,
    GlobalAddressRequest,
    GlobalAddressResult,
    ModelCheck,
    ModelCheckRequest,
    ProbeTarget,
    ProviderTokensRequest,
    ReplicaEndpointRequest,
    RoutesCarrying,
    RoutesRequest,
    ServiceModels,
    SyncKeysRequest,
    WatchMatch,
    WatchRequest,
    WatchResult,
)
from modelfleet.contracts.status import ClusterRecord
from modelfleet.rendering.front_door import (
    MANAGER,
    ROUTE_API_VERSION,
    SERVICE_LABEL,
    EndpointRecord,
    carries,
    service_path,
)
from modelfleet.rendering.global_address import (
    GlobalOrigin,
    global_hostname,
    global_plan,
    pool_name,
)

API_KEY_HASHES_TYPE = "modelfleet.dev/api-key-hashes"
UPSTREAM_TOKEN_TYPE = "modelfleet.dev/upstream-token"
# The endpoint directory is one workflow, and the server admits 10 in-flight Updates per
# workflow; past that it aborts them and rejects the directory's workflow tasks, so a burst of
# Ready replicas publishing at once collapsed into retries (62 aborted, 45 refused in the first
# 100 s of a 1,000-replica rollout). A process alone keeps its directory Updates under this;
# several share the cap (``UpdateShare``), as for the Fleet's.
MAX_DIRECTORY_UPDATES_IN_FLIGHT = 6
# Probes the health watches of one worker run at once (each a blocking httpx GET in a thread).
PROBE_THREADS = 16
# How often a health watch heartbeats (the SDK sends at most one per 0.8 x the timeout).
BEAT_SECONDS = 1.0


class SecretStore:
    """Secrets the worker holds: ``<credentials dir>/secrets/<name>``, one value per line."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory / "secrets"

    def lines(self, name: str) -> list[str]:
        path = self.directory / name
        try:
            text = path.read_text()
        except OSError:
            raise missing_secret(
                f"secret {name!r} is not in the worker's secrets directory ({self.directory})"
            ) from None
        return [line.strip() for line in text.splitlines() if line.strip()]


async def directory_update(
    client: Client,
    update: str,
    arg: Any,
    result_type: type,
    *,
    rpc_timeout: timedelta | None = None,
) -> Any:
    """An Update on the endpoint directory, starting it first if needed; asked again while the
    server refuses it for its in-flight limit (``adapters.temporal_updates``)."""

    async def once() -> Any:
        start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
            ENDPOINT_DIRECTORY_WORKFLOW,
            DirectoryStart(),
            id=ENDPOINTS_ID,
            task_queue=TASK_QUEUE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            static_summary="Endpoints: every ModelEndpoint and the services that watch them",
        )
        return await update_with_start(
            client, update, arg, start, result_type=result_type, rpc_timeout=rpc_timeout
        )

    return await asked_again_when_refused(once)


async def _query(handle: WorkflowHandle[Any, Any], name: str, arg: Any, result_type: Any) -> Any:
    """A query, asked again while the server refuses it for its in-flight limit."""
    if arg is None:
        return await asked_again_when_refused(lambda: handle.query(name, result_type=result_type))
    return await asked_again_when_refused(lambda: handle.query(name, arg, result_type=result_type))


class ServingActivities:
    def __init__(
        self,
        client: Client,
        credentials_dir: Path,
        *,
        max_in_flight: int = MAX_DIRECTORY_UPDATES_IN_FLIGHT,
        share: UpdateShare | None = None,
    ) -> None:
        self._client = client
        self._share = share or UpdateShare(max_in_flight)
        self._kubeconfigs = KubeconfigStore(credentials_dir)
        self._secrets = SecretStore(credentials_dir)
        self._probes = ThreadPoolExecutor(PROBE_THREADS, thread_name_prefix="probe")

    async def _directory(self, update: str, arg: Any, result_type: type) -> Any:
        async with self._share.slot():
            return await directory_update(self._client, update, arg, result_type)

    async def _cluster_record(self, cluster: str) -> ClusterRecord | None:
        # One cluster's record, not the Fleet's whole view: that carries every placed replica
        # (~1 MB at 1,000), and every Ready replica asked it once.
        handle = self._client.get_workflow_handle(FLEET_WORKFLOW_ID)
        record: ClusterRecord | None = await asked_again_when_refused(
            lambda: handle.query("cluster", cluster, result_type=ClusterRecord | None)  # type: ignore[arg-type]
        )
        return record

    async def _cluster_facts(self, cluster: str) -> tuple[str, dict[str, str]]:
        """The cluster's gateway address and labels, as its workflow last reported them."""
        record = await self._cluster_record(cluster)
        if record is not None:
            if not record.gateway_address:
                raise ApplicationError(f"cluster {cluster} reports no gateway address yet")
            return record.gateway_address, dict(record.spec.metadata.labels)
        raise ApplicationError(f"cluster {cluster} is not in the fleet")

    async def _replica_record(
        self, request: ReplicaEndpointRequest | ModelCheckRequest
    ) -> EndpointRecord:
        """The endpoint a replica publishes: its cluster's gateway, its own path."""
        address, cluster_labels = await self._cluster_facts(request.cluster)
        labels = dict(request.labels)
        labels[LABEL_DEPLOYMENT] = request.deployment
        labels[LABEL_CLUSTER] = request.cluster
        if LABEL_REGION in cluster_labels:
            labels[LABEL_REGION] = cluster_labels[LABEL_REGION]
        path = f"/{request.namespace}/{request.replica}/"
        return EndpointRecord(
            namespace=request.namespace,
            name=request.replica,
            labels=labels,
            url=f"http://{address}{path}v1",
            rewrite_path=path,
            replica=request.replica,
        )

    @activity.defn(name=ENDPOINTS_PUBLISH_REPLICA)
    async def publish_replica(self, request: ReplicaEndpointRequest) -> EndpointRecord:
        record = await self._replica_record(request)
        await self._directory("put", record, type(None))
        return record

    @activity.defn(name=SERVING_CHECK_MODELS)
    async def check_models(self, request: ModelCheckRequest) -> ModelCheck:
        """What the services that would select the replica expect (the model names their
        healthy endpoints' probes listed) and, when they expect any, what the replica's engine
        lists at ``GET /v1/models`` through its cluster's gateway: the path the services' probes
        and callers take. A probe that gets no list fails the attempt (retried by the policy)."""
        record = await self._replica_record(request)
        directory = self._client.get_workflow_handle(ENDPOINTS_ID)
        try:
            matches: list[WatchMatch] = await _query(
                directory, "selecting", record, list[WatchMatch]
            )
        except RPCError as exc:
            if exc.status is RPCStatusCode.NOT_FOUND:
                return ModelCheck()  # no directory: no service watches anything
            raise ApplicationError(f"cannot ask the endpoint directory: {exc.message}") from None
        expected: list[ServiceModels] = []
        for match in matches:
            try:
                service: ServiceModels = await _query(
                    self._client.get_workflow_handle(match.watcher),
                    "served_models",
                    match.entries,
                    ServiceModels,
                )
            except RPCError:
                continue  # deleted since it watched: it expects nothing
            if service.served:
                expected.append(service)
        if not expected:
            return ModelCheck()
        outcome = await asyncio.to_thread(
            probe_models, record.url, timeout=request.probe_timeout_seconds, attempts=1
        )
        if not outcome.healthy:
            raise ApplicationError(f"cannot list its models: {outcome.reason}")
        return ModelCheck(expected=expected, served=list(outcome.models))

    @activity.defn(name=SERVING_ROUTES_CARRYING)
    async def routes_carrying(self, request: RoutesRequest) -> RoutesCarrying:
        """Which front-door HTTPRoutes still carry ``request.endpoint``, as each front door's
        cluster reports them now (level-triggered: what the gateways are given, not what a
        service workflow meant to apply)."""
        try:
            gateway: InferenceGateway | None = await _query(
                self._client.get_workflow_handle(ENDPOINTS_ID),
                "gateway",
                None,
                InferenceGateway | None,
            )
        except RPCError as exc:
            if exc.status is RPCStatusCode.NOT_FOUND:
                return RoutesCarrying()  # no directory: no service ever routed anything
            raise ApplicationError(f"cannot ask the endpoint directory: {exc.message}") from None
        if gateway is None:
            return RoutesCarrying()
        namespace = workload_namespace(request.namespace)

        def read(cluster_name: str) -> list[str]:
            cluster = KubeCluster(self._kubeconfigs.path(cluster_name), request_timeout=5.0)
            try:
                routes = cluster.list(
                    ROUTE_API_VERSION, "HTTPRoute", namespace, {LABEL_MANAGED_BY: MANAGER}
                )
            finally:
                cluster.close()
            return [
                f"{cluster_name}/{r['metadata']['name']}"
                for r in routes
                if carries(r, request.endpoint)
            ]

        found = RoutesCarrying()
        for cluster_name in gateway.front_door_clusters:
            try:
                found.carrying += await asyncio.to_thread(read, cluster_name)
            except (KubeError, OSError, ValueError) as exc:
                found.unread.append(f"{cluster_name}: {exc}")
            activity.heartbeat(cluster_name)
        return found

    @activity.defn(name=ENDPOINTS_WITHDRAW)
    async def withdraw(self, key: EndpointKey) -> bool:
        removed: bool = await self._directory("withdraw", key, bool)
        return removed

    @activity.defn(name=ENDPOINTS_WATCH)
    async def watch(self, request: WatchRequest) -> WatchResult:
        result: WatchResult = await self._directory("watch", request, WatchResult)
        return result

    @activity.defn(name=ENDPOINTS_UNWATCH)
    async def unwatch(self, watcher: str) -> None:
        await self._directory("unwatch", watcher, type(None))

    @activity.defn(name=SERVING_GATEWAY_ADDRESS)
    async def gateway_address(self, request: GatewayAddressRequest) -> str:
        address, _ = await self._cluster_facts(request.cluster)
        return address

    async def _sync_global(self, request: GlobalAddressRequest) -> GlobalAddressResult:
        """The service's load balancer over its front doors, as the fleet sees their clusters
        now (a cluster that is not Ready, or has no gateway address, is withdrawn), and each
        front door's health as the balancer's monitor last saw it (every round of a health
        watch)."""
        origins: list[GlobalOrigin] = []
        withdrawn: dict[str, str] = {}
        for cluster in request.clusters:
            record = await self._cluster_record(cluster)
            if record is None or not record.gateway_address:
                withdrawn[cluster] = (
                    "not in the fleet" if record is None else "no gateway address yet"
                )
                continue
            host, _, port = record.gateway_address.rpartition(":")
            if not host:
                host, port = record.gateway_address, "80"
            origins.append(
                GlobalOrigin(cluster=cluster, host=host, port=int(port), enabled=record.ready)
            )
            if not record.ready:
                withdrawn[cluster] = f"cluster not Ready: {record.reason}"
        if not origins:
            raise ApplicationError("no front door cluster has a gateway address yet")
        plan = global_plan(
            request.namespace, request.service, request.settings, origins, auth=request.auth
        )

        def sync() -> list[FrontDoorHealth]:
            with self._load_balancing(request.settings) as api:
                ids = api.ensure(plan)
                doors = []
                for origin in origins:
                    seen = api.health(ids[pool_name(plan.hostname, origin.cluster)])
                    health = next((h for h in seen if h.origin == origin.cluster), None)
                    doors.append(
                        FrontDoorHealth(
                            cluster=origin.cluster,
                            enabled=origin.enabled,
                            healthy=origin.enabled and health is not None and health.healthy,
                            reason=withdrawn.get(origin.cluster)
                            or (health.reason if health else "not checked yet"),
                        )
                    )
                return doors

        doors = await asyncio.to_thread(sync)
        doors += [
            FrontDoorHealth(cluster=c, enabled=False, healthy=False, reason=r)
            for c, r in withdrawn.items()
            if all(d.cluster != c for d in doors)
        ]
        path = service_path(request.namespace, request.service).rstrip("/")
        return GlobalAddressResult(address=f"http://{plan.hostname}{path}", doors=doors)

    @activity.defn(name=SERVING_REMOVE_GLOBAL_ADDRESS)
    async def remove_global_address(self, request: GlobalAddressRemoval) -> int:
        hostname = global_hostname(request.namespace, request.service, request.settings.zone)

        def remove() -> int:
            with self._load_balancing(request.settings) as api:
                return api.remove(hostname)

        try:
            return await asyncio.to_thread(remove)
        except GlobalLBError as exc:
            raise to_temporal(exc) from None

    def _load_balancing(self, settings: GlobalAddress) -> CloudflareLoadBalancing:
        lines = self._secrets.lines(settings.api_token_secret_ref.name)
        if not lines:
            raise missing_secret(f"secret {settings.api_token_secret_ref.name!r} is empty")
        return CloudflareLoadBalancing(lines[0], settings.account_id, settings.zone_id)

    def _probe_one(self, target: ProbeTarget, timeout: float, attempts: int) -> EndpointHealth:
        key = None
        if target.auth_secret:
            try:
                key = self._secrets.lines(target.auth_secret)[0]
            except (ApplicationError, IndexError):
                return EndpointHealth(
                    key=target.key,
                    healthy=False,
                    reason=f"provider key secret {target.auth_secret!r} not found",
                )
        outcome = probe_models(target.url, timeout=timeout, attempts=attempts, api_key=key)
        return EndpointHealth(
            key=target.key,
            healthy=outcome.healthy,
            reason=outcome.reason,
            models=list(outcome.models),
        )

    async def _probe_round(
        self, request: HealthWatchRequest, began: float
    ) -> dict[str, EndpointHealth]:
        """Every target probed once, ``PROBE_THREADS`` at a time, heartbeating while they run."""
        loop = asyncio.get_running_loop()
        pending = {
            loop.run_in_executor(
                self._probes, self._probe_one, t, request.timeout_seconds, request.attempts
            )
            for t in request.targets
        }
        out: dict[str, EndpointHealth] = {}
        while pending:
            done, pending = await asyncio.wait(pending, timeout=BEAT_SECONDS)
            for future in done:
                health = future.result()
                out[health.key] = health
            activity.heartbeat(began)
        return out

    async def _global_round(
        self, request: GlobalAddressRequest
    ) -> tuple[GlobalAddressResult | None, str]:
        try:
            return await self._sync_global(request), ""
        except GlobalLBError as exc:
            return None, str(exc)
        except (ApplicationError, RPCError, OSError) as exc:
            return None, str(exc.message if isinstance(exc, RPCError) else exc)

    async def _drifted(self, doors: list[DoorCheck]) -> list[str]:
        """The doors whose route is gone or carries another plan's digest than the one the
        service applied (someone edited or deleted it). A door that cannot be read is not
        reported: its cluster may be dark, and the global address already says so."""

        def read(door: DoorCheck) -> bool:
            cluster = KubeCluster(self._kubeconfigs.path(door.cluster), request_timeout=5.0)
            try:
                route = cluster.get(
                    door.route.api_version, door.route.kind, door.route.name, door.route.namespace
                )
            finally:
                cluster.close()
            held = ((route or {}).get("metadata") or {}).get("annotations") or {}
            return route is None or held.get(ROUTE_DIGEST_ANNOTATION) != door.digest

        drifted = []
        for door in doors:
            try:
                if await asyncio.to_thread(read, door):
                    drifted.append(door.cluster)
            except (KubeError, OSError, ValueError, ApplicationError):
                continue
        return drifted

    @activity.defn(name=SERVING_WATCH_HEALTH)
    async def watch_health(self, request: HealthWatchRequest) -> HealthWatchResult:
        """Probe the service's endpoints (and sync its global address) every
        ``interval_seconds`` until a verdict differs from ``request.known`` (or the doors' from
        ``known_doors``), or after the first round with ``answer_first``, or once
        ``max_seconds`` have passed since the watch began; heartbeats all along. A retried
        attempt (its worker died) keeps the first attempt's start from the heartbeat details,
        so the bound holds, and probes at once: it compares against what the workflow holds,
        so a change the dead attempt saw is seen again."""
        resumed = activity.info().heartbeat_details
        began = float(resumed[0]) if resumed else time.time()
        activity.heartbeat(began)
        rounds = 0
        while True:
            rounds += 1
            health = await self._probe_round(request, began)
            result, error = (
                await self._global_round(request.global_address)
                if request.global_address is not None
                else (None, "")
            )
            changed = endpoints_changed(request.known, health) or doors_changed(
                request.known_doors, request.known_global_failed, result, bool(error)
            )
            elapsed = time.time() - began
            why = (
                "changed"
                if changed
                else "asked"
                if request.answer_first
                else "bounded"
                if elapsed + request.interval_seconds > request.max_seconds
                else ""
            )
            if why:
                return HealthWatchResult(
                    health=[health[t.key] for t in request.targets],
                    global_result=result,
                    global_error=error,
                    why=why,
                    rounds=rounds,
                    drifted=await self._drifted(request.doors) if why == "bounded" else [],
                )
            # Short sleeps, each followed by a heartbeat: how a cancellation (the endpoint set
            # changed) reaches the activity, and how a dead worker is noticed.
            wake = time.monotonic() + request.interval_seconds
            while (left := wake - time.monotonic()) > 0:
                await asyncio.sleep(min(left, BEAT_SECONDS))
                activity.heartbeat(began)

    @activity.defn(name=SERVING_SYNC_KEYS)
    def sync_api_keys(self, request: SyncKeysRequest) -> int:
        keys = self._secrets.lines(request.source_secret)
        digests = sorted({hashlib.sha256(k.encode()).hexdigest() for k in keys})
        data = {f"key-{i}": d for i, d in enumerate(digests)}
        self._write_secrets(
            request.cluster,
            request.namespace,
            request.service,
            {request.secret: (API_KEY_HASHES_TYPE, data)},
        )
        return len(digests)

    @activity.defn(name=SERVING_SYNC_PROVIDER_TOKENS)
    def sync_provider_tokens(self, request: ProviderTokensRequest) -> int:
        secrets = {}
        for name, source in sorted(request.tokens.items()):
            lines = self._secrets.lines(source)
            if not lines:
                raise missing_secret(f"secret {source!r} is empty")
            secrets[name] = (UPSTREAM_TOKEN_TYPE, {"token": lines[0]})
        self._write_secrets(request.cluster, request.namespace, request.service, secrets)
        return len(secrets)

    def _write_secrets(
        self,
        cluster_name: str,
        namespace: str,
        service: str,
        secrets: dict[str, tuple[str, dict[str, str]]],
    ) -> None:
        """Apply Secrets on the gateway cluster. Their values never leave this function."""
        manifests: list[dict[str, Any]] = []
        for name, (kind, data) in secrets.items():
            manifests.append(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {
                        "name": name,
                        "namespace": namespace,
                        "labels": {"app.kubernetes.io/managed-by": MANAGER, SERVICE_LABEL: service},
                    },
                    "type": kind,
                    "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
                }
            )
        cluster = KubeCluster(self._kubeconfigs.path(cluster_name))
        try:
            # Created if absent, never applied: the workload namespace's labels are applied by
            # the replicas and the front door (``rendering.namespace``), not by this writer.
            cluster.ensure_namespace(namespace)
            for manifest in manifests:
                cluster.apply(manifest)
        except KubeError as exc:
            # The message names the object, never its data.
            raise to_temporal(exc) from None
        finally:
            cluster.close()
