"""Reading the live fleet for ``get``, ``describe``, ``diff`` and ``apply``: lists come from
visibility (search attributes, start times), details from the workflows' queries.

Every read is bounded: before querying, the task queue must have a poller (no worker: a clear
error at once), and each query has an RPC timeout so a worker that vanished is reported within
seconds instead of Temporal's own minute-long timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from temporalio.client import (
    Client,
    RPCTimeoutOrCancelledError,
    WorkflowExecution,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
)
from temporalio.service import RPCError, RPCStatusCode

from modelfleet.api.autoscalers import ModelAutoscaler
from modelfleet.api.caches import ModelCache
from modelfleet.api.classes import InferenceClass
from modelfleet.api.deployments import ModelDeployment, ModelReplica
from modelfleet.api.meta import Resource
from modelfleet.api.services import InferenceGateway, ModelService
from modelfleet.autoscaler.records import AutoscalerStatus
from modelfleet.autoscaler.workflow import AutoscalerWorkflow, autoscaler_id
from modelfleet.cache.workflow import CacheWorkflow
from modelfleet.cli.connection import open_client, require_worker
from modelfleet.cli.errors import START_WORKER, CliError, NotFoundError, NoWorkerError, UsageError
from modelfleet.cli.manifests import (
    Fetched,
    autoscaler_resource,
    brief_deployment_resource,
    cache_resource,
    class_resource,
    deployment_resource,
    endpoint_resource,
    entity_resource,
    gateway_resource,
    replica_resource,
    service_resource,
    unanswered_resource,
)
from modelfleet.cli.targets import is_namespaced, resource_name
from modelfleet.cluster.workflow import ClusterWorkflow
from modelfleet.contracts import search
from modelfleet.contracts.cache_payloads import CacheStatus
from modelfleet.contracts.fleet_payloads import ReplicaPage, ReplicaPageRequest
from modelfleet.contracts.ids import (
    FLEET_ID,
    cache_id,
    cluster_id,
    deployment_id,
    replica_id,
    service_id,
)
from modelfleet.contracts.serving_payloads import ENDPOINTS_ID, ServiceStatus
from modelfleet.contracts.status import (
    ClusterRecord,
    ClusterStatus,
    DeploymentStatus,
    FleetView,
    ReplicaProgress,
)
from modelfleet.deployment.workflow import DeploymentWorkflow
from modelfleet.fleet.workflow import FleetWorkflow
from modelfleet.rendering.front_door import EndpointRecord
from modelfleet.replica.progress import in_flight, with_progress
from modelfleet.replica.workflow import ReplicaWorkflow
from modelfleet.service.workflow import ServiceWorkflow
from modelfleet.worker.settings import TemporalSettings

QUERY_TIMEOUT = timedelta(seconds=8)
# Workflows a list asks at once (each its own query; the server and workers answer in parallel).
ROW_READS = 16


async def connect_with_worker(s: TemporalSettings) -> Client:
    """A client, once the server answers and a worker polls the task queue."""
    client = await open_client(s)
    await require_worker(client, s)
    return client


def _no_answer(what: str) -> str:
    return (
        f"no worker answered a query to {what} within {QUERY_TIMEOUT.seconds}s (its worker is "
        f"busy, or none runs it); {START_WORKER}"
    )


async def query(
    handle: WorkflowHandle[Any, Any],
    name: Any,
    *args: Any,
    what: str,
    result_type: Any = None,
) -> Any:
    """A workflow query that fails fast (and says why) instead of hanging."""
    try:
        if result_type is not None:  # queries named by string (no typed method to read it from)
            return await handle.query(
                name, *args, result_type=result_type, rpc_timeout=QUERY_TIMEOUT
            )
        return await handle.query(name, *args, rpc_timeout=QUERY_TIMEOUT)
    except RPCTimeoutOrCancelledError:
        raise NoWorkerError(_no_answer(what)) from None
    except WorkflowQueryFailedError as exc:
        if "unknown queryType" in exc.message or "not registered" in exc.message:
            raise CliError(
                f"the worker running {what} is older than this CLI ({exc.message}); "
                "restart the workers with this version"
            ) from None
        raise
    except RPCError as exc:
        # The server gives up on a query nobody answers with either code ("Timeout expired").
        if exc.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
            raise NoWorkerError(_no_answer(what)) from None
        if exc.status is RPCStatusCode.NOT_FOUND:
            raise NotFoundError(f"{what} not found") from None
        raise


async def running(
    client: Client, kind: str, namespace: str | None = None, name: str | None = None
) -> list[WorkflowExecution]:
    """Running entity workflows of ``kind`` (names are DNS labels: safe in the query)."""
    q = f"ModelfleetKind = '{kind}' AND ExecutionStatus = 'Running'"
    if namespace:
        q += f" AND ModelfleetNamespace = '{namespace}'"
    if name:
        q += f" AND ModelfleetName = '{name}'"
    found = [w async for w in client.list_workflows(q)]
    return sorted(found, key=lambda w: w.id)


async def is_running(client: Client, workflow_id: str) -> WorkflowExecution | None:
    """The workflow's execution if it runs now. Asked of the workflow itself, not visibility,
    which may lag behind an apply that just happened on a shared (Elasticsearch) server."""
    try:
        desc = await client.get_workflow_handle(workflow_id).describe(rpc_timeout=QUERY_TIMEOUT)
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            return None
        raise
    return desc if desc.status is WorkflowExecutionStatus.RUNNING else None


def _phase(w: WorkflowExecution) -> str | None:
    return w.typed_search_attributes.get(search.PHASE)


async def fleet_view(client: Client, *, replicas: bool = True) -> FleetView:
    """The Fleet's classes, clusters and (with ``replicas``) placed replicas."""
    view, _ = await fleet_state(client, replicas=replicas)
    return view


