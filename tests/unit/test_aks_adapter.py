"""AKS through the official Azure SDK (azure-mgmt-containerservice, a static ARM token) against
the simulated Azure Resource Manager: the managed cluster and agent pools the activities create,
the nodes the emulated cluster then holds, the kubeconfig listClusterUserCredential gives the
worker, resizes, deletes, and how Azure's errors are classified."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from azure.core.exceptions import HttpResponseError
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from modelfleet.activities.cloud import CloudActivities
from modelfleet.adapters.aks import classify
from modelfleet.adapters.cloud_config import CloudSettings
from modelfleet.adapters.kube_client import KubeCluster
from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.loading import load_paths
from modelfleet.api.support import not_acted_upon
from modelfleet.cluster.plan import cloud_cluster, desired_shape, diff_pools, plan_pools
from modelfleet.contracts.cloud_payloads import (
    CloudCluster,
    CloudErrorReason,
    PoolPlan,
    PoolRef,
    PoolRequest,
)
from modelfleet.sim.clouds.clouds import SIM_AZURE_TOKEN, ThreadedClouds, clouds_in_thread
from modelfleet.sim.clouds.faults import CloudFault, ErrorKind, FaultStage

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "provisioning"
_LOADED = load_paths([str(EXAMPLES)])
CLASSES = {r.name: r for r in _LOADED.resources if isinstance(r, InferenceClass)}
CLUSTERS = {r.name: r for r in _LOADED.resources if isinstance(r, InferenceCluster)}


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedClouds]:
    threaded = clouds_in_thread(CLASSES, tmp_path_factory.mktemp("clouds"), polls=2)
    try:
        yield threaded
    finally:
        threaded.stop()


@pytest.fixture
def acts(
    sim: ThreadedClouds, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[CloudActivities]:
    for key, value in sim.clouds.worker_env().items():
        monkeypatch.setenv(key, value)
    settings = CloudSettings.from_env(tmp_path / "creds")
    activities = CloudActivities(replace(settings, poll_seconds=0.01))
    yield activities
    activities.close()


def _plan(name: str) -> tuple[CloudCluster, PoolPlan]:
    spec = CLUSTERS["aks-east"]
    spec = spec.model_copy(update={"metadata": spec.metadata.model_copy(update={"name": name})})
    plans, problems = plan_pools(spec, CLASSES)
    assert problems == []
    (plan,) = plans
    return cloud_cluster(spec, owner="run-1"), plan


def _nodes(sim: ThreadedClouds, cluster: str, pool: str) -> list[dict[str, object]]:
    items: list[dict[str, object]] = sim.run(sim.clouds.fleet.store(cluster).list("v1", "Node"))
    return [n for n in items if f"{cluster}-{pool}-" in str(n["metadata"])]


def test_plan_takes_the_aks_recipe() -> None:
    c, plan = _plan("aks-plan")
    assert (c.region, c.kubernetes_version) == ("eastus", "1.34")
    assert (plan.vm_size, plan.disk_size_gb, plan.gpu_driver) == (
        "Standard_ND96isr_H100_v5",
        256,
        "Install",
    )
    assert (plan.node_count, plan.min_node_count, plan.max_node_count) == (1, 1, 3)
    assert plan.zones == ["1"]
    assert plan.labels == {"modelfleet.dev/pool": "gpuh100"}
    assert [(t.key, t.effect.value) for t in plan.taints] == [("nvidia.com/gpu", "NoSchedule")]
    # AKS reports a pool's live count: an autoscaled pool is compared by its bounds only.
    shape = desired_shape(CLUSTERS["aks-east"].spec.cluster.source, plan)
    assert (shape.min_node_count, shape.max_node_count) == (1, 3)
    moved = shape.model_copy(update={"node_count": 3})
    assert not diff_pools(CLUSTERS["aks-east"].spec.cluster.source, [plan], [moved], {"gpuh100"})


def test_aks_cluster_and_agent_pool_become_nodes_and_a_kubeconfig(
    sim: ThreadedClouds, acts: CloudActivities
) -> None:
    c, plan = _plan("aks-a")
    env = ActivityEnvironment()
    created = env.run(acts.aks_create_cluster, c)
    assert (created.created, created.status) == (True, "Succeeded")
    fake = sim.clouds.aks
    body = fake.cluster("aks-a")
    assert body["location"] == "eastus"
    assert body["tags"] == {"modelfleet-dev_owner": "run-1"}
    assert body["properties"]["provisioningState"] == "Succeeded"
    assert fake.pool_names("aks-a") == ["system"]
    assert fake.pool("aks-a", "system")["properties"]["vmSize"] == "Standard_D4s_v5"

    pool = env.run(acts.aks_create_agent_pool, PoolRequest(cluster=c, pool=plan))
    assert pool.created
    props = fake.pool("aks-a", "gpuh100")["properties"]
    assert props["vmSize"] == "Standard_ND96isr_H100_v5"
    assert props["gpuProfile"] == {"driver": "Install"}
    assert props["osDiskSizeGB"] == 256
    assert props["availabilityZones"] == ["1"]
    assert (props["enableAutoScaling"], props["minCount"], props["maxCount"]) == (True, 1, 3)
    assert props["nodeTaints"] == ["nvidia.com/gpu=present:NoSchedule"]
    assert props["nodeLabels"] == {"modelfleet.dev/pool": "gpuh100"}
    (node,) = _nodes(sim, "aks-a", "gpuh100")
    labels = node["metadata"]["labels"]  # type: ignore[index]
    assert labels["kubernetes.azure.com/agentpool"] == "gpuh100"
    assert labels["modelfleet.dev/pool"] == "gpuh100"
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in node[
        "spec"  # type: ignore[index]
    ]["taints"]

    # The kubeconfig AKS hands out is written on the worker, 0600, and it works.
    env.run(acts.aks_write_kubeconfig, c)
    path = acts.settings.credentials_dir / "aks-a.yaml"
    doc = yaml.safe_load(path.read_text())
    assert doc["current-context"] == "aks-a"
    assert doc["users"][0]["user"]["token"].startswith("sim-aks-user-token-")
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    kube = KubeCluster(path)
    try:
        assert any("gpuh100" in n.name for n in kube.nodes())
    finally:
        kube.close()

    # A retried create adopts its own cluster and pool instead of failing or duplicating.
    assert not env.run(acts.aks_create_cluster, c).created
    assert not env.run(acts.aks_create_agent_pool, PoolRequest(cluster=c, pool=plan)).created
    assert fake.calls.count("ManagedClusters_CreateOrUpdate aks-a") == 1

    assert env.run(acts.aks_delete_agent_pool, PoolRef(cluster=c, pool="gpuh100")).existed
    assert fake.pool_names("aks-a") == ["system"]
    assert _nodes(sim, "aks-a", "gpuh100") == []
    assert env.run(acts.aks_delete_cluster, c).existed
    assert "aks-a" not in fake.cluster_names()
    assert "aks-a" not in sim.clouds.fleet.clusters
    assert not path.exists()
    assert not env.run(acts.aks_delete_cluster, c).existed


def test_aks_agent_pools_resize_and_change_bounds(
    sim: ThreadedClouds, acts: CloudActivities
) -> None:
    c, plan = _plan("aks-r")
    env = ActivityEnvironment()
    env.run(acts.aks_create_cluster, c)
    env.run(acts.aks_create_agent_pool, PoolRequest(cluster=c, pool=plan))
    (shape,) = env.run(acts.aks_list_agent_pools, c)
    assert (shape.name, shape.node_count, shape.min_node_count, shape.max_node_count) == (
        "gpuh100",
        1,
        1,
        3,
    )
    wider = plan.model_copy(update={"min_node_count": 2, "max_node_count": 5})
    env.run(acts.aks_update_agent_pool, PoolRequest(cluster=c, pool=wider))
    (shape,) = env.run(acts.aks_list_agent_pools, c)
    assert (shape.node_count, shape.min_node_count, shape.max_node_count) == (2, 2, 5)
    assert len(_nodes(sim, "aks-r", "gpuh100")) == 2
    fixed = plan.model_copy(
        update={"min_node_count": None, "max_node_count": None, "node_count": 3}
    )
    env.run(acts.aks_update_agent_pool, PoolRequest(cluster=c, pool=fixed))
    (shape,) = env.run(acts.aks_list_agent_pools, c)
    assert (shape.node_count, shape.min_node_count, shape.max_node_count) == (3, None, None)
    assert len(_nodes(sim, "aks-r", "gpuh100")) == 3
    env.run(acts.aks_delete_cluster, c)


def test_aks_errors_are_classified_per_reason(sim: ThreadedClouds, acts: CloudActivities) -> None:
    c, plan = _plan("aks-b")
    env = ActivityEnvironment()
    env.run(acts.aks_create_cluster, c)
    faults = sim.clouds.aks.faults
    cases = [
        (ErrorKind.QUOTA, FaultStage.CALL, "CloudQuotaExceeded", True, "quota"),
        (ErrorKind.QUOTA, FaultStage.OPERATION, "CloudQuotaExceeded", True, "quota"),
        (ErrorKind.STOCKOUT, FaultStage.CALL, "CloudStockout", True, "SkuNotAvailable"),
        (ErrorKind.STOCKOUT, FaultStage.OPERATION, "CloudStockout", True, "ZonalAllocation"),
        (ErrorKind.PERMISSION, FaultStage.CALL, "CloudPermissionDenied", True, "authorization"),
        (ErrorKind.UNAVAILABLE, FaultStage.CALL, "CloudUnavailable", False, "unavailable"),
        (ErrorKind.THROTTLED, FaultStage.CALL, "CloudThrottled", False, "throttled"),
        (ErrorKind.BAD_MACHINE_TYPE, FaultStage.CALL, "CloudInvalidArgument", True, "vmSize"),
    ]
    for kind, stage, error_type, permanent, words in cases:
        faults.add(CloudFault(operation="AgentPools_CreateOrUpdate", error=kind, stage=stage))
        with pytest.raises(ApplicationError) as caught:
            env.run(acts.aks_create_agent_pool, PoolRequest(cluster=c, pool=plan))
        assert (caught.value.type, caught.value.non_retryable) == (error_type, permanent), kind
        assert words.lower() in str(caught.value).lower(), (kind, str(caught.value))
        assert SIM_AZURE_TOKEN not in str(caught.value)
        if stage is FaultStage.OPERATION:
            # The failed pool is left Failed, as AKS does; deleting it cleans up.
            env.run(acts.aks_delete_agent_pool, PoolRef(cluster=c, pool=plan.name))
    assert sim.clouds.aks.pool_names("aks-b") == ["system"]
    # Someone else's cluster of the same name is never adopted.
    other = c.model_copy(update={"owner": "someone-else"})
    with pytest.raises(ApplicationError) as caught:
        env.run(acts.aks_create_cluster, other)
    assert caught.value.type == "CloudAlreadyExists"
    assert caught.value.non_retryable
    env.run(acts.aks_delete_cluster, c)


def test_a_wrong_token_is_unauthenticated_and_no_subscription_is_named(
    sim: ThreadedClouds, acts: CloudActivities, tmp_path: Path
) -> None:
    c, _ = _plan("aks-auth")
    bad = tmp_path / "bad-token"
    bad.write_text("not-the-token")
    settings = replace(acts.settings, aks_token_file=bad, credentials_dir=tmp_path / "c")
    env = ActivityEnvironment()
    with pytest.raises(ApplicationError) as caught:
        env.run(CloudActivities(settings).aks_create_cluster, c)
    assert caught.value.type == "CloudUnauthenticated"
    assert "not-the-token" not in str(caught.value)
    nosub = replace(settings, aks_subscription=None)
    with pytest.raises(ApplicationError) as caught:
        env.run(CloudActivities(nosub).aks_create_cluster, c)
    assert caught.value.type == "CloudInvalidArgument"
    assert "MODELFLEET_AKS_SUBSCRIPTION_ID" in str(caught.value)
    assert "aks-auth" not in sim.clouds.aks.cluster_names()


class _Response:
    """What azure-core's HttpResponseError reads of a response."""

    def __init__(self, status: int, body: dict[str, object]) -> None:
        self.status_code = status
        self.reason = "reason"
        self.headers: dict[str, str] = {}
        self._text = json.dumps(body)

    def text(self, encoding: str | None = None) -> str:
        return self._text


