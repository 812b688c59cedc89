"""The cloud activities and adapters against the simulated clouds, through the real SDKs
(google-cloud-container's REST transport, boto3): what they create, the nodes the emulated
clusters then hold, the kubeconfig written on the worker, and how errors are classified."""

from __future__ import annotations

import base64
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
import yaml
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from modelfleet.activities import cloud as cloud_activities
from modelfleet.activities.cloud import CloudActivities
from modelfleet.activities.kube_ops import KubeActivities, KubeconfigStore
from modelfleet.adapters.cloud_config import CloudSettings, key_file_project
from modelfleet.adapters.kube_client import KubeCluster
from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.loading import load_paths
from modelfleet.cluster.plan import cloud_cluster, plan_pools
from modelfleet.contracts.cloud_payloads import CloudCluster, PoolPlan, PoolRef, PoolRequest
from modelfleet.sim.clouds.clouds import SIM_GKE_TOKEN, ThreadedClouds, clouds_in_thread
from modelfleet.sim.clouds.faults import CloudFault, ErrorKind, FaultStage

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "provisioning"


def _examples() -> tuple[dict[str, InferenceClass], dict[str, InferenceCluster]]:
    result = load_paths([str(EXAMPLES)])
    result.raise_for_errors()
    classes = {r.name: r for r in result.resources if isinstance(r, InferenceClass)}
    clusters = {r.name: r for r in result.resources if isinstance(r, InferenceCluster)}
    return classes, clusters


CLASSES, CLUSTERS = _examples()


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedClouds]:
    threaded = clouds_in_thread(CLASSES, tmp_path_factory.mktemp("clouds"), polls=2)
    try:
        yield threaded
    finally:
        threaded.stop()


@pytest.fixture
def acts(sim: ThreadedClouds, tmp_path: Path) -> Iterator[CloudActivities]:
    env = sim.clouds.worker_env()
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        settings = CloudSettings.from_env(tmp_path / "creds")
        yield CloudActivities(CloudSettings(**{**settings.__dict__, "poll_seconds": 0.01}))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _plan(cluster: str, name: str | None = None) -> tuple[CloudCluster, list[PoolPlan]]:
    spec = CLUSTERS[cluster]
    if name is not None:
        spec = spec.model_copy(update={"metadata": spec.metadata.model_copy(update={"name": name})})
    plans, problems = plan_pools(spec, CLASSES)
    assert problems == []
    return cloud_cluster(spec, owner="run-1"), plans


def _nodes(sim: ThreadedClouds, cluster: str) -> list[dict[str, object]]:
    items: list[dict[str, object]] = sim.run(sim.clouds.fleet.store(cluster).list("v1", "Node"))
    return items


def test_plan_takes_the_class_recipe_pool_label_and_gpu_taint() -> None:
    _, (gke,) = _plan("gke-central")
    assert (gke.machine_type, gke.accelerator_type, gke.accelerator_count) == (
        "a3-highgpu-8g",
        "nvidia-h100-80gb",
        8,
    )
    assert gke.labels == {"modelfleet.dev/pool": "gpu-h100"}
    assert [(t.key, t.effect.value) for t in gke.taints] == [("nvidia.com/gpu", "NoSchedule")]
    assert (gke.min_node_count, gke.max_node_count, gke.disk_size_gb) == (0, 4, 500)
    _, (eks,) = _plan("eks-east")
    assert eks.instance_type == "p5en.48xlarge"
    assert eks.efa
    assert eks.capacity_reservation_id == "cr-0123456789abcdef0"


def test_plan_names_a_class_without_the_provider_block() -> None:
    spec = CLUSTERS["gke-central"]
    pool = spec.spec.node_pools[0].model_copy(update={"class_name": "eks-p5en-48xlarge"})
    spec = spec.model_copy(update={"spec": spec.spec.model_copy(update={"node_pools": [pool]})})
    plans, problems = plan_pools(spec, CLASSES)
    assert plans == []
    assert problems == [
        "nodePools[gpu-h100]: class eks-p5en-48xlarge has no provisioning.gke block"
    ]