async def fleet_state(
    client: Client, *, replicas: bool = True
) -> tuple[FleetView, dict[str, InferenceClass]]:
    """The Fleet's view and its class catalog by name, the catalog asked once: commands that
    need both take them from here. Replicas come in bounded pages: one answer holding every
    replica (~1 KB each) outgrows what a query may carry past a few thousand."""
    handle = client.get_workflow_handle(FLEET_ID)
    clusters: list[ClusterRecord] = await query(
        handle, FleetWorkflow.clusters, what="the Fleet workflow"
    )
    classes = await fleet_classes(client)
    placed = await placed_replicas(client) if replicas else []
    view = FleetView(classes=sorted(c.name for c in classes), clusters=clusters, replicas=placed)
    return view, {c.name: c for c in classes}


async def placed_replicas(client: Client, *, cluster: str = "") -> list[ModelReplica]:
    """The replicas the Fleet has placed (only those on ``cluster`` when given), page by page."""
    handle = client.get_workflow_handle(FLEET_ID)
    placed: list[ModelReplica] = []
    after: str | None = ""
    while after is not None:
        page: ReplicaPage = await query(
            handle,
            FleetWorkflow.replica_page,
            ReplicaPageRequest(after=after, cluster=cluster),
            what="the Fleet workflow",
        )
        placed += page.replicas
        after = page.next_after or None
    return placed


async def fleet_classes(client: Client) -> list[InferenceClass]:
    classes: list[InferenceClass] = await query(
        client.get_workflow_handle(FLEET_ID), FleetWorkflow.classes, what="the Fleet workflow"
    )
    return classes


async def deployment_status(client: Client, namespace: str, name: str) -> DeploymentStatus:
    status: DeploymentStatus = await query(
        client.get_workflow_handle(deployment_id(namespace, name)),
        DeploymentWorkflow.status,
        what=f"ModelDeployment {namespace}/{name}",
    )
    # A replica tells its deployment only Ready/Degraded/Failed/Done; the step of one still
    # rolling out is asked of the replica itself.
    names = in_flight(status)
    answers = await asyncio.gather(*(_replica_progress(client, namespace, n) for n in names))
    return with_progress(status, {p.name: p for p in answers if p is not None})


