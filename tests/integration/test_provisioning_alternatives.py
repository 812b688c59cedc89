"""Provisioning alternatives end to end (issue 25 item 2): the simulated GKE has no capacity in
us-central1-a (and none of a3-highgpu-8g in us-central1-f), the simulated EKS none of
p5en.48xlarge in us-east-2b, the simulated AKS none of Standard_ND96isr_H100_v5 in zone 1, set in
their configuration; a pool created there fails as the cloud reports it (GKE's operation ends
ZONE_RESOURCE_POOL_EXHAUSTED, EKS's node group CREATE_FAILED with InsufficientInstanceCapacity,
AKS's operation ZonalAllocationFailed). A pool
whose ``fallbacks`` name another zone is created there instead, after the stocked-out attempt
is deleted, and every attempt is a step of ``rollout status cluster/NAME`` and ``describe``;
when every alternative is stocked out the cluster fails with a clear reason and nothing is left
in the cloud."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from cloud_support import CLUSTERS, CloudStack, cloud_environment, renamed
from test_cli_kubectl import run

from modelfleet.api.clusters import InferenceCluster
from modelfleet.cli.apply import apply_resource

STOCKOUTS = {
    "gke": [
        {"zone": "us-central1-a"},
        {"zone": "us-central1-f", "machine": "a3-highgpu-8g"},
    ],
    "eks": [{"zone": "us-east-2b", "machine": "p5en.48xlarge"}],
    "aks": [{"zone": "1", "machine": "Standard_ND96isr_H100_v5"}],
}


@pytest_asyncio.fixture(scope="module")
async def cloud_stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CloudStack]:
    async with cloud_environment(
        tmp_path_factory.mktemp("alternatives"), stockouts=STOCKOUTS
    ) as stack:
        yield stack


def with_fallbacks(name: str, *fallbacks: dict[str, Any]) -> InferenceCluster:
    spec = renamed(CLUSTERS["gke-central"], name)
    (pool,) = spec.spec.node_pools
    doc = spec.to_wire()
    doc["spec"]["nodePools"][0]["fallbacks"] = list(fallbacks)
    assert pool.zones == ["us-central1-a"]
    return InferenceCluster.model_validate(doc)


def cloud_calls(stack: CloudStack, cluster: str) -> list[str]:
    """The GKE fake's pool and cluster calls (not its reads) since ``cluster`` was created."""
    calls = stack.clouds.gke.calls
    start = calls.index(f"createCluster {cluster}")
    return [c for c in calls[start:] if not c.startswith("get")]


async def test_a_stockout_is_answered_by_the_next_zone(cloud_stack: CloudStack) -> None:
    address = cloud_stack.client.service_client.config.target_host
    spec = with_fallbacks("gke-alt", {"zones": ["us-central1-f"]}, {"zones": ["us-central1-b"]})
    await apply_resource(cloud_stack.client, spec)
    code, out, err = await run(address, "rollout", "status", "cluster/gke-alt", "--timeout", "120")
    assert code == 0, out + err
    attempt = "create node pool gpu-h100 in {} as gke-a3-highgpu-8g"
    assert f"failed  {attempt.format('us-central1-a')}" in out
    assert "ZONE_RESOURCE_POOL_EXHAUSTED" in out
    assert f"failed  {attempt.format('us-central1-f')}" in out
    assert out.count("done    delete node pool gpu-h100 (stocked out)") == 2
    assert f"done    {attempt.format('us-central1-b')}" in out
    assert out.rstrip().endswith("cluster gke-alt is Ready: probe ok")
    # Each stocked-out attempt was deleted before the next was created.
    pool_calls = [c for c in cloud_calls(cloud_stack, "gke-alt") if "NodePool" in c]
    assert pool_calls[:5] == [
        "createNodePool gpu-h100",
        "deleteNodePool gpu-h100",
        "createNodePool gpu-h100",
        "deleteNodePool gpu-h100",
        "createNodePool gpu-h100",
    ]
    # The pool is Ready in the zone that had capacity, its nodes there.
    assert cloud_stack.clouds.gke.pool_names("gke-alt") == ["gpu-h100", "system"]
    pool = cloud_stack.clouds.gke.pool("gke-alt", "gpu-h100")
    assert (pool["status"], pool["locations"]) == ("RUNNING", ["us-central1-b"])
    nodes = cloud_stack.pool_nodes("gke-alt", "gpu-h100")
    assert nodes
    assert {n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes} == {
        "us-central1-b"
    }
    code, out, err = await run(address, "describe", "cluster", "gke-alt")
    assert code == 0, out + err
    assert attempt.format("us-central1-f") in out
    assert attempt.format("us-central1-b") in out
    code, out, err = await run(address, "delete", "cluster", "gke-alt")
    assert code == 0, out + err


