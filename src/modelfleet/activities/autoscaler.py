"""ModelAutoscaler activities: read the target deployment's replicas (its workflow's ``status``
query), read each Ready replica's engine load and the configured PromQL totals (the metrics
adapter), and send the ``scale`` Update to the deployment.

Side effects: Temporal client calls and the metrics adapter's HTTP reads. Per-replica failures
are data, not errors: a replica whose load cannot be read comes back without values (HPA's
missing metric) with the reason, so one dark cluster never fails a decision. Kubeconfigs are
resolved on the worker; no credential enters a payload or a message.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

from temporalio import activity
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from modelfleet.activities.kube_ops import KubeconfigStore
from modelfleet.adapters.metrics import KubeMetricsReader, MetricsError, prometheus_query
from modelfleet.api.naming import workload_namespace
from modelfleet.contracts.activity_names import (
    AUTOSCALER_READ_METRICS,
    AUTOSCALER_SCALE,
    AUTOSCALER_TARGET,
)
from modelfleet.contracts.autoscaler_payloads import (
    ReadMetricsRequest,
    ReadMetricsResult,
    ReplicaLoad,
    ScaleTargetRequest,
    ScaleTargetResult,
    TargetReplica,
    TargetRequest,
    TargetState,
)
from modelfleet.contracts.status import DeploymentStatus, ReplicaPhase

# Replicas that are going away are not part of the target, as HPA ignores deleted or failed pods.
_GONE = (ReplicaPhase.TERMINATING, ReplicaPhase.TERMINATED, ReplicaPhase.FAILED)
MAX_CONCURRENT_SCRAPES = 16


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