async def _replica_progress(client: Client, namespace: str, name: str) -> ReplicaProgress | None:
    """The replica's own report, or None when it cannot answer now (the deployment's view
    stands)."""
    with contextlib.suppress(RPCError, RPCTimeoutOrCancelledError, WorkflowQueryFailedError):
        progress: ReplicaProgress = await client.get_workflow_handle(
            replica_id(namespace, name)
        ).query(ReplicaWorkflow.progress, rpc_timeout=QUERY_TIMEOUT)
        return progress
    return None


async def deployment_spec(client: Client, namespace: str, name: str) -> ModelDeployment:
    spec: ModelDeployment = await query(
        client.get_workflow_handle(deployment_id(namespace, name)),
        DeploymentWorkflow.spec,
        what=f"ModelDeployment {namespace}/{name}",
    )
    return spec


async def cluster_status(client: Client, name: str) -> ClusterStatus:
    status: ClusterStatus = await query(
        client.get_workflow_handle(cluster_id(name)),
        ClusterWorkflow.status,
        what=f"InferenceCluster {name}",
    )
    return status


async def fetch(
    client: Client,
    kind: str,
    namespace: str | None,
    names: Sequence[str] = (),
    *,
    brief: bool = False,
) -> list[Fetched]:
    """Every live resource of ``kind`` (in ``namespace``, or all when None), optionally only
    the ``names`` given; sorted by namespace, then name. ``brief``: only what the plain table
    and ``-o name`` show, from visibility where the kind can (no workflow query)."""
    from modelfleet.cli.kinds import spec_of  # the registry names this module's readers

    spec = spec_of(kind)
    if spec.fetch is None:
        raise UsageError(f"{kind} is not orchestrated yet: nothing of that kind runs")
    reader = spec.brief if brief and spec.brief is not None else spec.fetch
    items = await reader(client, namespace, set(names))
    return sorted(items, key=lambda f: (f.namespace, f.name))


async def fetch_endpoints(client: Client, namespace: str | None, wanted: set[str]) -> list[Fetched]:
    return [
        endpoint_resource(e)
        for e in await directory_endpoints(client, namespace)
        if not wanted or e.name in wanted
    ]


async def fetch_gateways(client: Client, namespace: str | None, wanted: set[str]) -> list[Fetched]:
    """The fleet's own InferenceGateway (``accepted_reads.fetch_gateways`` adds Modelplane's)."""
    gateway = await directory_gateway(client)
    items = []
    if gateway is not None and (not wanted or gateway.name in wanted):
        created = await _directory(client, "gateway_created", (), datetime | None)
        items.append(gateway_resource(gateway, created))
    return items


async def fetch_deployments(
    client: Client, namespace: str | None, wanted: set[str]
) -> list[Fetched]:
    """Every deployment's spec and status, asked of its workflow, a few at a time. One that
    cannot answer now (its workflow task failing or stuck behind a busy worker) is a row of
    what visibility knows (name, age, last published phase and counts) carrying the reason, not
    the end of the list: one busy workflow never takes ``get deployments -A`` down."""
    gate = asyncio.Semaphore(ROW_READS)
    runs = await _runs(client, "ModelDeployment", namespace, wanted, deployment_id)
    rows = await asyncio.gather(*(_asked_deployment(client, w, gate) for w in runs))
    return [r for r in rows if r is not None]


async def brief_deployments(
    client: Client, namespace: str | None, wanted: set[str]
) -> list[Fetched]:
    """The rows of ``get deployments`` (plain table, ``-o name``) from visibility alone: the
    phase, replica counts and creation time each deployment publishes as search attributes. No
    workflow is queried, so a list of thousands answers while their worker is busy rolling
    them out. Named ones are described (the workflow's own record: visibility may lag an
    apply), which needs no workflow task either. A deployment that has not published its
    counts (a worker older than this CLI) is asked, as ``fetch_deployments`` asks."""
    gate = asyncio.Semaphore(ROW_READS)

    async def row(w: WorkflowExecution) -> Fetched | None:
        found = brief_row(w)
        return found if found is not None else await _asked_deployment(client, w, gate)

    runs = await _runs(client, "ModelDeployment", namespace, wanted, deployment_id)
    rows = await asyncio.gather(*(row(w) for w in runs))
    return [r for r in rows if r is not None]


