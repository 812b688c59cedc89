"""The InferenceCluster provisioning saga on the time-skipping server, with recording activity
doubles standing in for the cloud: step order, the pools planned from the classes, reverse
compensation on a permanent error, a transient error retried, and deprovisioning on delete.
(Integration tests run the same workflow against the simulated clouds.)"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.loading import load_paths
from modelfleet.cluster.state import ClusterInput
from modelfleet.cluster.workflow import ClusterWorkflow
from modelfleet.contracts.activity_names import (
    FLEET_PUBLISH_CLUSTER,
    FLEET_REPLICAS_BY_POOL,
    FLEET_REPLICAS_ON,
    KUBE_PROBE,
)
from modelfleet.contracts.cloud_payloads import (
    EKS_CREATE_CLUSTER,
    EKS_CREATE_NODEGROUP,
    EKS_DELETE_CLUSTER,
    EKS_DELETE_NODEGROUP,
    EKS_KUBECONFIG,
    FLEET_CLASSES,
    GKE_CREATE_CLUSTER,
    GKE_CREATE_NODE_POOL,
    GKE_DELETE_CLUSTER,
    GKE_DELETE_NODE_POOL,
    GKE_KUBECONFIG,
    GKE_LIST_NODE_POOLS,
    GKE_UPDATE_NODE_POOL,
    CloudCluster,
    CreateResult,
    DeleteOutcome,
    PoolRef,
    PoolRequest,
    PoolShape,
)
from modelfleet.contracts.fleet_payloads import ClusterReport, PublishRequest
from modelfleet.contracts.kube_payloads import PoolObservation, ProbeRequest, ProbeResult
from modelfleet.contracts.stack_payloads import (
    KUBE_CHECK_ACCESS,
    KUBE_VERIFY_STACK,
    AccessReport,
    AccessRequest,
    StackReport,
    StackRequest,
)
from modelfleet.contracts.status import ClusterStatus

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "provisioning"
_LOADED = load_paths([str(EXAMPLES), str(EXAMPLES.parent / "fallbacks")]).resources
CLASSES = {r.name: r for r in _LOADED if isinstance(r, InferenceClass)}
CLUSTERS = {r.name: r for r in _LOADED if isinstance(r, InferenceCluster)}


def _two_pools(name: str) -> InferenceCluster:
    """The example with a second pool, so that "the second pool fails" can be said."""
    spec = CLUSTERS[name]
    first = spec.spec.node_pools[0]
    second = first.model_copy(update={"name": first.name + "-b"})
    return spec.model_copy(
        update={"spec": spec.spec.model_copy(update={"node_pools": [first, second]})}
    )


# Far above the seconds a provisioning takes on the time-skipping server; only a hang reaches it.
SETTLE_SECONDS = 60


@dataclass
class FakeCloud:
    """Records the cloud calls; fails where told to."""

    fail_pool: str | None = None
    fail_type: str = "CloudQuotaExceeded"
    transient_failures: int = 0
    # How many times the permanent error is raised (-1: every time).
    permanent_failures: int = -1
    # What the cluster's credentials may not do (SelfSubjectAccessReview answers).
    denied: list[str] = field(default_factory=list)
    # Per pool, the replicas the Fleet has on it.
    on_pools: dict[str, list[str]] = field(default_factory=dict)
    # The pools the cloud holds (name -> last plan applied).
    held: dict[str, PoolRequest] = field(default_factory=dict)
    # Per zone, the error type a pool created there fails with (a stockout, a quota...).
    zone_errors: dict[str, str] = field(default_factory=dict)
    # Per machine type, likewise.
    machine_errors: dict[str, str] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    pools: list[PoolRequest] = field(default_factory=list)
    reports: list[ClusterReport] = field(default_factory=list)
    specs: list[InferenceCluster] = field(default_factory=list)
    settled: asyncio.Event = field(default_factory=asyncio.Event)

    @activity.defn(name=FLEET_CLASSES)
    async def classes(self, names: list[str]) -> list[InferenceClass]:
        return [CLASSES[n] for n in names if n in CLASSES]

    async def _create_cluster(self, c: CloudCluster) -> CreateResult:
        self.calls.append(f"create cluster {c.name}")
        return CreateResult(name=c.name, created=True, status="RUNNING")

    async def _create_pool(self, request: PoolRequest) -> CreateResult:
        self.calls.append(f"create pool {request.pool.name}")
        for zone in request.pool.zones:
            if zone in self.zone_errors:
                self.calls[-1] += f" in {zone}: {self.zone_errors[zone]}"
                raise ApplicationError(
                    f"no capacity in {zone}", type=self.zone_errors[zone], non_retryable=True
                )
        machine = request.pool.machine_type or ""
        if machine in self.machine_errors:
            self.calls[-1] += f" as {machine}: {self.machine_errors[machine]}"
            raise ApplicationError(
                f"no {machine} left", type=self.machine_errors[machine], non_retryable=True
            )
        if request.pool.name == self.fail_pool:
            if self.transient_failures > 0:
                self.transient_failures -= 1
                raise ApplicationError("503", type="CloudUnavailable")
            if (
                self.transient_failures == 0
                and self.fail_type != "CloudUnavailable"
                and self.permanent_failures != 0
            ):
                self.permanent_failures -= 1
                raise ApplicationError(
                    "Insufficient regional quota", type=self.fail_type, non_retryable=True
                )
        self.pools.append(request)
        self.held[request.pool.name] = request
        return CreateResult(name=request.pool.name, created=True, status="RUNNING")

    async def _delete_pool(self, ref: PoolRef) -> DeleteOutcome:
        self.calls.append(f"delete pool {ref.pool}")
        self.held.pop(ref.pool, None)
        return DeleteOutcome(name=ref.pool, existed=True)

    async def _delete_cluster(self, c: CloudCluster) -> DeleteOutcome:
        self.calls.append(f"delete cluster {c.name}")
        return DeleteOutcome(name=c.name, existed=True)

    async def _kubeconfig(self, c: CloudCluster) -> None:
        self.calls.append("kubeconfig")

    async def settle(self) -> None:
        """Until the cluster has reported Ready or a failed provisioning, bounded: a stranded run
        fails here in a minute, with what the cloud saw, not at the hang guard."""
        try:
            await asyncio.wait_for(self.settled.wait(), SETTLE_SECONDS)
        except TimeoutError:
            raise AssertionError(f"never settled; cloud calls: {self.calls}") from None

    @activity.defn(name=KUBE_PROBE)
    async def probe(self, request: ProbeRequest) -> ProbeResult:
        observed = {p.pool.name: PoolObservation(nodes=1, ready_nodes=1) for p in self.pools}
        return ProbeResult(reachable=True, gateway_address="10.0.0.1", pools=observed)

    @activity.defn(name=FLEET_PUBLISH_CLUSTER)
    async def publish(self, request: PublishRequest) -> None:
        if request.spec is not None:
            self.specs.append(request.spec)
        if request.report is not None:
            self.reports.append(request.report)
            if request.report.ready or request.report.reason.startswith("ProvisioningFailed"):
                self.settled.set()

    @activity.defn(name=KUBE_VERIFY_STACK)
    async def verify_stack(self, request: StackRequest) -> StackReport:
        return StackReport(missing=[])

    @activity.defn(name=FLEET_REPLICAS_ON)
    async def replicas_on(self, cluster: str) -> list[str]:
        return []

    @activity.defn(name=FLEET_REPLICAS_BY_POOL)
    async def replicas_by_pool(self, cluster: str) -> dict[str, list[str]]:
        return self.on_pools

    @activity.defn(name=GKE_LIST_NODE_POOLS)
    async def list_pools(self, c: CloudCluster) -> list[PoolShape]:
        out = []
        for request in self.held.values():
            plan = request.pool
            autoscaled = plan.max_node_count is not None
            out.append(
                PoolShape(
                    name=plan.name,
                    node_count=plan.node_count,
                    min_node_count=(plan.min_node_count or 0) if autoscaled else None,
                    max_node_count=plan.max_node_count,
                )
            )
        return out

    @activity.defn(name=GKE_UPDATE_NODE_POOL)
    async def update_pool(self, request: PoolRequest) -> CreateResult:
        plan = request.pool
        self.calls.append(f"resize pool {plan.name} {plan.min_node_count}-{plan.max_node_count}")
        self.held[plan.name] = request
        return CreateResult(name=plan.name, created=False, status="RUNNING")

    @activity.defn(name=KUBE_CHECK_ACCESS)
    async def check_access(self, request: AccessRequest) -> AccessReport:
        asked = {name for need in request.needs for name in need.names()}
        self.calls.append("access review")
        return AccessReport(denied=[d for d in self.denied if d in asked])

    def activities(self) -> list[object]:
        out: list[object] = [
            self.classes,
            self.probe,
            self.publish,
            self.replicas_on,
            self.verify_stack,
            self.check_access,
            self.replicas_by_pool,
            self.list_pools,
            self.update_pool,
        ]
        for names, fns in (
            (
                (GKE_CREATE_CLUSTER, GKE_CREATE_NODE_POOL, GKE_DELETE_NODE_POOL),
                (self._create_cluster, self._create_pool, self._delete_pool),
            ),
            (
                (EKS_CREATE_CLUSTER, EKS_CREATE_NODEGROUP, EKS_DELETE_NODEGROUP),
                (self._create_cluster, self._create_pool, self._delete_pool),
            ),
            (
                (GKE_DELETE_CLUSTER, GKE_KUBECONFIG, EKS_DELETE_CLUSTER, EKS_KUBECONFIG),
                (self._delete_cluster, self._kubeconfig, self._delete_cluster, self._kubeconfig),
            ),
        ):
            out.extend(_named(n, fn) for n, fn in zip(names, fns, strict=True))
        return out


def _named(name: str, fn: Callable[[Any], Awaitable[Any]]) -> object:
    """The same double registered under each cloud's activity name."""

    @functools.wraps(fn)
    async def call(arg: Any) -> Any:
        return await fn(arg)

    return activity.defn(call, name=name)


