"""Cloud activities: create and delete GKE clusters / node pools, EKS clusters / node groups and
AKS managed clusters / agent pools,
wait on their long-running operations with heartbeats, and write kubeconfigs on the worker.

Thin by design: each calls an adapter and translates its error taxonomy into Temporal's
(``Cloud<Reason>`` error types; retryable only for throttling, unavailability, an operation
still running and a resource in use). A create heartbeats the operation it started, so a retry
after a worker crash resumes waiting on that operation instead of creating twice; a create that
finds its own resource (owner label) adopts it. Tokens and kubeconfigs stay on the worker: the
kubeconfig activities return nothing.

These are synchronous activities; the worker runs them on a thread pool.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable
from typing import Any, TypeVar

from temporalio import activity

from modelfleet.activities.errors import to_temporal
from modelfleet.activities.keepalive import BEAT_SECONDS, KeepAlive
from modelfleet.adapters.aks import AKS, provisioning_state, settled
from modelfleet.adapters.cloud_config import CloudSettings
from modelfleet.adapters.cloud_errors import CloudError
from modelfleet.adapters.eks import EKS, nodegroup_failure
from modelfleet.adapters.gke import GKE
from modelfleet.contracts.cloud_payloads import (
    AKS_CREATE_AGENT_POOL,
    AKS_CREATE_CLUSTER,
    AKS_DELETE_AGENT_POOL,
    AKS_DELETE_CLUSTER,
    AKS_KUBECONFIG,
    AKS_LIST_AGENT_POOLS,
    AKS_UPDATE_AGENT_POOL,
    EKS_CREATE_CLUSTER,
    EKS_CREATE_NODEGROUP,
    EKS_DELETE_CLUSTER,
    EKS_DELETE_NODEGROUP,
    EKS_KUBECONFIG,
    EKS_LIST_NODEGROUPS,
    EKS_UPDATE_NODEGROUP,
    GKE_CREATE_CLUSTER,
    GKE_CREATE_NODE_POOL,
    GKE_DELETE_CLUSTER,
    GKE_DELETE_NODE_POOL,
    GKE_KUBECONFIG,
    GKE_LIST_NODE_POOLS,
    GKE_UPDATE_NODE_POOL,
    CloudCluster,
    CloudErrorReason,
    CreateResult,
    DeleteOutcome,
    PoolPlan,
    PoolRef,
    PoolRequest,
    PoolShape,
)

T = TypeVar("T")


# How often a running step heartbeats from its helper thread: well under the heartbeat timeout.
CLOUD_BEAT_SECONDS = BEAT_SECONDS
# The running activity's keep-alive: its heartbeats go through it, so the helper thread repeats
# the latest progress (the operation a retry resumes), never an older one.
_alive: contextvars.ContextVar[KeepAlive | None] = contextvars.ContextVar(
    "modelfleet_cloud_keepalive", default=None
)


def _guarded(fn: Callable[[], T]) -> T:
    """Run a cloud step: heartbeating every few seconds from a helper thread while it runs (a
    single slow SDK call cannot outlast the short heartbeat timeout, so a dead worker's step is
    retried within it), its cloud errors translated for Temporal."""
    resumed = activity.info().heartbeat_details
    # A first attempt starts quiet: its first beat is the operation it starts, sent at once.
    with KeepAlive(*resumed, every=CLOUD_BEAT_SECONDS, quiet_start=not resumed) as alive:
        token = _alive.set(alive)
        try:
            return fn()
        except CloudError as exc:
            raise to_temporal(exc) from None
        finally:
            _alive.reset(token)


def _heartbeat(*details: Any) -> None:
    """Record the step's progress (what a retry after a worker crash resumes from)."""
    alive = _alive.get()
    if alive is not None:
        alive.beat(*details)
    else:
        activity.heartbeat(*details)


def _resumed_operation() -> str | None:
    details = activity.info().heartbeat_details
    if len(details) == 1 and isinstance(details[0], str) and details[0]:
        return details[0]
    return None


