"""The ModelService and EndpointDirectory workflows on the time-skipping server, with activity
doubles for the cluster and the probes: weights over healthy endpoints, an unhealthy endpoint
leaving with its reason and its backend objects deleted, a withdrawn endpoint pushed to the
service, no gateway reported as such, and delete removing the route."""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from modelfleet.api.kinds import parse_resource
from modelfleet.api.services import InferenceGateway, ModelService
from modelfleet.contracts.activity_names import KUBE_APPLY, KUBE_DELETE
from modelfleet.contracts.health_watch import (
    ROUTE_DIGEST_ANNOTATION,
    SERVING_WATCH_HEALTH,
    DoorCheck,
    HealthWatchRequest,
    HealthWatchResult,
    doors_changed,
    endpoints_changed,
    watch_task_queue,
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
    SERVING_GATEWAY_ADDRESS,
    SERVING_REMOVE_GLOBAL_ADDRESS,
    EndpointHealth,
    EndpointKey,
    FrontDoorHealth,
    GatewayAddressRequest,
    GlobalAddressRemoval,
    GlobalAddressRequest,
    GlobalAddressResult,
    ServiceStatus,
    WatchRequest,
    WatchResult,
)
from modelfleet.endpoints.state import EndpointsInput
from modelfleet.endpoints.workflow import EndpointDirectoryWorkflow
from modelfleet.rendering.front_door import EndpointRecord
from modelfleet.service.state import ServiceInput
from modelfleet.service.workflow import ServiceWorkflow

# A health watch's round in real time: the doubles' probes answer at once.
ROUND = 0.05


@dataclass
class Doubles:
    client: Client
    directory: str
    unhealthy: dict[str, str] = field(default_factory=dict)
    # What each endpoint's /v1/models lists (["qwen"] unless said).
    models: dict[str, list[str]] = field(default_factory=dict)
    routes: list[dict[str, Any]] = field(default_factory=list)
    deleted: list[ObjectRef] = field(default_factory=list)

    @activity.defn(name=ENDPOINTS_WATCH)
    async def watch(self, request: WatchRequest) -> WatchResult:
        handle = self.client.get_workflow_handle(self.directory)
        result: WatchResult = await handle.execute_update(EndpointDirectoryWorkflow.watch, request)
        return result

    @activity.defn(name=ENDPOINTS_UNWATCH)
    async def unwatch(self, watcher: str) -> None:
        handle = self.client.get_workflow_handle(self.directory)
        await handle.execute_update(EndpointDirectoryWorkflow.unwatch, watcher)

    # The health watches' answers (why each returned, after how many rounds).
    health_watches: list[HealthWatchResult] = field(default_factory=list)
    # Doors whose route the next watch to reach its bound finds edited (drift), and the doors
    # each watch was asked to read.
    drift: set[str] = field(default_factory=set)
    door_checks: list[list[DoorCheck]] = field(default_factory=list)

    def door_view(self, request: GlobalAddressRequest) -> GlobalAddressResult:
        """The global address's view of the doors (every door healthy unless said)."""
        host = f"{request.service}.{request.namespace}.{request.settings.zone}"
        return GlobalAddressResult(
            address=f"http://{host}/{request.namespace}/{request.service}",
            doors=[
                FrontDoorHealth(cluster=c, healthy=True, reason="No failures")
                for c in request.clusters
            ],
        )

    @activity.defn(name=SERVING_WATCH_HEALTH)
    async def watch_health(self, request: HealthWatchRequest) -> HealthWatchResult:
        """The watch's contract on a fast clock: a round every ``ROUND`` of real time (the
        time-skipping server does not skip an activity's own sleeps), ``max_seconds /
        interval_seconds`` rounds before it answers unchanged."""
        limit = max(1, int(request.max_seconds / request.interval_seconds))
        for rounds in range(1, limit + 1):
            health = {
                t.key: EndpointHealth(
                    key=t.key,
                    healthy=t.key not in self.unhealthy,
                    reason=self.unhealthy.get(t.key, "serves qwen"),
                    models=[] if t.key in self.unhealthy else self.models.get(t.key, ["qwen"]),
                )
                for t in request.targets
            }
            view = self.door_view(request.global_address) if request.global_address else None
            changed = endpoints_changed(request.known, health) or (
                request.global_address is not None
                and doors_changed(request.known_doors, request.known_global_failed, view, False)
            )
            why = "changed" if changed else "asked" if request.answer_first else ""
            if why or rounds == limit:
                drifted = (
                    [] if why else [d.cluster for d in request.doors if d.cluster in self.drift]
                )
                self.drift -= set(drifted)
                self.door_checks.append(request.doors)
                result = HealthWatchResult(
                    health=list(health.values()),
                    global_result=view,
                    why=why or "bounded",
                    rounds=rounds,
                    drifted=drifted,
                )
                self.health_watches.append(result)
                return result
            activity.heartbeat(rounds)
            await asyncio.sleep(ROUND)
        raise AssertionError("unreachable")

    @activity.defn(name=SERVING_GATEWAY_ADDRESS)
    async def gateway_address(self, request: GatewayAddressRequest) -> str:
        return f"gw.{request.cluster}:8080"

    @activity.defn(name=KUBE_APPLY)
    async def apply(self, request: ApplyRequest) -> ApplyResult:
        self.routes.append(next(m for m in request.manifests if m["kind"] == "HTTPRoute"))
        return ApplyResult(applied=[ObjectRef.of(m) for m in request.manifests])

    @activity.defn(name=KUBE_DELETE)
    async def delete(self, request: DeleteRequest) -> DeleteResult:
        self.deleted.extend(request.objects)
        return DeleteResult(deleted=len(request.objects), absent=0)


