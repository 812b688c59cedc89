"""An adopted (Existing) cluster is published from what its hardware reports (issue 10): the
ResourceSlices of its ready, schedulable nodes, not its class. Its GPUs here report another
product name and less memory than the class declares, and one node is cordoned: the Fleet
counts one node, publishes the real values, places a deployment whose selector only the real
product satisfies, and places none whose selector wants the class's declared product."""

from __future__ import annotations

from integration_support import Stack, delete_deployment, deployment, wait_for

from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelDeployment
from modelfleet.api.kinds import parse_resource
from modelfleet.cli.apply import apply_resource
from modelfleet.cluster.workflow import ClusterWorkflow
from modelfleet.contracts.ids import cluster_id
from modelfleet.contracts.status import ClusterRecord, ClusterStatus, DeploymentStatus

NAME = "real-hw"
REAL_PRODUCT = "NVIDIA L4 (rev B)"
REAL_MEMORY = "22000Mi"


def _cluster() -> InferenceCluster:
    resource = parse_resource(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "InferenceCluster",
            "metadata": {"name": NAME, "labels": {"hardware-test": NAME}},
            "spec": {
                "cluster": {"source": "Existing"},
                "nodePools": [{"name": "gpu-l4", "className": "l4", "nodeCount": 2}],
            },
        }
    )
    assert isinstance(resource, InferenceCluster)
    return resource


def _wanting(name: str, product: str) -> ModelDeployment:
    doc = deployment(name, "hardware").to_wire()
    template = doc["spec"]["template"]["spec"]
    template["clusterSelector"] = {"matchLabels": {"hardware-test": NAME}}
    device = template["engines"][0]["members"][0]["nodeSelector"]["devices"][0]
    device["selectors"] = [
        {"cel": f'device.attributes["gpu.nvidia.com"].productName == "{product}"'}
    ]
    resource = parse_resource(doc)
    assert isinstance(resource, ModelDeployment)
    return resource


async def test_an_adopted_cluster_publishes_and_places_on_what_its_slices_say(
    stack: Stack,
) -> None:
    cluster = _cluster()
    classes = {c.name: c for c in stack.env.resources if c.KIND == "InferenceClass"}
    await stack.fleet.add_cluster(cluster, classes)  # type: ignore[arg-type]
    store = stack.fleet.store(NAME)
    # The hardware differs from the recipe, and one node is cordoned.
    for item in await store.list("resource.k8s.io/v1", "ResourceSlice"):
        for device in item["spec"]["devices"]:
            device["attributes"]["productName"] = {"string": REAL_PRODUCT}
            device["capacity"]["memory"] = {"value": REAL_MEMORY}
        await store.update(item)
    await store.patch("v1", "Node", f"{NAME}-gpu-l4-1", {"spec": {"unschedulable": True}})
    await apply_resource(stack.client, cluster)

    async def published() -> ClusterRecord | None:
        view = await stack.fleet_view()
        record = next((c for c in view.clusters if c.spec.name == NAME), None)
        return record if record is not None and record.ready else None

    record = await wait_for(published, 60, f"{NAME} to be published Ready")
    seen = record.observed_pools["gpu-l4"]
    assert (seen.nodes, seen.ready_nodes) == (2, 1)
    assert seen.devices is not None
    (gpus,) = seen.devices
    assert gpus.attributes["productName"].string == REAL_PRODUCT
    assert gpus.capacity["memory"].value == REAL_MEMORY
    # The cluster's own status shows the same (for `describe cluster`).
    handle = stack.client.get_workflow_handle(cluster_id(NAME), result_type=ClusterStatus)
    status: ClusterStatus = await handle.query(ClusterWorkflow.status)
    assert status.observed_pools["gpu-l4"].devices == seen.devices

    # First the class's declared product: the only counted node is free, and still no match.
    await apply_resource(stack.client, _wanting("declared", "NVIDIA L4"))

    def refused(s: DeploymentStatus) -> bool:
        cond = next((c for c in s.conditions if c.type == "ReplicasScheduled"), None)
        return cond is not None and cond.status == "False" and not s.replicas

    declared = await stack.wait_status("hardware", "declared", refused)
    assert declared.rejections[NAME] == "no pool satisfies device 'gpu' of engine 'vllm'"
    await apply_resource(stack.client, _wanting("real", REAL_PRODUCT))

    def placed(s: DeploymentStatus) -> bool:
        return [r.cluster for r in s.replicas] == [NAME]

    await stack.wait_status("hardware", "real", placed)
    for name in ("real", "declared"):
        await delete_deployment(stack, "hardware", name)
    await handle.execute_update(ClusterWorkflow.delete)
    await handle.result()