async def _run(
    env: WorkflowEnvironment, cloud: FakeCloud, spec: InferenceCluster
) -> tuple[ClusterStatus, ClusterStatus]:
    """Provision, take the status once it settles (Ready or Failed), then delete."""
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(
        env.client,
        task_queue=queue,
        workflows=[ClusterWorkflow],
        activities=cloud.activities(),
    ):
        handle = await env.client.start_workflow(
            ClusterWorkflow.run,
            ClusterInput.of(spec),
            id=f"cluster/{spec.name}-{uuid.uuid4()}",
            task_queue=queue,
            result_type=ClusterStatus,
        )
        await cloud.settle()
        settled = await handle.query(ClusterWorkflow.status)
        await handle.execute_update(ClusterWorkflow.delete)
        final = await handle.result()
    return settled, final


async def test_gke_saga_creates_cluster_then_each_pool_then_kubeconfig(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    cloud = FakeCloud()
    settled, final = await _run(time_skipping_env, cloud, _two_pools("gke-central"))
    assert settled.phase == "Ready"
    assert sorted(settled.observed_pools) == ["gpu-h100", "gpu-h100-b"]
    assert cloud.calls[:4] == [
        "create cluster gke-central",
        "create pool gpu-h100",
        "create pool gpu-h100-b",
        "kubeconfig",
    ]
    plan = cloud.pools[0].pool
    assert plan.machine_type == "a3-highgpu-8g"
    assert plan.labels == {"modelfleet.dev/pool": "gpu-h100"}
    # Delete deprovisions what it created, newest first.
    assert cloud.calls[4:] == [
        "access review",
        "delete pool gpu-h100-b",
        "delete pool gpu-h100",
        "delete cluster gke-central",
    ]
    assert final.reason == "deleted"


async def test_quota_on_the_second_pool_rolls_back_in_reverse_and_keeps_the_reason(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    cloud = FakeCloud(fail_pool="gpu-h200-b")
    settled, final = await _run(time_skipping_env, cloud, _two_pools("eks-east"))
    assert settled.phase == "Failed"
    assert "QuotaExceeded" in settled.reason
    assert "request a quota increase" in settled.reason
    assert "create node group gpu-h200-b" in settled.reason
    assert cloud.calls == [
        "create cluster eks-east",
        "create pool gpu-h200",
        "create pool gpu-h200-b",
        "delete pool gpu-h200-b",
        "delete pool gpu-h200",
        "delete cluster eks-east",
    ]
    # Nothing was left to deprovision on delete.
    assert final.reason == "deleted"
    assert not any(r.ready for r in cloud.reports)


async def test_a_failed_provisioning_is_retried_by_applying_again_and_by_restart(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    """A stockout fails the saga (rolled back, its own reason and advice); applying the same
    manifest again provisions again, as does the ``retry`` Update behind ``rollout restart
    cluster/NAME``, which a cluster that has not failed refuses."""
    cloud = FakeCloud(fail_pool="gpu-h100", fail_type="CloudStockout", permanent_failures=2)
    spec = CLUSTERS["gke-central"]
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(
        time_skipping_env.client,
        task_queue=queue,
        workflows=[ClusterWorkflow],
        activities=cloud.activities(),
    ):
        handle = await time_skipping_env.client.start_workflow(
            ClusterWorkflow.run,
            ClusterInput.of(spec),
            id=f"cluster/{spec.name}-{uuid.uuid4()}",
            task_queue=queue,
            result_type=ClusterStatus,
        )
        await cloud.settle()
        failed = await handle.query(ClusterWorkflow.status)
        assert failed.phase == "Failed"
        assert failed.reason.startswith("ProvisioningFailed at create node pool gpu-h100: ")
        assert "Stockout" in failed.reason
        assert "quota increase will not help" in failed.reason
        assert "Error" not in failed.reason

        cloud.settled.clear()
        again = await handle.execute_update(ClusterWorkflow.apply, spec)
        assert again.phase == "Provisioning"
        await cloud.settle()
        assert (await handle.query(ClusterWorkflow.status)).phase == "Failed"

        cloud.settled.clear()
        restarted = await handle.execute_update(ClusterWorkflow.retry)
        assert restarted.phase == "Provisioning"
        await cloud.settle()
        ready = await handle.query(ClusterWorkflow.status)
        assert ready.phase == "Ready"
        assert cloud.calls.count("create pool gpu-h100") == 3
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(ClusterWorkflow.retry)
        assert "not Failed" in str(refused.value.cause)
        await handle.execute_update(ClusterWorkflow.delete)
        await handle.result()


async def test_a_transient_error_is_retried(time_skipping_env: WorkflowEnvironment) -> None:
    cloud = FakeCloud(fail_pool="gpu-h100", fail_type="CloudUnavailable", transient_failures=2)
    settled, _ = await _run(time_skipping_env, cloud, CLUSTERS["gke-central"])
    assert settled.phase == "Ready"
    assert cloud.calls.count("create pool gpu-h100") == 3
    assert "delete pool gpu-h100" not in cloud.calls[:4]


async def test_a_provisioned_cluster_refreshes_its_kubeconfig_token(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    cloud = FakeCloud()
    spec = CLUSTERS["eks-east"]
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(
        time_skipping_env.client,
        task_queue=queue,
        workflows=[ClusterWorkflow],
        activities=cloud.activities(),
    ):
        handle = await time_skipping_env.client.start_workflow(
            ClusterWorkflow.run,
            ClusterInput.of(spec),
            id=f"cluster/{spec.name}-{uuid.uuid4()}",
            task_queue=queue,
            result_type=ClusterStatus,
        )
        await cloud.settle()
        assert cloud.calls.count("kubeconfig") == 1
        await time_skipping_env.sleep(timedelta(minutes=25))
        # Written at provisioning, then again every ten minutes of probing.
        assert cloud.calls.count("kubeconfig") >= 3
        await handle.execute_update(ClusterWorkflow.delete)
        await handle.result()


async def test_missing_rbac_keeps_the_cluster_out_with_a_condition_until_granted(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    cloud = FakeCloud(
        denied=["delete deployments.apps", "patch leaderworkersets.leaderworkerset.x-k8s.io"]
    )
    spec = CLUSTERS["gke-central"]
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(
        time_skipping_env.client,
        task_queue=queue,
        workflows=[ClusterWorkflow],
        activities=cloud.activities(),
    ):
        handle = await time_skipping_env.client.start_workflow(
            ClusterWorkflow.run,
            ClusterInput.of(spec),
            id=f"cluster/{spec.name}-{uuid.uuid4()}",
            task_queue=queue,
            result_type=ClusterStatus,
        )
        while not any(r.reason.startswith("AccessDenied") for r in cloud.reports):
            await time_skipping_env.sleep(timedelta(seconds=5))
        status = await handle.query(ClusterWorkflow.status)
        assert not status.ready
        access = next(c for c in status.conditions if c.type == "AccessGranted")
        assert (access.status, access.reason) == ("False", "AccessDenied")
        assert access.message == (
            "the cluster's credentials may not: delete deployments.apps, "
            "patch leaderworkersets.leaderworkerset.x-k8s.io"
        )
        assert not any(r.ready for r in cloud.reports), "no placement before RBAC is granted"
        # Granted: the next probe reviews again and the cluster becomes Ready.
        cloud.denied.clear()
        await cloud.settle()
        status = await handle.query(ClusterWorkflow.status)
        access = next(c for c in status.conditions if c.type == "AccessGranted")
        assert (status.phase, access.status) == ("Ready", "True")
        await handle.execute_update(ClusterWorkflow.delete)
        await handle.result()


async def test_changed_pools_are_reconciled_and_a_busy_pool_is_not_removed(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    cloud = FakeCloud()
    spec = CLUSTERS["gke-central"]
    first = spec.spec.node_pools[0]
    queue = f"tq-{uuid.uuid4()}"

    def with_pools(*pools: Any) -> InferenceCluster:
        return spec.model_copy(
            update={"spec": spec.spec.model_copy(update={"node_pools": list(pools)})}
        )

    async def until(call: str) -> None:
        while call not in cloud.calls:
            await time_skipping_env.sleep(timedelta(seconds=5))

    async with Worker(
        time_skipping_env.client,
        task_queue=queue,
        workflows=[ClusterWorkflow],
        activities=cloud.activities(),
    ):
        handle = await time_skipping_env.client.start_workflow(
            ClusterWorkflow.run,
            ClusterInput.of(spec),
            id=f"cluster/{spec.name}-{uuid.uuid4()}",
            task_queue=queue,
            result_type=ClusterStatus,
        )
        await cloud.settle()
        # Add a pool and widen the first one's autoscaling bounds.
        wider = first.model_copy(update={"min_node_count": 1, "max_node_count": 8})
        extra = first.model_copy(
            update={"name": "extra", "max_node_count": None, "min_node_count": None}
        )
        await handle.execute_update(ClusterWorkflow.apply, with_pools(wider, extra))
        await until("resize pool gpu-h100 1-8")
        assert "create pool extra" in cloud.calls
        status = await handle.query(ClusterWorkflow.status)
        pools = next(c for c in status.conditions if c.type == "NodePools")
        assert (pools.status, pools.message) == ("True", "created extra; resized gpu-h100")
        # A pool with replicas on it cannot be removed: the update is refused, naming them.
        cloud.on_pools = {"extra": ["ml/llama-0"]}
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(ClusterWorkflow.apply, with_pools(wider))
        cause = refused.value.cause
        assert isinstance(cause, ApplicationError)
        assert cause.type == "PoolInUse"
        assert "pool extra runs ml/llama-0" in cause.message
        assert "delete pool extra" not in cloud.calls
        # Once it is empty, the removal goes through and the cloud pool is deleted.
        cloud.on_pools = {}
        await handle.execute_update(ClusterWorkflow.apply, with_pools(wider))
        await until("delete pool extra")
        await handle.execute_update(ClusterWorkflow.delete)
        await handle.result()
    assert sorted(cloud.held) == []


def _with_fallbacks(*fallbacks: dict[str, Any]) -> InferenceCluster:
    doc = CLUSTERS["gke-central"].to_wire()
    doc["spec"]["nodePools"][0]["fallbacks"] = list(fallbacks)
    return InferenceCluster.model_validate(doc)


async def test_a_stockout_moves_to_the_next_class_and_the_fleet_sees_what_was_created(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    # The H100s are out in us-central1-a, the A100s are not.
    cloud = FakeCloud(machine_errors={"a3-highgpu-8g": "CloudStockout"})
    spec = _with_fallbacks({"className": "gke-a2-ultragpu-8g"})
    settled, _ = await _run(time_skipping_env, cloud, spec)
    assert settled.phase == "Ready", settled.reason
    assert cloud.calls[:4] == [
        "create cluster gke-central",
        "create pool gpu-h100 as a3-highgpu-8g: CloudStockout",
        "delete pool gpu-h100",
        "create pool gpu-h100",
    ]
    assert cloud.pools[0].pool.machine_type == "a2-ultragpu-8g"
    # The fleet places by what the pool is: the A100 class, not the declared H100 one.
    assert cloud.specs[-1].spec.node_pools[0].class_name == "gke-a2-ultragpu-8g"
    assert cloud.specs[0].spec.node_pools[0].class_name == "gke-a3-highgpu-8g"
    names = [s.name for s in settled.steps]
    assert names[1:4] == [
        "create node pool gpu-h100 in us-central1-a as gke-a3-highgpu-8g",
        "delete node pool gpu-h100 (stocked out)",
        "create node pool gpu-h100 in us-central1-a as gke-a2-ultragpu-8g",
    ]
    assert "CloudStockout" in settled.steps[1].error
    assert not settled.steps[3].error


async def test_another_error_after_a_stockout_fails_at_once_naming_both(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    cloud = FakeCloud(
        zone_errors={"us-central1-a": "CloudStockout", "us-central1-b": "CloudQuotaExceeded"}
    )
    spec = _with_fallbacks({"zones": ["us-central1-b"]}, {"zones": ["us-central1-c"]})
    settled, _ = await _run(time_skipping_env, cloud, spec)
    assert settled.phase == "Failed"
    # A quota is no stockout: us-central1-c is never tried; everything is rolled back.
    assert cloud.calls == [
        "create cluster gke-central",
        "create pool gpu-h100 in us-central1-a: CloudStockout",
        "delete pool gpu-h100",
        "create pool gpu-h100 in us-central1-b: CloudQuotaExceeded",
        "delete pool gpu-h100",
        "delete cluster gke-central",
    ]
    assert settled.reason.startswith(
        "ProvisioningFailed at create node pool gpu-h100 in us-central1-b as gke-a3-highgpu-8g: "
        "QuotaExceeded: no capacity in us-central1-b; after stockouts at: create node pool "
        "gpu-h100 in us-central1-a as gke-a3-highgpu-8g; "
    )
    assert "request a quota increase" in settled.reason
