"""ModelAutoscaler activities: read the target deployment's replicas (its workflow's ``status``
query), read each Ready replica's engine load and the configured PromQL totals (the metrics
adapter), read the requests waiting at the fleet's gateway for the ModelServices that would route
to the deployment (scale from zero), and send the ``scale`` Update to the deployment. Also the
engines' answers so far (``engine.errors``), read the same way for a deployment that judges a
replacement's error rate.

Side effects: Temporal client calls and the metrics adapter's HTTP reads. Per-replica failures
are data, not errors: a replica whose load cannot be read comes back without values (HPA's
missing metric) with the reason, so one dark cluster never fails a decision. Kubeconfigs are
resolved on the worker; no credential enters a payload or a message.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Mapping

from temporalio import activity
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from modelfleet.activities.kube_ops import KubeconfigStore
from modelfleet.adapters.metrics import (
    KubeMetricsReader,
    MetricsError,
    labelled_sum,
    prometheus_query,
)
from modelfleet.api.deployments import ModelDeployment
from modelfleet.api.naming import (
    LABEL_CLUSTER,
    LABEL_DEPLOYMENT,
    LABEL_NAMESPACE,
    LABEL_REPLICA_INDEX,
    workload_namespace,
)
from modelfleet.api.services import InferenceGateway, ModelService
from modelfleet.contracts.activity_names import (
    AUTOSCALER_GATEWAY_WAITING,
    AUTOSCALER_READ_METRICS,
    AUTOSCALER_SCALE,
    AUTOSCALER_TARGET,
    ENGINE_ERRORS,
    ENGINE_FIGURES,
)
from modelfleet.contracts.autoscaler_payloads import (
    EngineErrors,
    EngineErrorsRequest,
    GatewayWaitingRequest,
    GatewayWaitingResult,
    ReadMetricsRequest,
    ReadMetricsResult,
    ReplicaLoad,
    ScaleTargetRequest,
    ScaleTargetResult,
    TargetReplica,
    TargetRequest,
    TargetState,
)
from modelfleet.contracts.canary_payloads import (
    EngineCounts,
    FiguresReading,
    FiguresRequest,
    window_figures,
)
from modelfleet.contracts.serving_payloads import ENDPOINTS_ID, LABEL_REGION
from modelfleet.contracts.status import DeploymentStatus, ReplicaPhase

# Replicas that are going away are not part of the target, as HPA ignores deleted or failed pods.
_GONE = (ReplicaPhase.TERMINATING, ReplicaPhase.TERMINATED, ReplicaPhase.FAILED)
MAX_CONCURRENT_SCRAPES = 16
# The gauge the gateway exports per route and ModelService while it holds requests that have no
# Ready backend (an activator's count), and the port name of the gateway's metrics Service: the
# Service named like the Gateway, in its namespace, read through the API server's proxy.
GATEWAY_WAITING_METRIC = "gateway_requests_waiting_for_backend"
GATEWAY_METRICS_PORT = "metrics"
# Endpoint labels that depend on where a replica lands: a selector on them may match the first
# replica, whichever cluster it gets, so they do not rule a service out.
_PLACEMENT_LABELS = frozenset({LABEL_CLUSTER, LABEL_REGION, LABEL_REPLICA_INDEX})
# Services of one namespace asked per read (a bound on the activity's work).
MAX_SERVICES = 200


def endpoint_labels(deployment: ModelDeployment) -> dict[str, str]:
    """The labels every endpoint a replica of ``deployment`` publishes will carry, whatever
    cluster it lands on (template labels, then the managed ones, as replicas are stamped)."""
    labels = dict(deployment.spec.template.metadata.labels)
    labels[LABEL_DEPLOYMENT] = deployment.name
    labels[LABEL_NAMESPACE] = deployment.namespace
    return labels


def would_route(service: ModelService, labels: Mapping[str, str]) -> bool:
    """Whether one of the service's selectors would take an endpoint with ``labels`` (labels
    that depend on placement may take any value)."""
    return any(
        all(
            k in _PLACEMENT_LABELS or labels.get(k) == v for k, v in e.selector.match_labels.items()
        )
        for e in service.spec.endpoints
    )


def _failure_reason(exc: WorkflowUpdateFailedError) -> str:
    """The validator's own message, not the SDK's wrapping of it."""
    cause = exc.cause
    if cause is None:
        return str(exc)
    return str(cause.__cause__ or cause)


class AutoscalerActivities:
    def __init__(self, client: Client, kubeconfigs: KubeconfigStore) -> None:
        self._client = client
        self._kubeconfigs = kubeconfigs
        self._slots = asyncio.Semaphore(MAX_CONCURRENT_SCRAPES)

    @activity.defn(name=AUTOSCALER_TARGET)
    async def target(self, request: TargetRequest) -> TargetState:
        handle = self._client.get_workflow_handle(request.workflow_id)
        try:
            status: DeploymentStatus = await handle.query("status", result_type=DeploymentStatus)
        except RPCError as exc:
            if exc.status is RPCStatusCode.NOT_FOUND:
                return TargetState(found=False, summary="no such ModelDeployment")
            raise
        if status.deleting:
            return TargetState(found=False, summary="the ModelDeployment is being deleted")
        return TargetState(
            found=True,
            desired=status.desired,
            scheduled=status.scheduled,
            replicas=[
                TargetReplica(name=r.name, cluster=r.cluster, ready=r.phase is ReplicaPhase.READY)
                for r in status.replicas
                if r.phase not in _GONE
            ],
            summary=status.summary,
        )

    @activity.defn(name=AUTOSCALER_READ_METRICS)
    async def read_metrics(self, request: ReadMetricsRequest) -> ReadMetricsResult:
        by_cluster: dict[str, list[TargetReplica]] = defaultdict(list)
        for replica in request.replicas:
            if replica.ready:
                by_cluster[replica.cluster].append(replica)
        loads: dict[str, ReplicaLoad] = {
            r.name: ReplicaLoad(name=r.name, ready=False) for r in request.replicas if not r.ready
        }
        namespace = workload_namespace(request.namespace)
        clusters = [
            self._cluster_loads(cluster, namespace, replicas, request.metrics)
            for cluster, replicas in sorted(by_cluster.items())
        ]
        for found in await asyncio.gather(*clusters):
            loads.update({load.name: load for load in found})
        totals: dict[str, float | None] = {}
        for query in request.queries:
            try:
                totals[query.label] = await prometheus_query(query.url, query.query)
            except MetricsError as exc:
                activity.logger.warning("PromQL %s failed: %s", query.label, exc)
                totals[query.label] = None
        return ReadMetricsResult(
            replicas=[loads[r.name] for r in request.replicas if r.name in loads], totals=totals
        )

    async def _cluster_loads(
        self, cluster: str, namespace: str, replicas: list[TargetReplica], names: list[str]
    ) -> list[ReplicaLoad]:
        def missing(reason: str) -> list[ReplicaLoad]:
            return [ReplicaLoad(name=r.name, ready=True, error=reason) for r in replicas]

        try:
            path = self._kubeconfigs.path(cluster)
            reader = KubeMetricsReader(path)
        except (ApplicationError, MetricsError) as exc:
            return missing(str(exc))
        async with reader:

            async def one(replica: TargetReplica) -> ReplicaLoad:
                async with self._slots:
                    try:
                        values = await reader.replica_load(namespace, replica.name, names)
                    except MetricsError as exc:
                        return ReplicaLoad(name=replica.name, ready=True, error=str(exc))
                return ReplicaLoad(name=replica.name, ready=True, values=values)

            return list(await asyncio.gather(*(one(r) for r in replicas)))

    @activity.defn(name=ENGINE_ERRORS)
    async def engine_errors(self, request: EngineErrorsRequest) -> EngineErrors:
        """What the replica's engines answered so far; unreadable metrics are data (``error``),
        never a failure: the caller goes on without the figure."""
        try:
            reader = KubeMetricsReader(self._kubeconfigs.path(request.cluster))
        except (ApplicationError, MetricsError) as exc:
            return EngineErrors(error=str(exc))
        async with reader:
            try:
                total, failed = await reader.replica_responses(
                    workload_namespace(request.namespace), request.replica
                )
            except MetricsError as exc:
                return EngineErrors(error=str(exc))
        return EngineErrors(requests=total, errors=failed)

    @activity.defn(name=ENGINE_FIGURES)
    async def engine_figures(self, request: FiguresRequest) -> FiguresReading:
        """A canary step's reading: every replica's engine counts now (one that cannot be read
        is data, ``errors``), and with a baseline the window's figures, computed here
        (``contracts.canary_payloads.window_figures``) so the workflow keeps only numbers."""
        namespace = workload_namespace(request.namespace)
        by_cluster: dict[str, list[str]] = defaultdict(list)
        for name, cluster in sorted(request.replicas.items()):
            by_cluster[cluster].append(name)
        counts: dict[str, EngineCounts] = {}
        errors: dict[str, str] = {}
        for cluster, names in sorted(by_cluster.items()):
            try:
                reader = KubeMetricsReader(self._kubeconfigs.path(cluster))
            except (ApplicationError, MetricsError) as exc:
                errors.update({n: str(exc) for n in names})
                continue
            async with reader:
                for name in names:
                    try:
                        read = await reader.replica_counts(namespace, name)
                    except MetricsError as exc:
                        errors[name] = str(exc)
                        continue
                    counts[name] = EngineCounts(
                        ttft_buckets=read.ttft,
                        itl_buckets=read.itl,
                        requests=read.requests,
                        errors=read.errors,
                    )
        figures = None
        if request.baseline is not None:
            figures = window_figures(request.baseline, counts, request.canary, request.stable)
        return FiguresReading(counts=counts, errors=errors, figures=figures)

    @activity.defn(name=AUTOSCALER_SCALE)
    async def scale(self, request: ScaleTargetRequest) -> ScaleTargetResult:
        handle = self._client.get_workflow_handle(request.workflow_id)
        try:
            status: DeploymentStatus = await handle.execute_update(
                "scale",
                {"replicas": request.replicas},
                id=request.request_id,
                result_type=DeploymentStatus,
            )
        except WorkflowUpdateFailedError as exc:
            return ScaleTargetResult(accepted=False, reason=_failure_reason(exc))
        except RPCError as exc:
            if exc.status is RPCStatusCode.NOT_FOUND:
                return ScaleTargetResult(accepted=False, reason="the ModelDeployment is gone")
            raise
        return ScaleTargetResult(accepted=True, desired=status.desired)

    @activity.defn(name=AUTOSCALER_GATEWAY_WAITING)
    async def gateway_waiting(self, request: GatewayWaitingRequest) -> GatewayWaitingResult:
        """Requests held at the gateway for the services that would route to the deployment.
        Anything that cannot be told comes back as ``waiting=None`` with the reason (the
        decision then has no scale-from-zero trigger this time), never as a failure."""
        try:
            deployment: ModelDeployment = await self._client.get_workflow_handle(
                request.deployment_workflow_id
            ).query("spec", result_type=ModelDeployment)
        except RPCError as exc:
            return GatewayWaitingResult(note=f"cannot read the ModelDeployment: {exc.message}")
        labels = endpoint_labels(deployment)
        services: list[str] = []
        async for run in self._client.list_workflows(request.services_query, limit=MAX_SERVICES):
            try:
                spec: ModelService = await self._client.get_workflow_handle(run.id).query(
                    "spec", result_type=ModelService
                )
            except RPCError:
                continue  # ended since it was listed
            if spec.namespace == request.namespace and would_route(spec, labels):
                services.append(spec.name)
        services.sort()
        if not services:
            return GatewayWaitingResult(note="no ModelService routes to this deployment")
        try:
            gateway: InferenceGateway | None = await self._client.get_workflow_handle(
                ENDPOINTS_ID
            ).query("gateway", result_type=InferenceGateway | None)  # type: ignore[arg-type]
        except RPCError as exc:
            return GatewayWaitingResult(
                services=services, note=f"cannot read the InferenceGateway: {exc.message}"
            )
        if gateway is None:
            return GatewayWaitingResult(services=services, note="no InferenceGateway is applied")
        where = f"gateway {gateway.spec.gateway_namespace}/{gateway.spec.gateway_name}"
        # Requests wait at every front door: summed over the doors that answer (a dark door's
        # callers have moved to the others).
        total = 0.0
        answered: list[str] = []
        problems: list[str] = []
        for cluster in gateway.front_door_clusters:
            try:
                async with KubeMetricsReader(self._kubeconfigs.path(cluster)) as reader:
                    text = await reader.scrape_service(
                        gateway.spec.gateway_namespace,
                        gateway.spec.gateway_name,
                        GATEWAY_METRICS_PORT,
                    )
                waiting = labelled_sum(
                    text,
                    GATEWAY_WAITING_METRIC,
                    {
                        "namespace": {workload_namespace(request.namespace)},
                        "service": set(services),
                    },
                )
            except (ApplicationError, MetricsError) as exc:
                problems.append(f"{where} on {cluster}: {exc}")
                continue
            # No series yet: the gateway has never held a request for these services.
            total += waiting or 0.0
            answered.append(cluster)
        if not answered:
            return GatewayWaitingResult(services=services, note="; ".join(problems))
        note = f"{where} on {', '.join(answered)}" + (
            f" ({'; '.join(problems)})" if problems else ""
        )
        return GatewayWaitingResult(waiting=total, services=services, note=note)