def brief_row(w: WorkflowExecution) -> Fetched | None:
    """A deployment's row from its search attributes; None when it has not published them."""
    attrs = w.typed_search_attributes
    ready, desired, updated = (attrs.get(k) for k in (search.READY, search.DESIRED, search.UPDATED))
    phase = attrs.get(search.PHASE)
    if ready is None or desired is None or updated is None or phase is None:
        return None
    _, ns, name = w.id.split("/", 2)
    created = attrs.get(search.CREATED) or w.start_time
    clusters = list(attrs.get(search.CLUSTERS) or [])
    return brief_deployment_resource(ns, name, created, phase, ready, desired, updated, clusters)


async def _asked_deployment(
    client: Client, w: WorkflowExecution, gate: asyncio.Semaphore
) -> Fetched | None:
    """One deployment's spec and status from its workflow; a row of what visibility knows
    with the reason when it cannot answer now; None when it was deleted since it was listed."""
    _, ns, dname = w.id.split("/", 2)
    async with gate:
        try:
            # Both at once: a row costs one round of queries, not two, on a busy worker.
            status, spec = await asyncio.gather(
                deployment_status(client, ns, dname), deployment_spec(client, ns, dname)
            )
        except NotFoundError:
            return None
        except (CliError, RPCError, WorkflowQueryFailedError) as exc:
            unanswered = unanswered_resource("ModelDeployment", ns, dname, w, _phase(w), exc)
            known = brief_row(w)  # the counts it last published, when it did
            if known is not None:
                for key in ("ready", "desired", "updated"):
                    unanswered.status[key] = known.status[key]
            return unanswered
    # The workflow keeps its creation time across continue-as-new; this run's start is
    # only the creation time for a deployment that never continued.
    return deployment_resource(spec, status, status.created or w.start_time)


async def fetch_classes(client: Client, namespace: str | None, wanted: set[str]) -> list[Fetched]:
    view, classes = await fleet_state(client, replicas=False)
    created: dict[str, datetime] = await query(
        client.get_workflow_handle(FLEET_ID), FleetWorkflow.class_created, what="the Fleet workflow"
    )
    out = []
    for cls in classes.values():
        if wanted and cls.name not in wanted:
            continue
        users = sorted(
            c.spec.name
            for c in view.clusters
            if any(p.class_name == cls.name for p in c.spec.spec.node_pools)
        )
        out.append(class_resource(cls, users, created.get(cls.name)))
    return out


async def fetch_replicas(client: Client, namespace: str | None, wanted: set[str]) -> list[Fetched]:
    view = await fleet_view(client)
    runs = {w.id: w for w in await running(client, "ModelReplica", namespace)}
    out = []
    for replica in view.replicas:
        if namespace and replica.namespace != namespace:
            continue
        if wanted and replica.name not in wanted:
            continue
        run = runs.get(f"replica/{replica.namespace}/{replica.name}")
        out.append(
            replica_resource(replica, run.start_time if run else None, _phase(run) if run else None)
        )
    return out


async def service_status(client: Client, namespace: str, name: str) -> ServiceStatus:
    status: ServiceStatus = await query(
        client.get_workflow_handle(service_id(namespace, name)),
        ServiceWorkflow.status,
        what=f"ModelService {namespace}/{name}",
    )
    return status


async def autoscaler_status(client: Client, namespace: str, name: str) -> AutoscalerStatus:
    status: AutoscalerStatus = await query(
        client.get_workflow_handle(autoscaler_id(namespace, name)),
        AutoscalerWorkflow.status,
        what=f"ModelAutoscaler {namespace}/{name}",
    )
    return status


async def _runs(
    client: Client, kind: str, namespace: str | None, wanted: set[str], wid: Any
) -> list[WorkflowExecution]:
    """Running workflows of ``kind``; named ones are asked of the workflow (visibility lags)."""
    if wanted and namespace:
        found = [await is_running(client, wid(namespace, n)) for n in sorted(wanted)]
        return [w for w in found if w is not None]
    runs = await running(client, kind, namespace)
    return [w for w in runs if not wanted or w.id.split("/", 2)[2] in wanted]


