"""GKE and EKS provisioning end to end: the real Temporal dev server, a worker whose adapters
reach the simulated clouds through the official SDKs (google-cloud-container's REST transport,
boto3 against moto behind the EKS layer), and the emulated Kubernetes clusters those clouds
create. The examples in examples/provisioning provision to Ready with the pools, labels and
taints their classes say, and a deployment lands on them; a quota error on the second pool rolls
everything back; a transient 503 is retried; no cloud credential reaches any history."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import boto3
import pytest
import pytest_asyncio
from cloud_support import CLUSTERS, CloudStack, captured_debug_log, cloud_environment, renamed
from integration_support import deployment, wait_for
from temporalio.client import WorkflowUpdateFailedError
from test_no_secrets import assert_absent, haystack

from modelfleet.cli.apply import apply_resource
from modelfleet.cli.output import rejection_reason
from modelfleet.cluster.workflow import ClusterWorkflow
from modelfleet.contracts.ids import FLEET_ID, cluster_id, deployment_id
from modelfleet.contracts.status import ClusterStatus, DeploymentStatus
from modelfleet.deployment.workflow import DeploymentWorkflow
from modelfleet.fleet.workflow import FleetWorkflow
from modelfleet.sim.clouds.clouds import SIM_AWS_KEY, SIM_AWS_SECRET, SIM_GKE_TOKEN
from modelfleet.sim.clouds.faults import CloudFault, ErrorKind, FaultStage


@pytest.fixture(scope="module")
def debug_log() -> Iterator[io.StringIO]:
    """Everything the worker's log handler prints at DEBUG (every SDK's records included) for
    the whole module: the provisioning, deletion and failures of the tests below."""
    with captured_debug_log() as buffer:
        yield buffer


@pytest_asyncio.fixture(scope="module")
async def cloud_stack(
    tmp_path_factory: pytest.TempPathFactory, debug_log: io.StringIO
) -> AsyncIterator[CloudStack]:
    async with cloud_environment(tmp_path_factory.mktemp("clouds")) as stack:
        yield stack


def _aws(stack: CloudStack, service: str) -> Any:
    env = stack.clouds.worker_env()
    return boto3.client(
        service,
        endpoint_url=stack.clouds.eks_url,
        region_name="us-east-2",
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )


async def _lands(stack: CloudStack, name: str, namespace: str, memory: str) -> DeploymentStatus:
    await apply_resource(stack.client, deployment(name, namespace, memory=memory))
    handle = stack.client.get_workflow_handle(deployment_id(namespace, name))

    async def ready() -> DeploymentStatus | None:
        status: DeploymentStatus = await handle.query(DeploymentWorkflow.status)
        return status if status.ready == 1 else None

    return await wait_for(ready, 90, f"{namespace}/{name} to be Ready")


async def test_gke_example_provisions_to_ready_and_a_deployment_lands(
    cloud_stack: CloudStack,
) -> None:
    spec = CLUSTERS["gke-central"]
    await apply_resource(cloud_stack.client, spec)
    status = await cloud_stack.wait_phase("gke-central", "Ready")
    assert status.observed_pools["gpu-h100"].ready_nodes == 1
    gke = cloud_stack.clouds.gke
    assert gke.pool_names("gke-central") == ["gpu-h100", "system"]
    pool = gke.pool("gke-central", "gpu-h100")
    assert pool["config"]["machineType"] == "a3-highgpu-8g"
    assert pool["config"]["accelerators"][0]["acceleratorCount"] == "8"
    assert pool["autoscaling"] == {"enabled": True, "maxNodeCount": 4}
    (node,) = cloud_stack.pool_nodes("gke-central", "gpu-h100")
    assert node["metadata"]["labels"]["cloud.google.com/gke-accelerator"] == "nvidia-h100-80gb"
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in node["spec"][
        "taints"
    ]
    # The kubeconfig was written by the worker, into its own credentials directory.
    assert (cloud_stack.credentials / "gke-central.yaml").is_file()
    landed = await _lands(cloud_stack, "on-gke", "gke-team", "70Gi")
    assert {r.cluster for r in landed.replicas} == {"gke-central"}


async def test_eks_example_provisions_to_ready_with_efa_and_a_deployment_lands(
    cloud_stack: CloudStack,
) -> None:
    await apply_resource(cloud_stack.client, CLUSTERS["eks-east"])
    status = await cloud_stack.wait_phase("eks-east", "Ready")
    assert status.observed_pools["gpu-h200"].ready_nodes == 2
    nodes = cloud_stack.pool_nodes("eks-east", "gpu-h200")
    assert len(nodes) == 2
    assert all(n["metadata"]["labels"]["eks.amazonaws.com/nodegroup"] == "gpu-h200" for n in nodes)
    assert all(
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in n["spec"]["taints"]
        for n in nodes
    )
    eks = _aws(cloud_stack, "eks")
    group = await asyncio.to_thread(
        eks.describe_nodegroup, clusterName="eks-east", nodegroupName="gpu-h200"
    )
    assert group["nodegroup"]["capacityType"] == "CAPACITY_BLOCK"
    assert group["nodegroup"]["launchTemplate"]["name"] == "modelfleet-eks-east-gpu-h200"
    assert group["nodegroup"]["amiType"] == "AL2023_x86_64_NVIDIA"
    landed = await _lands(cloud_stack, "on-eks", "eks-team", "140Gi")
    assert {r.cluster for r in landed.replicas} == {"eks-east"}


async def test_delete_moves_the_replicas_then_deprovisions_and_unpublishes(
    cloud_stack: CloudStack,
) -> None:
    # on-gke (70Gi) fits the EKS H200 pool too: deleting gke-central moves it there first.
    handle = cloud_stack.client.get_workflow_handle(
        cluster_id("gke-central"), result_type=ClusterStatus
    )
    await handle.execute_update(ClusterWorkflow.delete)
    final: ClusterStatus = await asyncio.wait_for(handle.result(), 120)
    assert final.reason == "deleted"
    moved = await cloud_stack.client.get_workflow_handle(deployment_id("gke-team", "on-gke")).query(
        DeploymentWorkflow.status
    )
    assert {r.cluster for r in moved.replicas} == {"eks-east"}
    assert "gke-central" not in cloud_stack.clouds.gke.cluster_names()
    # The minted token must not outlive its cluster on the worker's disk.
    assert not (cloud_stack.credentials / "gke-central.yaml").exists()
    assert "gke-central" not in cloud_stack.clouds.fleet.clusters
    view = await cloud_stack.client.get_workflow_handle(FLEET_ID).query(FleetWorkflow.view)
    assert "gke-central" not in {c.spec.name for c in view.clusters}


async def test_quota_on_the_second_pool_rolls_everything_back(cloud_stack: CloudStack) -> None:
    spec = CLUSTERS["gke-central"]
    first = spec.spec.node_pools[0]
    second = first.model_copy(update={"name": "gpu-more"})
    meta = spec.metadata.model_copy(update={"name": "gke-quota"})
    doomed = spec.model_copy(
        update={
            "metadata": meta,
            "spec": spec.spec.model_copy(update={"node_pools": [first, second]}),
        }
    )
    cloud_stack.clouds.gke.faults.add(
        CloudFault(
            operation="createNodePool",
            target="gpu-more",
            error=ErrorKind.QUOTA,
            stage=FaultStage.OPERATION,
        )
    )
    await apply_resource(cloud_stack.client, doomed)
    status = await cloud_stack.wait_phase("gke-quota", "Failed")
    assert "QuotaExceeded" in status.reason
    assert "request a quota increase" in status.reason
    assert "gpu-more" in status.reason
    assert "cleanup incomplete" not in status.reason
    assert "gke-quota" not in cloud_stack.clouds.gke.cluster_names()
    assert "gke-quota" not in cloud_stack.clouds.fleet.clusters
    calls = [c for c in cloud_stack.clouds.gke.calls if not c.startswith("get")]
    assert calls[-3:] == [
        "deleteNodePool gpu-more",
        "deleteNodePool gpu-h100",
        "deleteCluster gke-quota",
    ]


async def test_a_transient_503_is_retried(cloud_stack: CloudStack) -> None:
    spec = CLUSTERS["gke-central"]
    flaky = renamed(spec, "gke-flaky")
    cloud_stack.clouds.gke.faults.add(
        CloudFault(operation="createNodePool", error=ErrorKind.UNAVAILABLE, times=2)
    )
    await apply_resource(cloud_stack.client, flaky)
    await cloud_stack.wait_phase("gke-flaky", "Ready")
    assert cloud_stack.clouds.gke.calls.count("createNodePool gpu-h100") >= 3
    assert cloud_stack.clouds.gke.pool_names("gke-flaky") == ["gpu-h100", "system"]


async def test_apply_adds_resizes_and_removes_pools_but_not_one_with_replicas(
    cloud_stack: CloudStack,
) -> None:
    # eks-east runs on-eks and on-gke (moved there by the delete test): its pool stays.
    eks_east = CLUSTERS["eks-east"]
    renamed_pool = eks_east.spec.node_pools[0].model_copy(update={"name": "gpu-h200-new"})
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await apply_resource(
            cloud_stack.client,
            eks_east.model_copy(
                update={"spec": eks_east.spec.model_copy(update={"node_pools": [renamed_pool]})}
            ),
        )
    reason = rejection_reason(refused.value)
    assert "pool gpu-h200 runs eks-team/" in reason
    assert "gke-team/" in reason
    # gke-flaky (from the test above): a fixed-size gpu-h100 of 2 nodes, and a new pool.
    spec = renamed(CLUSTERS["gke-central"], "gke-flaky")
    first = spec.spec.node_pools[0]
    fixed = first.model_copy(
        update={"node_count": 2, "min_node_count": None, "max_node_count": None}
    )
    extra = fixed.model_copy(update={"name": "gpu-extra", "node_count": 1})

    def with_pools(*pools: Any) -> Any:
        return spec.model_copy(
            update={"spec": spec.spec.model_copy(update={"node_pools": list(pools)})}
        )

    async def pools_match(message: str) -> ClusterStatus | None:
        status = await cloud_stack.cluster("gke-flaky")
        found = [c for c in status.conditions if c.type == "NodePools"]
        return (
            status if found and found[0].status == "True" and found[0].message == message else None
        )

    await apply_resource(cloud_stack.client, with_pools(fixed, extra))
    await wait_for(lambda: pools_match("created gpu-extra; resized gpu-h100"), 90, "pools changed")
    gke = cloud_stack.clouds.gke
    assert gke.pool_names("gke-flaky") == ["gpu-extra", "gpu-h100", "system"]
    assert "autoscaling" not in gke.pool("gke-flaky", "gpu-h100") or not gke.pool(
        "gke-flaky", "gpu-h100"
    )["autoscaling"].get("enabled")
    assert len(cloud_stack.pool_nodes("gke-flaky", "gpu-h100")) == 2
    assert len(cloud_stack.pool_nodes("gke-flaky", "gpu-extra")) == 1

    async def observed() -> ClusterStatus | None:
        status = await cloud_stack.cluster("gke-flaky")
        pools = status.observed_pools
        ok = pools.get("gpu-h100") and pools["gpu-h100"].ready_nodes == 2 and "gpu-extra" in pools
        return status if ok else None

    await wait_for(observed, 60, "the new nodes to be published")
    # Removed (nothing runs there): the cloud pool and its nodes go.
    await apply_resource(cloud_stack.client, with_pools(fixed))
    await wait_for(lambda: pools_match("deleted gpu-extra"), 90, "gpu-extra deleted")
    assert gke.pool_names("gke-flaky") == ["gpu-h100", "system"]
    assert cloud_stack.pool_nodes("gke-flaky", "gpu-extra") == []
    handle = cloud_stack.client.get_workflow_handle(
        cluster_id("gke-flaky"), result_type=ClusterStatus
    )
    await handle.execute_update(ClusterWorkflow.delete)
    await asyncio.wait_for(handle.result(), 120)
    assert "gke-flaky" not in gke.cluster_names()


def _credentials(stack: CloudStack) -> dict[str, bytes]:
    """The cloud credentials the worker holds and the tokens it minted into kubeconfigs."""
    tokens = {
        "GKE access token": SIM_GKE_TOKEN.encode(),
        "AWS secret": SIM_AWS_SECRET.encode(),
        "AWS access key id": SIM_AWS_KEY.encode(),
    }
    for path in stack.credentials.glob("*.yaml"):
        text = path.read_text()
        for line in text.splitlines():
            if "token:" in line:
                tokens[f"kubeconfig token of {path.name}"] = (
                    line.split("token:")[1].strip().encode()
                )
    assert any("eks-east" in k for k in tokens), "the EKS kubeconfig must have been written"
    return tokens


async def test_no_cloud_credential_or_token_in_any_history(cloud_stack: CloudStack) -> None:
    # Runs after the provisioning tests of this module (declared order), over every history.
    tokens = _credentials(cloud_stack)
    del tokens["AWS access key id"]  # an identifier, not a secret: histories may name it
    blobs = []
    async for execution in cloud_stack.client.list_workflows():
        handle = cloud_stack.client.get_workflow_handle(execution.id, run_id=execution.run_id)
        history = json.loads((await handle.fetch_history()).to_json())
        blob = haystack(history)
        assert_absent(tokens, f"the history of {execution.id}", blob)
        blobs.append(blob)
    # The scan sees payloads and failure messages: it finds what is meant to be there.
    everything = b"".join(blobs)
    assert b"gke.create_node_pool" in everything
    assert b"a3-highgpu-8g" in everything
    assert b"CloudQuotaExceeded" in everything
    assert b"CloudUnavailable" in everything


async def test_no_credential_in_the_worker_log_at_debug(
    cloud_stack: CloudStack, debug_log: io.StringIO
) -> None:
    """Issue 29: botocore printed signed Authorization headers at DEBUG. Runs last (declared
    order), over the DEBUG log of every provisioning, deletion and failure above."""
    output = debug_log.getvalue().encode()
    assert_absent(_credentials(cloud_stack), "the worker's DEBUG log", output)
    assert b"AWS4-HMAC-SHA256 Credential" not in output
    # The scan sees the SDKs' DEBUG lines, request headers among them: what is meant to be there.
    assert b"botocore" in output
    assert b"Authorization" in output
    assert b"eks-east" in output
    assert b"[REDACTED]" in output  # there was credential material, and it was taken out