class CloudActivities:
    def __init__(self, settings: CloudSettings) -> None:
        self.settings = settings
        self.gke = GKE(settings)
        self.eks = EKS(settings)
        self.aks = AKS(settings)

    def close(self) -> None:
        self.gke.close()
        self.aks.close()

    def _until(self, what: str, check: Callable[[], bool]) -> None:
        """Poll ``check`` until it says done, heartbeating between polls."""
        while not check():
            _heartbeat(what)
            time.sleep(self.settings.poll_seconds)

    # -- GKE ------------------------------------------------------------------------------

    def _gke_wait(self, c: CloudCluster, operation: str) -> None:
        def done() -> bool:
            state = self.gke.operation(c, operation)
            if state.error is not None:
                raise state.error
            return state.done

        while not done():
            _heartbeat(operation)
            time.sleep(self.settings.poll_seconds)

    def _gke_running(self, c: CloudCluster, get: Callable[[], str | None], what: str) -> None:
        def done() -> bool:
            status = get()
            if status in (None, "ERROR"):
                raise CloudError(CloudErrorReason.OPERATION_FAILED, f"{what} is {status or 'gone'}")
            return status == "RUNNING"

        self._until("", done)

    @activity.defn(name=GKE_CREATE_CLUSTER)
    def gke_create_cluster(self, c: CloudCluster) -> CreateResult:
        """Create the cluster with its system pool and wait until it runs."""

        def run() -> CreateResult:
            operation = _resumed_operation() or self.gke.create_cluster(c)
            if operation is not None:
                _heartbeat(operation)
                self._gke_wait(c, operation)
            else:
                self._gke_running(
                    c, lambda: (self.gke.get_cluster(c) or {}).get("status"), f"cluster {c.name}"
                )
            return CreateResult(name=c.name, created=operation is not None, status="RUNNING")

        return _guarded(run)

    @activity.defn(name=GKE_CREATE_NODE_POOL)
    def gke_create_node_pool(self, request: PoolRequest) -> CreateResult:
        c, plan = request.cluster, request.pool

        def run() -> CreateResult:
            operation = _resumed_operation() or self.gke.create_node_pool(c, plan)
            if operation is not None:
                _heartbeat(operation)
                self._gke_wait(c, operation)
            else:
                self._gke_running(
                    c, lambda: self.gke.get_node_pool(c, plan.name), f"node pool {plan.name}"
                )
            return CreateResult(
                name=plan.name,
                created=operation is not None,
                status="RUNNING",
                nodes=plan.node_count,
            )

        return _guarded(run)

    @activity.defn(name=GKE_DELETE_NODE_POOL)
    def gke_delete_node_pool(self, ref: PoolRef) -> DeleteOutcome:
        def run() -> DeleteOutcome:
            operation = _resumed_operation() or self.gke.delete_node_pool(ref.cluster, ref.pool)
            if operation is not None:
                _heartbeat(operation)
                self._gke_wait(ref.cluster, operation)
            return DeleteOutcome(name=ref.pool, existed=operation is not None)

        return _guarded(run)

    @activity.defn(name=GKE_DELETE_CLUSTER)
    def gke_delete_cluster(self, c: CloudCluster) -> DeleteOutcome:
        def run() -> DeleteOutcome:
            operation = _resumed_operation() or self.gke.delete_cluster(c)
            if operation is not None:
                _heartbeat(operation)
                self._gke_wait(c, operation)
            self.gke.forget_kubeconfig(c)  # its token must not outlive the cluster on disk
            return DeleteOutcome(name=c.name, existed=operation is not None)

        return _guarded(run)

    @activity.defn(name=GKE_LIST_NODE_POOLS)
    def gke_list_node_pools(self, c: CloudCluster) -> list[PoolShape]:
        return _guarded(lambda: self.gke.shapes(c))

    @activity.defn(name=GKE_UPDATE_NODE_POOL)
    def gke_update_node_pool(self, request: PoolRequest) -> CreateResult:
        """Autoscaling bounds, then (a fixed pool) the size, one operation after the other: GKE
        runs one operation per cluster at a time. Both are idempotent, so a retry redoes them."""
        c, plan = request.cluster, request.pool

        def run() -> CreateResult:
            self._gke_wait(c, self.gke.set_autoscaling(c, plan))
            if plan.max_node_count is None:
                self._gke_wait(c, self.gke.set_size(c, plan))
            return CreateResult(name=plan.name, created=False, status="RUNNING")

        return _guarded(run)

    @activity.defn(name=GKE_KUBECONFIG)
    def gke_write_kubeconfig(self, c: CloudCluster) -> None:
        """Mint a token and write the cluster's kubeconfig into the credentials directory
        (atomically: a worker killed midway leaves the previous file or none, never half)."""
        _guarded(lambda: self.gke.write_kubeconfig(c))

    # -- EKS ------------------------------------------------------------------------------

    def _eks_cluster_active(self, c: CloudCluster) -> bool:
        found = self.eks.describe_cluster(c)
        status = (found or {}).get("status")
        if found is None or status == "FAILED":
            raise CloudError(
                CloudErrorReason.OPERATION_FAILED, f"EKS cluster {c.name} is {status or 'gone'}"
            )
        return status == "ACTIVE"

    def _eks_group_active(self, c: CloudCluster, name: str) -> bool:
        found = self.eks.describe_nodegroup(c, name)
        if found is None:
            raise CloudError(CloudErrorReason.OPERATION_FAILED, f"node group {name} is gone")
        if found.get("status") == "CREATE_FAILED":
            raise nodegroup_failure(found)
        return found.get("status") == "ACTIVE"

    def _eks_nodegroup(self, c: CloudCluster, plan: PoolPlan) -> bool:
        created = self.eks.create_nodegroup(c, plan)
        self._until(plan.name, lambda: self._eks_group_active(c, plan.name))
        return created

    @activity.defn(name=EKS_CREATE_CLUSTER)
    def eks_create_cluster(self, c: CloudCluster) -> CreateResult:
        """Create the cluster, wait until ACTIVE, then its system node group."""

        def run() -> CreateResult:
            created = self.eks.create_cluster(c)
            self._until(c.name, lambda: self._eks_cluster_active(c))
            self._eks_nodegroup(c, self.eks.system_plan())
            return CreateResult(name=c.name, created=created, status="ACTIVE")

        return _guarded(run)

    @activity.defn(name=EKS_CREATE_NODEGROUP)
    def eks_create_nodegroup(self, request: PoolRequest) -> CreateResult:
        def run() -> CreateResult:
            created = self._eks_nodegroup(request.cluster, request.pool)
            return CreateResult(
                name=request.pool.name,
                created=created,
                status="ACTIVE",
                nodes=request.pool.node_count,
            )

        return _guarded(run)

    def _eks_delete_group(self, c: CloudCluster, name: str) -> bool:
        existed = self.eks.delete_nodegroup(c, name)
        self._until(name, lambda: self.eks.describe_nodegroup(c, name) is None)
        self.eks.delete_template(c, name)
        return existed

    @activity.defn(name=EKS_DELETE_NODEGROUP)
    def eks_delete_nodegroup(self, ref: PoolRef) -> DeleteOutcome:
        return _guarded(
            lambda: DeleteOutcome(
                name=ref.pool, existed=self._eks_delete_group(ref.cluster, ref.pool)
            )
        )

    @activity.defn(name=EKS_DELETE_CLUSTER)
    def eks_delete_cluster(self, c: CloudCluster) -> DeleteOutcome:
        """Delete every node group left (EKS refuses otherwise), then the cluster."""

        def run() -> DeleteOutcome:
            for name in self.eks.nodegroups(c):
                self._eks_delete_group(c, name)
            existed = self.eks.delete_cluster(c)
            self._until(c.name, lambda: self.eks.describe_cluster(c) is None)
            for template in self.eks.launch_templates(c):
                self.eks.delete_template(c, template.removeprefix(f"modelfleet-{c.name}-"))
            self.eks.forget_kubeconfig(c)  # its token must not outlive the cluster on disk
            return DeleteOutcome(name=c.name, existed=existed)

        return _guarded(run)

    @activity.defn(name=EKS_LIST_NODEGROUPS)
    def eks_list_nodegroups(self, c: CloudCluster) -> list[PoolShape]:
        return _guarded(lambda: self.eks.shapes(c))

    @activity.defn(name=EKS_UPDATE_NODEGROUP)
    def eks_update_nodegroup(self, request: PoolRequest) -> CreateResult:
        c, plan = request.cluster, request.pool

        def run() -> CreateResult:
            self.eks.update_scaling(c, plan)
            self._until(plan.name, lambda: self._eks_group_active(c, plan.name))
            return CreateResult(name=plan.name, created=False, status="ACTIVE")

        return _guarded(run)

    @activity.defn(name=EKS_KUBECONFIG)
    def eks_write_kubeconfig(self, c: CloudCluster) -> None:
        _guarded(lambda: self.eks.write_kubeconfig(c))

    # -- AKS ------------------------------------------------------------------------------
    # ARM's PUT and DELETE are idempotent and the resources carry their provisioningState, so a
    # step retried after a worker crash reads the resource first and waits on its state (or
    # starts the operation when there is none): it never creates twice. The heartbeat is the
    # resource's name; the SDK poller's continuation token is never recorded (it would carry
    # the request's bearer token into the history).

    def _aks_settled(self, what: str, get: Callable[[], dict[str, Any] | None]) -> None:
        """Wait until the resource's provisioningState settles; Failed or gone is a failure."""

        def done() -> bool:
            state = provisioning_state(get())
            if state is None or state in ("Failed", "Canceled"):
                raise CloudError(CloudErrorReason.OPERATION_FAILED, f"{what} is {state or 'gone'}")
            return settled(state)

        self._until(what, done)

    def _aks_pool(self, c: CloudCluster, plan: PoolPlan, update: bool) -> bool:
        """Create (or update) the agent pool and wait for it; False when it existed already."""
        found = self.aks.get_agent_pool(c, plan.name)
        if found is not None and not update:
            self._aks_settled(
                f"agent pool {plan.name}", lambda: self.aks.get_agent_pool(c, plan.name)
            )
            return False
        _heartbeat(plan.name)
        poller = self.aks.update_agent_pool(c, plan) if update else self.aks.put_agent_pool(c, plan)
        self.aks.wait(c, poller, lambda: _heartbeat(plan.name))
        return True

    @activity.defn(name=AKS_CREATE_CLUSTER)
    def aks_create_cluster(self, c: CloudCluster) -> CreateResult:
        """Create the managed cluster with its system pool and wait until it has Succeeded."""

        def run() -> CreateResult:
            poller = self.aks.create_cluster(c)
            _heartbeat(c.name)
            if poller is not None:
                self.aks.wait(c, poller, lambda: _heartbeat(c.name))
            else:
                self._aks_settled(f"AKS cluster {c.name}", lambda: self.aks.get_cluster(c))
            return CreateResult(name=c.name, created=poller is not None, status="Succeeded")

        return _guarded(run)

    @activity.defn(name=AKS_CREATE_AGENT_POOL)
    def aks_create_agent_pool(self, request: PoolRequest) -> CreateResult:
        def run() -> CreateResult:
            created = self._aks_pool(request.cluster, request.pool, update=False)
            return CreateResult(
                name=request.pool.name,
                created=created,
                status="Succeeded",
                nodes=request.pool.node_count,
            )

        return _guarded(run)

    @activity.defn(name=AKS_UPDATE_AGENT_POOL)
    def aks_update_agent_pool(self, request: PoolRequest) -> CreateResult:
        def run() -> CreateResult:
            self._aks_pool(request.cluster, request.pool, update=True)
            return CreateResult(name=request.pool.name, created=False, status="Succeeded")

        return _guarded(run)

    @activity.defn(name=AKS_DELETE_AGENT_POOL)
    def aks_delete_agent_pool(self, ref: PoolRef) -> DeleteOutcome:
        def run() -> DeleteOutcome:
            poller = self.aks.delete_agent_pool(ref.cluster, ref.pool)
            if poller is not None:
                _heartbeat(ref.pool)
                self.aks.wait(ref.cluster, poller, lambda: _heartbeat(ref.pool))
            return DeleteOutcome(name=ref.pool, existed=poller is not None)

        return _guarded(run)

    @activity.defn(name=AKS_DELETE_CLUSTER)
    def aks_delete_cluster(self, c: CloudCluster) -> DeleteOutcome:
        """Delete the managed cluster (its agent pools go with it)."""

        def run() -> DeleteOutcome:
            poller = self.aks.delete_cluster(c)
            if poller is not None:
                _heartbeat(c.name)
                self.aks.wait(c, poller, lambda: _heartbeat(c.name))
            self.aks.forget_kubeconfig(c)  # its credential must not outlive the cluster on disk
            return DeleteOutcome(name=c.name, existed=poller is not None)

        return _guarded(run)

    @activity.defn(name=AKS_LIST_AGENT_POOLS)
    def aks_list_agent_pools(self, c: CloudCluster) -> list[PoolShape]:
        return _guarded(lambda: self.aks.shapes(c))

    @activity.defn(name=AKS_KUBECONFIG)
    def aks_write_kubeconfig(self, c: CloudCluster) -> None:
        """Write the kubeconfig ``listClusterUserCredential`` returns into the credentials
        directory (atomically)."""
        _guarded(lambda: self.aks.write_kubeconfig(c))

    def all(self) -> list[Callable[..., object]]:
        return [
            self.gke_create_cluster,
            self.gke_create_node_pool,
            self.gke_delete_node_pool,
            self.gke_delete_cluster,
            self.gke_write_kubeconfig,
            self.gke_list_node_pools,
            self.gke_update_node_pool,
            self.eks_create_cluster,
            self.eks_create_nodegroup,
            self.eks_delete_nodegroup,
            self.eks_delete_cluster,
            self.eks_write_kubeconfig,
            self.eks_list_nodegroups,
            self.eks_update_nodegroup,
            self.aks_create_cluster,
            self.aks_create_agent_pool,
            self.aks_update_agent_pool,
            self.aks_delete_agent_pool,
            self.aks_delete_cluster,
            self.aks_list_agent_pools,
            self.aks_write_kubeconfig,
        ]