def entity_fetch(kind: str, workflow: Any, workflow_id: Any) -> Any:
    """How ``get`` reads a kind that follows the entity convention (``cli.kinds.entity_kind``):
    its running workflows (marked ``ModelfleetKind = kind``), each asked for its ``spec`` and
    ``status``. Named ones are asked of their workflow (visibility lags an apply)."""

    async def fetch(client: Client, namespace: str | None, wanted: set[str]) -> list[Fetched]:
        if wanted and (namespace or not is_namespaced(kind)):
            found = [await is_running(client, workflow_id(namespace or "", n)) for n in wanted]
            runs = sorted((w for w in found if w is not None), key=lambda w: w.id)
        else:
            runs = await running(client, kind, namespace)
        out = []
        for w in runs:
            handle = client.get_workflow_handle(w.id)
            spec: Resource = await query(handle, workflow.spec, what=f"{kind} ({w.id})")
            if wanted and spec.name not in wanted:
                continue
            status = await query(handle, workflow.status, what=spec.ref)
            out.append(entity_resource(spec, status, w.start_time))
        return out

    return fetch


async def fetch_services(client: Client, namespace: str | None, wanted: set[str]) -> list[Fetched]:
    out = []
    for w in await _runs(client, "ModelService", namespace, wanted, service_id):
        _, ns, name = w.id.split("/", 2)
        status = await service_status(client, ns, name)
        spec: ModelService = await query(
            client.get_workflow_handle(w.id), ServiceWorkflow.spec, what=f"ModelService {ns}/{name}"
        )
        out.append(service_resource(spec, status, status.created or w.start_time))
    return out


async def fetch_autoscalers(
    client: Client, namespace: str | None, wanted: set[str]
) -> list[Fetched]:
    out = []
    for w in await _runs(client, "ModelAutoscaler", namespace, wanted, autoscaler_id):
        _, ns, name = w.id.split("/", 2)
        status = await autoscaler_status(client, ns, name)
        spec: ModelAutoscaler = await query(
            client.get_workflow_handle(w.id),
            AutoscalerWorkflow.spec,
            what=f"ModelAutoscaler {ns}/{name}",
        )
        out.append(autoscaler_resource(spec, status, status.created or w.start_time))
    return out


async def fetch_caches(client: Client, namespace: str | None, wanted: set[str]) -> list[Fetched]:
    out = []
    for w in await _runs(client, "ModelCache", namespace, wanted, cache_id):
        _, ns, name = w.id.split("/", 2)
        handle = client.get_workflow_handle(w.id)
        status: CacheStatus = await query(
            handle, CacheWorkflow.status, what=f"ModelCache {ns}/{name}"
        )
        spec: ModelCache = await query(handle, CacheWorkflow.spec, what=f"ModelCache {ns}/{name}")
        out.append(cache_resource(spec, status, w.start_time))
    return out


async def _directory(client: Client, name: str, args: tuple[Any, ...], result_type: Any) -> Any:
    """A query to the endpoint directory; None when nothing was ever published."""
    handle = client.get_workflow_handle(ENDPOINTS_ID)
    try:
        return await query(
            handle, name, *args, result_type=result_type, what="the endpoint directory"
        )
    except NotFoundError:
        return None


async def directory_endpoints(client: Client, namespace: str | None) -> list[EndpointRecord]:
    found = await _directory(client, "list_endpoints", (namespace or "",), list[EndpointRecord])
    return list(found or [])


async def directory_gateway(client: Client) -> InferenceGateway | None:
    found = await _directory(client, "gateway", (), InferenceGateway)
    return found if isinstance(found, InferenceGateway) else None


def missing(kind: str, names: Sequence[str], found: Sequence[Fetched], where: str) -> list[str]:
    """kubectl's NotFound lines for the ``names`` that ``found`` lacks."""
    have = {f.name for f in found}
    return [
        f"{resource_name(kind, n)} not found" + (f" in {where}" if where else "")
        for n in names
        if n not in have
    ]