async def test_every_alternative_stocked_out_fails_clearly_and_leaves_nothing(
    cloud_stack: CloudStack,
) -> None:
    address = cloud_stack.client.service_client.config.target_host
    # us-central1-c runs out too, told to the cloud as a user of the simulator would.
    async with httpx.AsyncClient(timeout=10) as http:
        answer = await http.post(
            f"{cloud_stack.clouds.gke_url}/_admin/stockouts", json={"zone": "us-central1-c"}
        )
    assert answer.status_code == 200, answer.text
    assert {"zone": "us-central1-c", "machine": None} in answer.json()
    spec = with_fallbacks("gke-none", {"zones": ["us-central1-f"]}, {"zones": ["us-central1-c"]})
    await apply_resource(cloud_stack.client, spec)
    code, out, err = await run(address, "rollout", "status", "cluster/gke-none", "--timeout", "120")
    assert code == 1, out + err
    assert "every alternative was stocked out (3 tried:" in out
    assert "us-central1-a as gke-a3-highgpu-8g; create node pool gpu-h100 in us-central1-f" in out
    assert "quota increase will not help" in out
    assert "done    delete cluster gke-none" in out
    status = await cloud_stack.cluster("gke-none")
    assert status.phase == "Failed"
    assert "cleanup incomplete" not in status.reason
    # Nothing is left behind: no cluster, no pool, no emulated API server.
    assert "gke-none" not in cloud_stack.clouds.gke.cluster_names()
    assert cloud_stack.clouds.gke.pool_names("gke-none") == []
    assert "gke-none" not in cloud_stack.clouds.fleet.clusters
    pool_calls = [c for c in cloud_calls(cloud_stack, "gke-none") if "NodePool" in c]
    assert pool_calls == [
        "createNodePool gpu-h100",
        "deleteNodePool gpu-h100",
        "createNodePool gpu-h100",
        "deleteNodePool gpu-h100",
        "createNodePool gpu-h100",
        "deleteNodePool gpu-h100",
    ]


async def test_an_eks_stockout_is_answered_by_the_next_zone(cloud_stack: CloudStack) -> None:
    address = cloud_stack.client.service_client.config.target_host
    doc = renamed(CLUSTERS["eks-east"], "eks-alt").to_wire()
    pool = doc["spec"]["nodePools"][0]
    # A Capacity Block holds one zone: a pool that may move has none.
    del pool["capacityBlock"]
    assert pool["zones"] == ["us-east-2b"]
    pool["fallbacks"] = [{"zones": ["us-east-2c"]}]
    await apply_resource(cloud_stack.client, InferenceCluster.model_validate(doc))
    code, out, err = await run(address, "rollout", "status", "cluster/eks-alt", "--timeout", "120")
    assert code == 0, out + err
    attempt = "create node group gpu-h200 in {} as eks-p5en-48xlarge"
    assert f"failed  {attempt.format('us-east-2b')}" in out
    assert "InsufficientInstanceCapacity" in out
    assert "done    delete node group gpu-h200 (stocked out)" in out
    assert f"done    {attempt.format('us-east-2c')}" in out
    nodes = cloud_stack.pool_nodes("eks-alt", "gpu-h200")
    assert len(nodes) == 2
    assert {n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes} == {"us-east-2c"}
    calls = [c for c in cloud_stack.clouds.eks.calls if "Nodegroup eks-alt/gpu-h200" in c]
    assert [c for c in calls if not c.startswith("Describe")] == [
        "CreateNodegroup eks-alt/gpu-h200",
        "DeleteNodegroup eks-alt/gpu-h200",
        "CreateNodegroup eks-alt/gpu-h200",
    ]
    code, out, err = await run(address, "delete", "cluster", "eks-alt")
    assert code == 0, out + err


async def test_an_aks_stockout_is_answered_by_the_next_zone(cloud_stack: CloudStack) -> None:
    address = cloud_stack.client.service_client.config.target_host
    doc = renamed(CLUSTERS["aks-east"], "aks-alt").to_wire()
    pool = doc["spec"]["nodePools"][0]
    assert pool["zones"] == ["1"]
    pool["fallbacks"] = [{"zones": ["2"]}]
    await apply_resource(cloud_stack.client, InferenceCluster.model_validate(doc))
    code, out, err = await run(address, "rollout", "status", "cluster/aks-alt", "--timeout", "120")
    assert code == 0, out + err
    attempt = "create agent pool gpuh100 in {} as aks-nd96isr-h100-v5"
    assert f"failed  {attempt.format('1')}" in out
    assert "ZonalAllocationFailed" in out
    assert "done    delete agent pool gpuh100 (stocked out)" in out
    assert f"done    {attempt.format('2')}" in out
    props = cloud_stack.clouds.aks.pool("aks-alt", "gpuh100")["properties"]
    assert (props["provisioningState"], props["availabilityZones"]) == ("Succeeded", ["2"])
    code, out, err = await run(address, "delete", "cluster", "aks-alt")
    assert code == 0, out + err