def _endpoint(name: str, ns: str = "ml", **labels: str) -> EndpointRecord:
    return EndpointRecord(
        namespace=ns,
        name=name,
        labels=labels,
        url=f"http://10.0.0.1/{ns}/{name}/v1",
        rewrite_path=f"/{ns}/{name}/",
        replica=name,
    )


def _service(entries: list[dict[str, Any]]) -> ModelService:
    doc = {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "ModelService",
        "metadata": {"name": "svc", "namespace": "ml"},
        "spec": {"endpoints": entries},
    }
    resource = parse_resource(doc)
    assert isinstance(resource, ModelService)
    return resource


@asynccontextmanager
async def serving_worker(
    doubles: Doubles, queue: str, *extra: Callable[..., Any]
) -> AsyncIterator[None]:
    """Workers for the directory and the service, with ``doubles`` for their activities (and
    ``extra`` ones), and for the health watches' own queue, as the worker process runs them."""
    main = Worker(
        doubles.client,
        task_queue=queue,
        workflows=[EndpointDirectoryWorkflow, ServiceWorkflow],
        activities=[
            doubles.watch,
            doubles.unwatch,
            doubles.gateway_address,
            doubles.apply,
            doubles.delete,
            *extra,
        ],
    )
    watches = Worker(
        doubles.client, task_queue=watch_task_queue(queue), activities=[doubles.watch_health]
    )
    async with main, watches:
        yield


def _gateway(spec: dict[str, Any] | None = None) -> InferenceGateway:
    gateway = parse_resource(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "InferenceGateway",
            "metadata": {"name": "default"},
            "spec": spec or {"cluster": "front"},
        }
    )
    assert isinstance(gateway, InferenceGateway)
    return gateway


def _weights(route: dict[str, Any]) -> dict[str, int]:
    refs = route["spec"]["rules"][0]["backendRefs"]
    return {r["filters"][0]["urlRewrite"]["path"]["replacePrefixMatch"]: r["weight"] for r in refs}


async def _until(
    env: WorkflowEnvironment, check: Callable[[], Awaitable[bool]], what: str, steps: int = 40
) -> None:
    """Let workflow time pass (skipped) until ``check`` holds."""
    for _ in range(steps):
        if await check():
            return
        await env.sleep(timedelta(seconds=1))
    raise AssertionError(f"never: {what}")


async def _stop(client: Client, *workflow_ids: str) -> None:
    """Terminate each workflow's current run: by ID, not by the handle's first run, which may
    have continued-as-new meanwhile (terminating it then answers "Completed workflow")."""
    for workflow_id in workflow_ids:
        handle = client.get_workflow_handle(workflow_id)
        for _ in range(5):
            try:
                await handle.terminate()
                break
            except RPCError:
                # The run the ID resolved to had just closed (continued-as-new, which the
                # time-skipping server does not make atomic): the next try terminates the run
                # after it; a workflow that closed for good needs nothing.
                if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
                    break


