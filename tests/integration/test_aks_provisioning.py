"""AKS provisioning end to end: the real Temporal dev server, a worker whose AKS adapter reaches
the simulated Azure Resource Manager through the official SDK (azure-mgmt-containerservice with
a static ARM token, over HTTP), and the emulated Kubernetes cluster that AKS fake creates.
``examples/provisioning/aks.yaml`` provisions to Ready and a deployment runs there; a cloud that
says no (quota on the second agent pool, a stockout of the cluster's VM size) is compensated in
reverse with nothing left behind; a delete deprovisions; no Azure token reaches a history."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from cloud_support import CLUSTERS, CloudStack, captured_debug_log, cloud_environment, renamed
from integration_support import deployment, wait_for
from test_no_secrets import assert_absent, haystack

from modelfleet.cli.apply import apply_resource
from modelfleet.cluster.workflow import ClusterWorkflow
from modelfleet.contracts.ids import FLEET_ID, cluster_id, deployment_id
from modelfleet.contracts.status import ClusterStatus, DeploymentStatus
from modelfleet.deployment.workflow import DeploymentWorkflow
from modelfleet.fleet.workflow import FleetWorkflow
from modelfleet.sim.clouds.clouds import SIM_AZURE_TOKEN
from modelfleet.sim.clouds.faults import CloudFault, ErrorKind, FaultStage


@pytest.fixture(scope="module")
def debug_log() -> Iterator[io.StringIO]:
    """The worker's log at DEBUG (azure-core's HTTP logging included) for the whole module."""
    with captured_debug_log() as buffer:
        yield buffer


@pytest_asyncio.fixture(scope="module")
async def cloud_stack(
    tmp_path_factory: pytest.TempPathFactory, debug_log: io.StringIO
) -> AsyncIterator[CloudStack]:
    async with cloud_environment(tmp_path_factory.mktemp("aks")) as stack:
        yield stack


def _mutations(stack: CloudStack, since: int = 0) -> list[str]:
    return stack.clouds.aks.calls[since:]


async def test_aks_example_provisions_to_ready_and_a_deployment_runs_there(
    cloud_stack: CloudStack,
) -> None:
    await apply_resource(cloud_stack.client, CLUSTERS["aks-east"])
    status = await cloud_stack.wait_phase("aks-east", "Ready")
    assert status.observed_pools["gpuh100"].ready_nodes == 1
    aks = cloud_stack.clouds.aks
    assert aks.cluster_names() == ["aks-east"]
    assert aks.pool_names("aks-east") == ["gpuh100", "system"]
    props = aks.pool("aks-east", "gpuh100")["properties"]
    assert props["vmSize"] == "Standard_ND96isr_H100_v5"
    assert props["gpuProfile"] == {"driver": "Install"}
    assert (props["minCount"], props["maxCount"], props["availabilityZones"]) == (1, 3, ["1"])
    (node,) = cloud_stack.pool_nodes("aks-east", "gpuh100")
    assert node["metadata"]["labels"]["kubernetes.azure.com/agentpool"] == "gpuh100"
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in node["spec"][
        "taints"
    ]
    # The kubeconfig AKS handed out is on the worker, in its own credentials directory.
    assert (cloud_stack.credentials / "aks-east.yaml").is_file()
    steps = [s.name for s in status.steps]
    assert steps[:3] == [
        "create cluster aks-east",
        "create agent pool gpuh100",
        "write kubeconfig on the worker",
    ]

    await apply_resource(cloud_stack.client, deployment("on-aks", "aks-team", memory="70Gi"))
    handle = cloud_stack.client.get_workflow_handle(deployment_id("aks-team", "on-aks"))

    async def ready() -> DeploymentStatus | None:
        found: DeploymentStatus = await handle.query(DeploymentWorkflow.status)
        return found if found.ready == 1 else None

    landed = await wait_for(ready, 90, "aks-team/on-aks to be Ready")
    assert {r.cluster for r in landed.replicas} == {"aks-east"}


async def test_apply_changes_an_agent_pools_bounds(cloud_stack: CloudStack) -> None:
    spec = CLUSTERS["aks-east"]
    pool = spec.spec.node_pools[0].model_copy(update={"min_node_count": 2, "max_node_count": 5})
    await apply_resource(
        cloud_stack.client,
        spec.model_copy(update={"spec": spec.spec.model_copy(update={"node_pools": [pool]})}),
    )

    async def resized() -> ClusterStatus | None:
        status = await cloud_stack.cluster("aks-east")
        found = [c for c in status.conditions if c.type == "NodePools"]
        done = found and found[0].status == "True" and found[0].message == "resized gpuh100"
        return status if done else None

    await wait_for(resized, 90, "the agent pool's bounds to change")
    props = cloud_stack.clouds.aks.pool("aks-east", "gpuh100")["properties"]
    assert (props["minCount"], props["maxCount"], props["count"]) == (2, 5, 2)
    assert len(cloud_stack.pool_nodes("aks-east", "gpuh100")) == 2


async def test_quota_on_the_second_agent_pool_rolls_everything_back(
    cloud_stack: CloudStack,
) -> None:
    spec = CLUSTERS["aks-east"]
    first = spec.spec.node_pools[0]
    second = first.model_copy(update={"name": "gpumore"})
    doomed = renamed(spec, "aks-quota")
    doomed = doomed.model_copy(
        update={"spec": doomed.spec.model_copy(update={"node_pools": [first, second]})}
    )
    cloud_stack.clouds.aks.faults.add(
        CloudFault(
            operation="AgentPools_CreateOrUpdate",
            target="gpumore",
            error=ErrorKind.QUOTA,
            stage=FaultStage.OPERATION,
        )
    )
    since = len(cloud_stack.clouds.aks.calls)
    await apply_resource(cloud_stack.client, doomed)
    status = await cloud_stack.wait_phase("aks-quota", "Failed")
    assert "QuotaExceeded" in status.reason
    assert "Cores quota" in status.reason  # Azure's own words
    assert "request a quota increase" in status.reason
    assert "gpumore" in status.reason
    assert "cleanup incomplete" not in status.reason
    assert "aks-quota" not in cloud_stack.clouds.aks.cluster_names()
    assert "aks-quota" not in cloud_stack.clouds.fleet.clusters
    assert _mutations(cloud_stack, since) == [
        "ManagedClusters_CreateOrUpdate aks-quota",
        "AgentPools_CreateOrUpdate gpuh100",
        "AgentPools_CreateOrUpdate gpumore",
        # Compensation, newest first.
        "AgentPools_Delete gpumore",
        "AgentPools_Delete gpuh100",
        "ManagedClusters_Delete aks-quota",
    ]


async def test_a_stockout_of_the_cluster_leaves_nothing_behind(cloud_stack: CloudStack) -> None:
    cloud_stack.clouds.aks.faults.add(
        CloudFault(
            operation="ManagedClusters_CreateOrUpdate",
            target="aks-stockout",
            error=ErrorKind.STOCKOUT,
            stage=FaultStage.OPERATION,
        )
    )
    await apply_resource(cloud_stack.client, renamed(CLUSTERS["aks-east"], "aks-stockout"))
    status = await cloud_stack.wait_phase("aks-stockout", "Failed")
    assert "Stockout" in status.reason
    assert "ZonalAllocationFailed" in status.reason
    assert "a quota increase will not help" in status.reason
    assert "cleanup incomplete" not in status.reason
    assert "aks-stockout" not in cloud_stack.clouds.aks.cluster_names()
    assert "aks-stockout" not in cloud_stack.clouds.fleet.clusters
    assert not (cloud_stack.credentials / "aks-stockout.yaml").exists()


async def test_delete_deprovisions_and_unpublishes(cloud_stack: CloudStack) -> None:
    handle = cloud_stack.client.get_workflow_handle(deployment_id("aks-team", "on-aks"))
    await handle.execute_update(DeploymentWorkflow.delete)
    await asyncio.wait_for(handle.result(), 60)
    cluster = cloud_stack.client.get_workflow_handle(
        cluster_id("aks-east"), result_type=ClusterStatus
    )
    since = len(cloud_stack.clouds.aks.calls)
    await cluster.execute_update(ClusterWorkflow.delete)
    final: ClusterStatus = await asyncio.wait_for(cluster.result(), 120)
    assert final.reason == "deleted"
    # The pool then the cluster, as they were created in reverse.
    assert _mutations(cloud_stack, since) == [
        "AgentPools_Delete gpuh100",
        "ManagedClusters_Delete aks-east",
    ]
    assert cloud_stack.clouds.aks.cluster_names() == []
    assert "aks-east" not in cloud_stack.clouds.fleet.clusters
    # The credential AKS handed out does not outlive its cluster on the worker's disk.
    assert not (cloud_stack.credentials / "aks-east.yaml").exists()
    view = await cloud_stack.client.get_workflow_handle(FLEET_ID).query(FleetWorkflow.view)
    assert "aks-east" not in {c.spec.name for c in view.clusters}


async def test_no_azure_token_in_any_history(cloud_stack: CloudStack) -> None:
    # Runs after the tests above (declared order), over every history they left.
    tokens = {"Azure ARM token": SIM_AZURE_TOKEN.encode(), "kubeconfig token": b"sim-aks-user"}
    blobs = []
    async for execution in cloud_stack.client.list_workflows():
        handle = cloud_stack.client.get_workflow_handle(execution.id, run_id=execution.run_id)
        history = json.loads((await handle.fetch_history()).to_json())
        blob = haystack(history)
        assert_absent(tokens, f"the history of {execution.id}", blob)
        blobs.append(blob)
    everything = b"".join(blobs)
    assert b"aks.create_agent_pool" in everything
    assert b"Standard_ND96isr_H100_v5" in everything
    assert b"CloudQuotaExceeded" in everything


async def test_no_azure_token_in_the_worker_log_at_debug(
    cloud_stack: CloudStack, debug_log: io.StringIO
) -> None:
    """Runs last (declared order), over the DEBUG log of everything above."""
    output = debug_log.getvalue().encode()
    assert_absent(
        {"Azure ARM token": SIM_AZURE_TOKEN.encode(), "kubeconfig token": b"sim-aks-user"},
        "the worker's DEBUG log",
        output,
    )
    # The scan sees the SDK's DEBUG lines, request headers among them.
    assert b"azure.core" in output
    assert b"Authorization" in output
    assert b"aks-east" in output