def test_gke_cluster_and_pool_become_nodes_with_labels_taints_and_slices(
    sim: ThreadedClouds, acts: CloudActivities, tmp_path: Path
) -> None:
    c, (plan,) = _plan("gke-central", "gke-a")
    env = ActivityEnvironment()
    created = env.run(acts.gke_create_cluster, c)
    assert created.created
    assert created.status == "RUNNING"
    assert sim.clouds.gke.pool_names("gke-a") == ["system"]
    pool = env.run(acts.gke_create_node_pool, PoolRequest(cluster=c, pool=plan))
    assert pool.created
    body = sim.clouds.gke.pool("gke-a", "gpu-h100")
    assert body["autoscaling"] == {"enabled": True, "maxNodeCount": 4}
    accelerator = body["config"]["accelerators"][0]
    assert accelerator["acceleratorType"] == "nvidia-h100-80gb"
    assert accelerator["gpuDriverInstallationConfig"] == {"gpuDriverVersion": "DEFAULT"}
    gpu_nodes = [n for n in _nodes(sim, "gke-a") if "gpu-h100" in str(n["metadata"])]
    assert len(gpu_nodes) == 1
    node = gpu_nodes[0]
    assert node["metadata"]["labels"]["modelfleet.dev/pool"] == "gpu-h100"  # type: ignore[index]
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in node[
        "spec"  # type: ignore[index]
    ]["taints"]
    slices = sim.run(sim.clouds.fleet.store("gke-a").list("resource.k8s.io/v1", "ResourceSlice"))
    assert len(slices[0]["spec"]["devices"]) == 8

    # The kubeconfig is written on the worker, with the minted token, and it works.
    env.run(acts.gke_write_kubeconfig, c)
    path = acts.settings.credentials_dir / "gke-a.yaml"
    doc = yaml.safe_load(path.read_text())
    assert doc["users"][0]["user"]["token"] == SIM_GKE_TOKEN
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    kube = KubeCluster(path)
    try:
        assert len(kube.nodes()) == 2
    finally:
        kube.close()

    # A retried create adopts its own cluster and pool instead of failing or duplicating.
    assert not env.run(acts.gke_create_cluster, c).created
    assert not env.run(acts.gke_create_node_pool, PoolRequest(cluster=c, pool=plan)).created

    assert env.run(acts.gke_delete_node_pool, PoolRef(cluster=c, pool="gpu-h100")).existed
    assert sim.clouds.gke.pool_names("gke-a") == ["system"]
    assert env.run(acts.gke_delete_cluster, c).existed
    assert "gke-a" not in sim.clouds.gke.cluster_names()
    assert not sim.clouds.fleet.clusters.get("gke-a")
    assert not path.exists()  # the minted token does not outlive its cluster on disk
    assert not env.run(acts.gke_delete_cluster, c).existed