async def test_service_routes_healthy_endpoints_and_follows_changes(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    env = time_skipping_env
    client = env.client
    queue = f"tq-{uuid.uuid4()}"
    directory_id = f"endpoints-{uuid.uuid4()}"
    doubles = Doubles(client, directory_id, models={"ml/b-1": ["qwen", "qwen-b"]})
    async with serving_worker(doubles, queue):
        directory = await client.start_workflow(
            EndpointDirectoryWorkflow.run, EndpointsInput(), id=directory_id, task_queue=queue
        )
        for record in (
            _endpoint("a-1", dep="a"),
            _endpoint("b-1", dep="b"),
            _endpoint("b-2", dep="b"),
            _endpoint("a-9", ns="other", dep="a"),
        ):
            await directory.execute_update(EndpointDirectoryWorkflow.put, record)
        service_wf = f"service/ml/svc-{uuid.uuid4()}"
        spec = _service(
            [
                {"selector": {"matchLabels": {"dep": "a"}}, "weight": 80},
                {"selector": {"matchLabels": {"dep": "b"}}, "weight": 20},
            ]
        )
        service = await client.start_workflow(
            ServiceWorkflow.run,
            ServiceInput.of(spec, probe_interval_seconds=5),
            id=service_wf,
            task_queue=queue,
        )

        status = functools.partial(_status_of, service)

        # No InferenceGateway yet: nothing applied, and the service says why.
        async def waiting() -> bool:
            s = await status()
            return any(c.reason == "WaitingForGateway" for c in s.conditions)

        await _until(env, waiting, "WaitingForGateway")
        assert doubles.routes == []
        await directory.execute_update(EndpointDirectoryWorkflow.put_gateway, _gateway())

        async def routed() -> bool:
            return (await status()).phase == "Ready"

        await _until(env, routed, "routing")
        s = await status()
        assert s.address == "http://gw.front:8080/ml/svc"
        # Only this namespace's endpoints; 80 over one, 20 over two: 8, 1, 1.
        assert _weights(doubles.routes[-1]) == {"/ml/a-1/": 8, "/ml/b-1/": 1, "/ml/b-2/": 1}

        # A replica about to join with b's labels: the directory names this service's second
        # entry, and the service the distinct model lists its healthy endpoints there serve.
        joining = _endpoint("b-3", dep="b")
        matches = await directory.query(EndpointDirectoryWorkflow.selecting, joining)
        assert [(m.watcher, m.entries) for m in matches] == [(service_wf, [1])]
        assert (
            await directory.query(
                EndpointDirectoryWorkflow.selecting, _endpoint("b-3", ns="other", dep="b")
            )
            == []
        )
        expected = await service.query(ServiceWorkflow.served_models, [1])
        assert expected.service == "svc"
        assert expected.served == [["qwen"], ["qwen", "qwen-b"]]
        assert (await status()).endpoints[0].models == ["qwen"]

        # b-2 fails its probe: it leaves the route with the reason; b-1 takes b's whole share.
        doubles.unhealthy["ml/b-2"] = "GET http://10.0.0.1/ml/b-2/v1/models answered 503"

        async def b2_out() -> bool:
            # The route first, then the status: the service reports new weights once the route
            # that carries them is applied, so a query between the two still shows b-2's old one.
            if "/ml/b-2/" in _weights(doubles.routes[-1]):
                return False
            b2 = next(e for e in (await status()).endpoints if e.name == "b-2")
            return (b2.healthy, b2.weight) == (False, 0)

        await _until(env, b2_out, "b-2 out of the route")
        assert _weights(doubles.routes[-1]) == {"/ml/a-1/": 4, "/ml/b-1/": 1}
        b2 = next(e for e in (await status()).endpoints if e.name == "b-2")
        assert (b2.healthy, b2.weight) == (False, 0)
        assert "503" in b2.reason
        assert any(r.kind == "EndpointSlice" and "b-2" in r.name for r in doubles.deleted)

        # a-1 is withdrawn: pushed to the service at once, not at the next probe.
        applied = len(doubles.routes)
        await directory.execute_update(
            EndpointDirectoryWorkflow.withdraw, EndpointKey(namespace="ml", name="a-1")
        )

        async def a_gone() -> bool:
            return len(doubles.routes) > applied and "/ml/a-1/" not in _weights(doubles.routes[-1])

        await _until(env, a_gone, "a-1 out of the route", steps=3)
        assert _weights(doubles.routes[-1]) == {"/ml/b-1/": 1}

        # Delete: the route and its backends are removed, and the watch is dropped.
        doubles.deleted.clear()
        await service.execute_update(ServiceWorkflow.delete)
        final = await service.result()
        assert final.phase == "Deleted"
        assert {r.kind for r in doubles.deleted} == {
            "BackendTrafficPolicy",
            "HTTPRoute",
            "Service",
            "EndpointSlice",
        }
        assert doubles.deleted[0].kind == "HTTPRoute"  # the route goes before its backends
        listed = await directory.query(EndpointDirectoryWorkflow.list_endpoints, "ml")
        assert [e.name for e in listed] == ["b-1", "b-2"]
        await _stop(client, directory_id)


@dataclass
class HeldApply(Doubles):
    """Doubles whose route apply, once ``hold`` is set, waits until it is cleared."""

    hold: asyncio.Event | None = None
    entered: asyncio.Event = field(default_factory=asyncio.Event)

    @activity.defn(name=KUBE_APPLY)
    async def apply(self, request: ApplyRequest) -> ApplyResult:
        if self.hold is not None:
            self.entered.set()
            await self.hold.wait()
        return await super().apply(request)


@dataclass
class TwoInRotation:
    """A service over a-1 and a-2, both in rotation, with the route apply holdable."""

    doubles: HeldApply
    directory: WorkflowHandle[Any, Any]
    service: WorkflowHandle[Any, Any]

    async def weights(self) -> dict[str, int]:
        status: ServiceStatus = await self.service.query(ServiceWorkflow.status)
        return {e.name: e.weight for e in status.endpoints}


async def _directory_of_two(
    client: Client, directory_id: str, queue: str
) -> WorkflowHandle[Any, Any]:
    """An endpoint directory with the gateway and deployment ``a``'s two endpoints."""
    directory = await client.start_workflow(
        EndpointDirectoryWorkflow.run, EndpointsInput(), id=directory_id, task_queue=queue
    )
    await directory.execute_update(EndpointDirectoryWorkflow.put_gateway, _gateway())
    for record in (_endpoint("a-1", dep="a"), _endpoint("a-2", dep="a")):
        await directory.execute_update(EndpointDirectoryWorkflow.put, record)
    return directory


@asynccontextmanager
async def two_in_rotation(env: WorkflowEnvironment) -> AsyncIterator[TwoInRotation]:
    client = env.client
    queue = f"tq-{uuid.uuid4()}"
    directory_id = f"endpoints-{uuid.uuid4()}"
    doubles = HeldApply(client, directory_id)
    async with serving_worker(doubles, queue):
        directory = await _directory_of_two(client, directory_id, queue)
        service = await client.start_workflow(
            ServiceWorkflow.run,
            ServiceInput.of(
                _service([{"selector": {"matchLabels": {"dep": "a"}}, "weight": 100}]),
                probe_interval_seconds=5,
            ),
            id=f"service/ml/svc-{uuid.uuid4()}",
            task_queue=queue,
        )
        two = TwoInRotation(doubles, directory, service)

        async def both() -> bool:
            return await two.weights() == {"a-1": 1, "a-2": 1}

        await _until(env, both, "both endpoints in rotation")
        yield two
        await _stop(client, service.id, directory_id)


async def test_status_shows_new_weights_only_once_the_route_carries_them(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    env = time_skipping_env
    async with two_in_rotation(env) as two:
        doubles, weights = two.doubles, two.weights
        # a-2 fails its probe; the route apply that takes it out is held.
        doubles.hold = asyncio.Event()
        doubles.unhealthy["ml/a-2"] = "answered 503"

        async def applying() -> bool:
            return doubles.entered.is_set()

        await _until(env, applying, "the route apply without a-2")
        # The gateway still sends a-2 traffic, and the status says so.
        assert await weights() == {"a-1": 1, "a-2": 1}
        doubles.hold.set()

        async def a2_out() -> bool:
            return await weights() == {"a-1": 1, "a-2": 0}

        await _until(env, a2_out, "a-2 out once the route is applied")
        assert _weights(doubles.routes[-1]) == {"/ml/a-1/": 1}


async def test_a_withdrawn_endpoint_stays_in_the_status_until_the_route_drops_it(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    """A replica that stops serving withdraws its endpoint; the service hears it at once, but
    the gateway routes to it until a route without it is applied: the status says so."""
    env = time_skipping_env
    async with two_in_rotation(env) as two:
        doubles, weights, service = two.doubles, two.weights, two.service
        doubles.hold = asyncio.Event()
        await two.directory.execute_update(
            EndpointDirectoryWorkflow.withdraw, EndpointKey(namespace="ml", name="a-2")
        )

        async def applying() -> bool:
            return doubles.entered.is_set()

        await _until(env, applying, "the route apply without a-2")
        status: ServiceStatus = await service.query(ServiceWorkflow.status)
        (a2,) = [e for e in status.endpoints if e.name == "a-2"]
        assert a2.weight == 1
        assert "withdrawn" in a2.reason
        doubles.hold.set()

        async def a2_gone() -> bool:
            return await weights() == {"a-1": 1}

        await _until(env, a2_gone, "a-2 gone once the route is applied")
        assert _weights(doubles.routes[-1]) == {"/ml/a-1/": 1}


@dataclass
class LateWatch(Doubles):
    """The first watch's answer reaches the service after a change the directory signalled
    once the watch was registered (a replica published right then): the answer is older."""

    raced: bool = False

    @activity.defn(name=ENDPOINTS_WATCH)
    async def watch(self, request: WatchRequest) -> WatchResult:
        handle = self.client.get_workflow_handle(self.directory)
        result: WatchResult = await handle.execute_update(EndpointDirectoryWorkflow.watch, request)
        if not self.raced:
            self.raced = True
            await handle.execute_update(EndpointDirectoryWorkflow.put, _endpoint("a-2", dep="a"))
            service = self.client.get_workflow_handle(request.watcher)
            for _ in range(200):  # until the directory's signal is in the service's history
                history = await service.fetch_history()
                if any(
                    e.HasField("workflow_execution_signaled_event_attributes")
                    for e in history.events
                ):
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the directory never signalled the service")
        return result


async def test_a_change_signalled_while_the_watch_is_in_flight_is_not_lost(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    """Issue 27's measurement found a service left with one of a deployment's two Ready
    replicas for good: the second was published just after the service's watch registered,
    the directory's signal reached the service before the watch's answer, and the answer
    overwrote it. The service keeps the newer of the two (the directory's revision)."""
    env = time_skipping_env
    client = env.client
    queue = f"tq-{uuid.uuid4()}"
    directory_id = f"endpoints-{uuid.uuid4()}"
    doubles = LateWatch(client, directory_id)
    async with serving_worker(doubles, queue):
        directory = await client.start_workflow(
            EndpointDirectoryWorkflow.run, EndpointsInput(), id=directory_id, task_queue=queue
        )
        await directory.execute_update(EndpointDirectoryWorkflow.put_gateway, _gateway())
        await directory.execute_update(EndpointDirectoryWorkflow.put, _endpoint("a-1", dep="a"))
        service = await client.start_workflow(
            ServiceWorkflow.run,
            ServiceInput.of(
                _service([{"selector": {"matchLabels": {"dep": "a"}}}]),
                probe_interval_seconds=5,
            ),
            id=f"service/ml/svc-{uuid.uuid4()}",
            task_queue=queue,
        )

        async def both() -> bool:
            status: ServiceStatus = await service.query(ServiceWorkflow.status)
            return {e.name for e in status.endpoints} == {"a-1", "a-2"}

        try:
            await _until(env, both, "both endpoints in the service")
            assert doubles.raced
            assert _weights(doubles.routes[-1]) == {"/ml/a-1/": 1, "/ml/a-2/": 1}
        finally:
            await _stop(client, service.id, directory_id)


_GLOBAL_ADDRESS = {
    "accountId": "a" * 32,
    "zoneId": "b" * 32,
    "zone": "fleet.example",
    "apiTokenSecretRef": {"name": "cf"},
}


@dataclass
class Doors(Doubles):
    """Doubles for a service on two front doors behind a global address: applies by cluster,
    and each door's health as the global load balancer would report it."""

    by_cluster: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    door_health: dict[str, FrontDoorHealth] = field(default_factory=dict)
    removed_global: list[str] = field(default_factory=list)

    @activity.defn(name=KUBE_APPLY)
    async def apply(self, request: ApplyRequest) -> ApplyResult:
        route = next(m for m in request.manifests if m["kind"] == "HTTPRoute")
        self.by_cluster.setdefault(request.cluster, []).append(route)
        return await super().apply(request)

    def door_view(self, request: GlobalAddressRequest) -> GlobalAddressResult:
        view = super().door_view(request)
        view.doors = [self.door_health.get(d.cluster, d) for d in view.doors]
        return view

    @activity.defn(name=SERVING_REMOVE_GLOBAL_ADDRESS)
    async def remove_global(self, request: GlobalAddressRemoval) -> int:
        self.removed_global.append(request.service)
        return 3


async def _status_of(service: WorkflowHandle[Any, Any]) -> ServiceStatus:
    result: ServiceStatus = await service.query(ServiceWorkflow.status)
    return result


@asynccontextmanager
async def _two_doors(doubles: Doors) -> AsyncIterator[tuple[str, WorkflowHandle[Any, Any]]]:
    """A directory with a gateway on two front doors ("front", "back") behind a global address
    and endpoints a-1 and a-2, and a service over them (probed every 5 s), on the workers of
    ``doubles``: the directory's ID and the service's handle."""
    client, queue = doubles.client, f"tq-{uuid.uuid4()}"
    gateway = _gateway(
        {"cluster": "front", "additionalClusters": ["back"], "globalAddress": _GLOBAL_ADDRESS}
    )
    async with serving_worker(doubles, queue, doubles.remove_global):
        directory = await client.start_workflow(
            EndpointDirectoryWorkflow.run, EndpointsInput(), id=doubles.directory, task_queue=queue
        )
        await directory.execute_update(EndpointDirectoryWorkflow.put_gateway, gateway)
        for record in (_endpoint("a-1", dep="a"), _endpoint("a-2", dep="a")):
            await directory.execute_update(EndpointDirectoryWorkflow.put, record)
        service = await client.start_workflow(
            ServiceWorkflow.run,
            ServiceInput.of(
                _service([{"selector": {"matchLabels": {"dep": "a"}}}]),
                probe_interval_seconds=5,
            ),
            id=f"service/ml/svc-{uuid.uuid4()}",
            task_queue=queue,
        )
        yield doubles.directory, service


async def test_a_service_on_two_front_doors_behind_one_address(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    env = time_skipping_env
    client = env.client
    doubles = Doors(client, f"endpoints-{uuid.uuid4()}")
    async with _two_doors(doubles) as (directory_id, service):
        status = functools.partial(_status_of, service)

        async def doors() -> dict[str, str]:
            return {d.cluster: d.state for d in (await status()).front_doors}

        async def both_serving() -> bool:
            return await doors() == {"front": "Serving", "back": "Serving"}

        await _until(env, both_serving, "both doors serving")
        s = await status()
        assert s.address == s.global_address == "http://svc.ml.fleet.example/ml/svc"
        assert [d.address for d in s.front_doors] == [
            "http://gw.front:8080/ml/svc",
            "http://gw.back:8080/ml/svc",
        ]
        # The route on each door, to every endpoint.
        for cluster in ("front", "back"):
            assert _weights(doubles.by_cluster[cluster][-1]) == {"/ml/a-1/": 1, "/ml/a-2/": 1}

        # The front door's cluster goes dark: the balancer cannot connect. Its state says so,
        # and a route change goes to the back door only (an apply there could only hang).
        doubles.door_health["front"] = FrontDoorHealth(
            cluster="front", healthy=False, reason="TCP connection failed"
        )

        async def front_out() -> bool:
            return (await doors())["front"] == "Out"

        await _until(env, front_out, "the front door out")
        front_routes = len(doubles.by_cluster["front"])
        doubles.unhealthy["ml/a-2"] = "connection refused"

        async def a2_out_at_back() -> bool:
            return _weights(doubles.by_cluster["back"][-1]) == {"/ml/a-1/": 1}

        await _until(env, a2_out_at_back, "a-2 out of the back door's route")
        assert len(doubles.by_cluster["front"]) == front_routes

        # NotReady: withdrawn from the address by the fleet's view.
        doubles.door_health["front"] = FrontDoorHealth(
            cluster="front", enabled=False, reason="cluster not Ready: probe failed"
        )

        async def front_disabled() -> bool:
            return (await doors())["front"] == "Disabled"

        await _until(env, front_disabled, "the front door disabled")

        # Back: the front door gets the route it missed.
        del doubles.door_health["front"]

        async def front_current() -> bool:
            return await both_serving() and _weights(doubles.by_cluster["front"][-1]) == {
                "/ml/a-1/": 1
            }

        await _until(env, front_current, "the front door back with the current route")

        # Delete: the global address first, then the route on each door.
        doubles.deleted.clear()
        await service.execute_update(ServiceWorkflow.delete)
        final = await service.result()
        assert final.phase == "Deleted"
        assert doubles.removed_global == ["svc"]
        assert sum(r.kind == "HTTPRoute" for r in doubles.deleted) == 2
        await _stop(client, directory_id)


@dataclass
class HangingDoors(Doors):
    """``Doors`` whose applies to the clusters in ``hanging`` never answer (a cluster gone dark
    before the global load balancer noticed: its door is still reported healthy)."""

    hanging: set[str] = field(default_factory=set)

    @activity.defn(name=KUBE_APPLY)
    async def apply(self, request: ApplyRequest) -> ApplyResult:
        if request.cluster in self.hanging:
            await asyncio.Event().wait()
        return await super().apply(request)


async def test_a_door_that_does_not_answer_holds_the_loop_for_its_bound_only(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    env = time_skipping_env
    client = env.client
    doubles = HangingDoors(client, f"endpoints-{uuid.uuid4()}")
    async with _two_doors(doubles) as (directory_id, service):
        status = functools.partial(_status_of, service)

        async def both_serving() -> bool:
            doors = {d.cluster: d.state for d in (await status()).front_doors}
            return doors == {"front": "Serving", "back": "Serving"}

        await _until(env, both_serving, "both doors serving")
        # The front door's cluster stops answering before the balancer sees it, and a change
        # needs a new route on both doors.
        doubles.hanging.add("front")
        doubles.unhealthy["ml/a-2"] = "connection refused"
        started = await env.get_current_time()

        async def front_failed_and_a2_out() -> bool:
            s = await status()
            front = next(d for d in s.front_doors if d.cluster == "front")
            return (
                front.state == "Configuring"
                and front.reason.startswith("no answer within 20 s")
                and _weights(doubles.by_cluster["back"][-1]) == {"/ml/a-1/": 1}
                and not any(e.weight for e in s.endpoints if e.name == "a-2")
            )

        # Within the door's bound (20 s) and a probe interval, not its 3 minutes of retries.
        await _until(env, front_failed_and_a2_out, "the front door failed, a-2 out", steps=60)
        assert (await env.get_current_time()) - started < timedelta(seconds=60)
        await _stop(client, service.id, directory_id)


async def test_a_gateway_that_drops_its_global_address_removes_it(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    env = time_skipping_env
    client = env.client
    queue = f"tq-{uuid.uuid4()}"
    directory_id = f"endpoints-{uuid.uuid4()}"
    doubles = Doors(client, directory_id)
    async with serving_worker(doubles, queue, doubles.remove_global):
        directory = await client.start_workflow(
            EndpointDirectoryWorkflow.run, EndpointsInput(), id=directory_id, task_queue=queue
        )
        await directory.execute_update(
            EndpointDirectoryWorkflow.put_gateway,
            _gateway({"cluster": "front", "globalAddress": _GLOBAL_ADDRESS}),
        )
        await directory.execute_update(EndpointDirectoryWorkflow.put, _endpoint("a-1", dep="a"))
        service = await client.start_workflow(
            ServiceWorkflow.run,
            ServiceInput.of(
                _service([{"selector": {"matchLabels": {"dep": "a"}}}]),
                probe_interval_seconds=5,
            ),
            id=f"service/ml/svc-{uuid.uuid4()}",
            task_queue=queue,
        )

        status = functools.partial(_status_of, service)

        async def global_address() -> bool:
            return (await status()).address == "http://svc.ml.fleet.example/ml/svc"

        await _until(env, global_address, "the global address")
        await directory.execute_update(
            EndpointDirectoryWorkflow.put_gateway, _gateway({"cluster": "front"})
        )

        async def door_address() -> bool:
            s = await status()
            return s.address == "http://gw.front:8080/ml/svc" and s.global_address is None

        await _until(env, door_address, "back to the door's own address")
        assert doubles.removed_global == ["svc"]
        await service.execute_update(ServiceWorkflow.delete)
        await service.result()
        # Nothing left to remove at delete.
        assert doubles.removed_global == ["svc"]
        await _stop(client, directory_id)


async def test_an_idle_service_writes_one_watch_per_bound_and_repairs_drift_at_it(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    """Nothing changes: each health watch runs to its bound and the service writes its answer
    (the activity's three events and one workflow task's three), applies nothing and starts
    no timer. Before, every probe interval cost a probe, a timer and two workflow tasks. A
    route edited on its door is found at a bound and applied again."""
    env = time_skipping_env
    client = env.client
    queue = f"tq-{uuid.uuid4()}"
    directory_id = f"endpoints-{uuid.uuid4()}"
    doubles = Doubles(client, directory_id)
    async with serving_worker(doubles, queue):
        await _directory_of_two(client, directory_id, queue)
        service = await client.start_workflow(
            ServiceWorkflow.run,
            ServiceInput.of(
                _service([{"selector": {"matchLabels": {"dep": "a"}}}]),
                probe_interval_seconds=5,
                # Four rounds a watch (each ``ROUND`` of real time with the doubles).
                watch_bound_seconds=20,
            ),
            id=f"service/ml/svc-{uuid.uuid4()}",
            task_queue=queue,
        )

        async def ready() -> bool:
            status: ServiceStatus = await service.query(ServiceWorkflow.status)
            return status.phase == "Ready"

        await _until(env, ready, "routing")
        first = len(doubles.health_watches)
        start = len((await service.fetch_history()).events)

        async def idle_watches() -> bool:
            return len(doubles.health_watches) >= first + 5

        await _until(env, idle_watches, "five idle watches", steps=200)
        events = (await service.fetch_history()).events
        # The watch that answered last may not be in the history yet: count what is.
        kinds = [e.event_type for e in events[start:]]
        watches = kinds.count(EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)
        assert watches >= 4
        assert [w.why for w in doubles.health_watches[first : first + 4]] == ["bounded"] * 4
        assert all(w.rounds == 4 for w in doubles.health_watches[first : first + 4])
        assert EventType.EVENT_TYPE_TIMER_STARTED not in kinds
        # Scheduled + started + completed, and the workflow task's three (which schedules the
        # next watch), per watch; the last watch's may be half written.
        assert len(kinds) <= 6 * watches + 6
        assert len(doubles.routes) == 1

        # Someone edits the route on the door: the next watch to reach its bound reads it and
        # the service applies its own again, once.
        route = doubles.routes[0]
        (check,) = doubles.door_checks[-1]
        assert (check.cluster, check.route.kind, check.route.name) == (
            "front",
            "HTTPRoute",
            route["metadata"]["name"],
        )
        assert route["metadata"]["annotations"][ROUTE_DIGEST_ANNOTATION] == check.digest
        doubles.drift.add("front")

        async def reapplied() -> bool:
            return len(doubles.routes) == 2

        await _until(env, reapplied, "the route applied again", steps=200)
        assert doubles.routes[1] == route
        assert doubles.drift == set()
        answered = len(doubles.health_watches)

        async def two_more() -> bool:
            return len(doubles.health_watches) >= answered + 2

        await _until(env, two_more, "two more watches", steps=200)
        assert len(doubles.routes) == 2  # repaired once, not on every bound
        await _stop(client, service.id, directory_id)