@pytest.mark.parametrize(
    ("status", "code", "message", "reason"),
    [
        # AKS words some quota failures as OperationNotAllowed: the words tell.
        (
            400,
            "OperationNotAllowed",
            "exceeding approved standardNCADSA100v4Family Cores quota",
            CloudErrorReason.QUOTA_EXCEEDED,
        ),
        # ... and a cluster busy with another operation the same way: retried.
        (
            409,
            "OperationNotAllowed",
            "there's an in progress create managed cluster operation",
            CloudErrorReason.OPERATION_RUNNING,
        ),
        (409, "SkuNotAvailable", "not available in location 'eastus'", CloudErrorReason.STOCKOUT),
        (200, "AllocationFailed", "Allocation failed", CloudErrorReason.STOCKOUT),
        (401, "ExpiredAuthenticationToken", "expired", CloudErrorReason.UNAUTHENTICATED),
        (
            404,
            "ResourceGroupNotFound",
            "Resource group 'modelfleet' could not be found.",
            CloudErrorReason.NOT_FOUND,
        ),
        (500, "", "", CloudErrorReason.UNAVAILABLE),
    ],
)
def test_arm_errors_are_classified_by_code_then_words_then_status(
    status: int, code: str, message: str, reason: CloudErrorReason
) -> None:
    exc = HttpResponseError(
        response=_Response(status, {"error": {"code": code, "message": message}})
    )  # type: ignore[arg-type]
    found = classify(exc)
    assert found.reason is reason
    assert message in found.message


def test_an_aks_cluster_without_infiniband_is_acted_upon_whole() -> None:
    assert not_acted_upon(CLUSTERS["aks-east"]) is None
    assert not_acted_upon(CLASSES["aks-nd96isr-h100-v5"]) is None