def test_a_step_blocked_in_one_sdk_call_keeps_heartbeating_its_operation(
    sim: ThreadedClouds, acts: CloudActivities, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dead worker's step is retried within the (short) heartbeat timeout, so a live one must
    beat however long one SDK call takes: the helper thread repeats the latest progress, the
    operation a retry would resume."""
    monkeypatch.setattr(cloud_activities, "CLOUD_BEAT_SECONDS", 0.01)
    c, _ = _plan("gke-central", "gke-beat")
    env = ActivityEnvironment()
    beats: list[tuple[Any, ...]] = []
    enough = threading.Event()

    def on_heartbeat(*details: Any) -> None:
        beats.append(details)
        if sum(1 for d in beats if d) >= 8:
            enough.set()

    env.on_heartbeat = on_heartbeat
    real = acts.gke.operation

    def one_slow_call(cluster: CloudCluster, name: str) -> Any:
        # Stands in for one request that outlasts the heartbeat timeout: it returns only once
        # the helper has beaten several times on its own.
        assert enough.wait(timeout=30)
        return real(cluster, name)

    monkeypatch.setattr(acts.gke, "operation", one_slow_call)
    try:
        assert env.run(acts.gke_create_cluster, c).created
    finally:
        monkeypatch.setattr(acts.gke, "operation", real)
        ActivityEnvironment().run(acts.gke_delete_cluster, c)
    first = next(i for i, d in enumerate(beats) if d)
    # Before the create returned, only empty keep-alive beats (none on entry: a first attempt
    # starts quiet); from then on, always the operation, never an older beat.
    assert set(beats[:first]) <= {()}
    progress = set(beats[first:])
    assert len(progress) == 1, progress
    (operation,) = next(iter(progress))
    assert isinstance(operation, str)
    assert operation


def test_gke_errors_are_classified_per_reason(sim: ThreadedClouds, acts: CloudActivities) -> None:
    c, (plan,) = _plan("gke-central", "gke-b")
    env = ActivityEnvironment()
    env.run(acts.gke_create_cluster, c)
    faults = sim.clouds.gke.faults
    cases = [
        (ErrorKind.QUOTA, FaultStage.CALL, "CloudQuotaExceeded", True),
        (ErrorKind.QUOTA, FaultStage.OPERATION, "CloudQuotaExceeded", True),
        # Same google.rpc code (RESOURCE_EXHAUSTED) as quota: a stockout all the same.
        (ErrorKind.STOCKOUT, FaultStage.OPERATION, "CloudStockout", True),
        (ErrorKind.PERMISSION, FaultStage.CALL, "CloudPermissionDenied", True),
        (ErrorKind.UNAVAILABLE, FaultStage.CALL, "CloudUnavailable", False),
        (ErrorKind.THROTTLED, FaultStage.CALL, "CloudThrottled", False),
        (ErrorKind.INVALID, FaultStage.CALL, "CloudInvalidArgument", True),
    ]
    for kind, stage, error_type, permanent in cases:
        faults.add(CloudFault(operation="createNodePool", error=kind, stage=stage))
        with pytest.raises(ApplicationError) as caught:
            env.run(acts.gke_create_node_pool, PoolRequest(cluster=c, pool=plan))
        assert (caught.value.type, caught.value.non_retryable) == (error_type, permanent), kind
        assert SIM_GKE_TOKEN not in str(caught.value)
        if stage is FaultStage.OPERATION:
            # The failed pool is left in ERROR, as GKE does; deleting it cleans up.
            env.run(acts.gke_delete_node_pool, PoolRef(cluster=c, pool=plan.name))
    # Someone else's cluster of the same name is never adopted.
    other = c.model_copy(update={"owner": "someone-else"})
    with pytest.raises(ApplicationError) as caught:
        env.run(acts.gke_create_cluster, other)
    assert caught.value.type == "CloudAlreadyExists"
    assert caught.value.non_retryable
    env.run(acts.gke_delete_cluster, c)


def test_eks_cluster_and_efa_capacity_block_nodegroup(
    sim: ThreadedClouds, acts: CloudActivities
) -> None:
    c, (plan,) = _plan("eks-east", "eks-a")
    env = ActivityEnvironment()
    assert env.run(acts.eks_create_cluster, c).status == "ACTIVE"
    assert env.run(acts.eks_create_nodegroup, PoolRequest(cluster=c, pool=plan)).created
    group = acts.eks.describe_nodegroup(c, "gpu-h200")
    assert group is not None
    assert group["labels"] == {"modelfleet.dev/pool": "gpu-h200"}
    assert group["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}
    ]
    assert group["scalingConfig"] == {"minSize": 2, "maxSize": 2, "desiredSize": 2}
    assert group["capacityType"] == "CAPACITY_BLOCK"
    ec2 = acts.eks._client(c, "ec2")
    data = ec2.describe_launch_template_versions(LaunchTemplateName="modelfleet-eks-a-gpu-h200")[
        "LaunchTemplateVersions"
    ][0]["LaunchTemplateData"]
    interfaces = data["NetworkInterfaces"]
    assert len(interfaces) == 16
    assert [i["InterfaceType"] for i in interfaces[:2]] == ["efa", "efa-only"]
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    nodes = [n for n in _nodes(sim, "eks-a") if "gpu-h200" in str(n["metadata"])]
    assert len(nodes) == 2

    env.run(acts.eks_write_kubeconfig, c)
    doc = yaml.safe_load((acts.settings.credentials_dir / "eks-a.yaml").read_text())
    token = doc["users"][0]["user"]["token"]
    assert token.startswith("k8s-aws-v1.")
    encoded = token.removeprefix("k8s-aws-v1.")
    url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    query = parse_qs(urlparse(url).query)
    assert query["Action"] == ["GetCallerIdentity"]
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"][0]

    assert env.run(acts.eks_delete_cluster, c).existed
    assert acts.eks.describe_cluster(c) is None
    assert acts.eks.launch_templates(c) == []
    assert "eks-a" not in sim.clouds.fleet.clusters


def test_eks_errors_are_classified(sim: ThreadedClouds, acts: CloudActivities) -> None:
    c, (plan,) = _plan("eks-east", "eks-b")
    env = ActivityEnvironment()
    env.run(acts.eks_create_cluster, c)
    faults = sim.clouds.eks.faults
    faults.add(CloudFault(operation="CreateNodegroup", error=ErrorKind.UNAVAILABLE))
    with pytest.raises(ApplicationError) as caught:
        env.run(acts.eks_create_nodegroup, PoolRequest(cluster=c, pool=plan))
    assert (caught.value.type, caught.value.non_retryable) == ("CloudUnavailable", False)
    faults.add(
        CloudFault(operation="CreateNodegroup", error=ErrorKind.QUOTA, stage=FaultStage.OPERATION)
    )
    with pytest.raises(ApplicationError) as caught:
        env.run(acts.eks_create_nodegroup, PoolRequest(cluster=c, pool=plan))
    assert (caught.value.type, caught.value.non_retryable) == ("CloudQuotaExceeded", True)
    assert "VcpuLimitExceeded" in str(caught.value)
    env.run(acts.eks_delete_nodegroup, PoolRef(cluster=c, pool=plan.name))
    faults.add(
        CloudFault(
            operation="CreateNodegroup", error=ErrorKind.STOCKOUT, stage=FaultStage.OPERATION
        )
    )
    with pytest.raises(ApplicationError) as caught:
        env.run(acts.eks_create_nodegroup, PoolRequest(cluster=c, pool=plan))
    assert (caught.value.type, caught.value.non_retryable) == ("CloudStockout", True)
    assert "InsufficientInstanceCapacity" in str(caught.value)
    env.run(acts.eks_delete_cluster, c)
    assert acts.eks.describe_cluster(c) is None


def test_kube_activities_rebuild_the_client_when_the_kubeconfig_is_rewritten(
    sim: ThreadedClouds, tmp_path: Path
) -> None:
    sim.run(_add_cluster(sim, "rotating"))
    path = sim.server.write_kubeconfig("rotating", tmp_path / "rotating.yaml")
    acts = KubeActivities(KubeconfigStore(tmp_path))
    try:
        first = acts._cluster("rotating")
        assert acts._cluster("rotating") is first
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
        assert acts._cluster("rotating") is not first
    finally:
        acts.close()
        sim.run(_remove_cluster(sim, "rotating"))


async def _add_cluster(sim: ThreadedClouds, name: str) -> None:
    """On the simulator's loop, where its state lives."""
    sim.server.add_cluster(name)


async def _remove_cluster(sim: ThreadedClouds, name: str) -> None:
    sim.server.remove_cluster(name)


def test_cloud_faults_are_injected_over_http_on_every_fake(
    sim: ThreadedClouds, acts: CloudActivities
) -> None:
    c, _ = _plan("gke-central", "gke-admin")
    for url, operation in (
        (sim.clouds.gke_url, "createCluster"),
        (sim.clouds.eks_url, "CreateCluster"),
        (sim.clouds.aks_url, "ManagedClusters_CreateOrUpdate"),
    ):
        added = httpx.post(
            f"{url}/_admin/faults", json={"operation": operation, "error": "permission"}
        )
        assert added.status_code == 200
        assert added.json()[0]["operation"] == operation
        assert httpx.post(f"{url}/_admin/faults", json={"error": "nope"}).status_code == 400
    env = ActivityEnvironment()
    with pytest.raises(ApplicationError) as caught:
        env.run(acts.gke_create_cluster, c)
    assert caught.value.type == "CloudPermissionDenied"
    eks_cluster, _ = _plan("eks-east", "eks-admin")
    with pytest.raises(ApplicationError) as caught:
        env.run(acts.eks_create_cluster, eks_cluster)
    assert caught.value.type == "CloudPermissionDenied"
    aks_cluster, _ = _plan("aks-east", "aks-admin")
    with pytest.raises(ApplicationError) as caught:
        env.run(acts.aks_create_cluster, aks_cluster)
    assert caught.value.type == "CloudPermissionDenied"
    assert "AuthorizationFailed" in caught.value.message
    assert httpx.get(f"{sim.clouds.gke_url}/_admin/faults").json() == []


def test_gke_project_comes_from_the_credentials_profile_when_the_recipe_has_none(
    sim: ThreadedClouds, acts: CloudActivities, tmp_path: Path
) -> None:
    c, _ = _plan("gke-central", "gke-noproj")
    c = c.model_copy(update={"project": None})
    env = ActivityEnvironment()
    # Neither the recipe nor the profile names one: a permanent error saying where to set it.
    with pytest.raises(ApplicationError) as caught:
        env.run(acts.gke_create_cluster, c)
    assert caught.value.type == "CloudInvalidArgument"
    assert caught.value.non_retryable
    assert "set spec.cluster.gke.project" in caught.value.message
    assert "profile 'default'" in caught.value.message
    assert "gke-noproj" not in sim.clouds.gke.cluster_names()
    # The worker's profile names it: the cluster is created in that project.
    with_project = CloudActivities(
        CloudSettings(**{**acts.settings.__dict__, "gke_project": "profile-project"})
    )
    try:
        assert env.run(with_project.gke_create_cluster, c).created
        assert any(
            project == "profile-project" and name == "gke-noproj"
            for project, _, name in sim.clouds.gke.clusters
        )
        env.run(with_project.gke_delete_cluster, c)
    finally:
        with_project.close()
    assert "gke-noproj" not in sim.clouds.gke.cluster_names()


def test_a_service_account_key_names_its_project(tmp_path: Path) -> None:
    assert key_file_project(tmp_path, "team") is None
    (tmp_path / "gcp").mkdir()
    (tmp_path / "gcp" / "team.json").write_text('{"type": "service_account", "project_id": "p-1"}')
    assert key_file_project(tmp_path, "team") == "p-1"
    (tmp_path / "gcp" / "team.json").write_text("not json")
    assert key_file_project(tmp_path, "team") is None


def _gpu_nodes(sim: ThreadedClouds, cluster: str, pool: str) -> int:
    return len([n for n in _nodes(sim, cluster) if f"{cluster}-{pool}-" in str(n["metadata"])])


def test_gke_pools_resize_and_change_bounds_through_the_sdk(
    sim: ThreadedClouds, acts: CloudActivities
) -> None:
    c, (plan,) = _plan("gke-central", "gke-r")
    env = ActivityEnvironment()
    env.run(acts.gke_create_cluster, c)
    env.run(acts.gke_create_node_pool, PoolRequest(cluster=c, pool=plan))
    (shape,) = env.run(acts.gke_list_node_pools, c)
    assert (shape.name, shape.min_node_count, shape.max_node_count) == ("gpu-h100", 0, 4)
    # New autoscaling bounds: the pool keeps its nodes, within the bounds.
    wider = plan.model_copy(update={"min_node_count": 2, "max_node_count": 6})
    env.run(acts.gke_update_node_pool, PoolRequest(cluster=c, pool=wider))
    (shape,) = env.run(acts.gke_list_node_pools, c)
    assert (shape.min_node_count, shape.max_node_count) == (2, 6)
    assert _gpu_nodes(sim, "gke-r", "gpu-h100") == 2  # raised to the new minimum
    # A fixed size: autoscaling off, then the pool resized.
    fixed = plan.model_copy(
        update={"min_node_count": None, "max_node_count": None, "node_count": 3}
    )
    env.run(acts.gke_update_node_pool, PoolRequest(cluster=c, pool=fixed))
    (shape,) = env.run(acts.gke_list_node_pools, c)
    assert (shape.min_node_count, shape.max_node_count) == (None, None)
    assert _gpu_nodes(sim, "gke-r", "gpu-h100") == 3
    assert "setNodePoolSize gpu-h100" in sim.clouds.gke.calls
    env.run(acts.gke_delete_cluster, c)


def test_eks_nodegroups_resize_through_the_sdk(sim: ThreadedClouds, acts: CloudActivities) -> None:
    c, (plan,) = _plan("eks-east", "eks-r")
    env = ActivityEnvironment()
    env.run(acts.eks_create_cluster, c)
    env.run(acts.eks_create_nodegroup, PoolRequest(cluster=c, pool=plan))
    (shape,) = env.run(acts.eks_list_nodegroups, c)
    assert (shape.node_count, shape.min_node_count, shape.max_node_count) == (2, 2, 2)
    bigger = plan.model_copy(update={"node_count": 3, "max_node_count": None})
    env.run(acts.eks_update_nodegroup, PoolRequest(cluster=c, pool=bigger))
    (shape,) = env.run(acts.eks_list_nodegroups, c)
    assert (shape.node_count, shape.min_node_count, shape.max_node_count) == (3, 3, 3)
    assert _gpu_nodes(sim, "eks-r", "gpu-h200") == 3
    smaller = plan.model_copy(update={"node_count": 1, "max_node_count": None})
    env.run(acts.eks_update_nodegroup, PoolRequest(cluster=c, pool=smaller))
    assert _gpu_nodes(sim, "eks-r", "gpu-h200") == 1
    env.run(acts.eks_delete_cluster, c)
