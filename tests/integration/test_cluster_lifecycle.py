"""InferenceCluster lifecycle: an Existing cluster joins the fleet (probed, pools published) and,
when deleted, is drained (its replicas move away and its objects are deleted) before it leaves."""

from __future__ import annotations

import asyncio

from integration_support import Stack, deployment, wait_for

from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.kinds import parse_resource
from modelfleet.cli.apply import apply_resource
from modelfleet.cluster.workflow import ClusterWorkflow
from modelfleet.contracts.ids import cluster_id
from modelfleet.contracts.status import DeploymentStatus, ReplicaPhase


def _cluster(name: str) -> InferenceCluster:
    resource = parse_resource(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "InferenceCluster",
            "metadata": {"name": name, "labels": {"lifecycle": name}},
            "spec": {
                "cluster": {"source": "Existing"},
                "nodePools": [{"name": "gpu-l4", "className": "l4", "nodeCount": 1}],
            },
        }
    )
    assert isinstance(resource, InferenceCluster)
    return resource


async def test_cluster_joins_then_drains_on_delete(stack: Stack) -> None:
    name = "drain-me"
    cluster = _cluster(name)
    classes = {c.name: c for c in stack.env.resources if c.KIND == "InferenceClass"}
    await stack.fleet.add_cluster(cluster, classes)  # type: ignore[arg-type]
    await apply_resource(stack.client, cluster)

    async def joined() -> bool | None:
        view = await stack.fleet_view()
        record = next((c for c in view.clusters if c.spec.name == name), None)
        if record is None or not record.ready:
            return None
        assert record.observed_pools["gpu-l4"].nodes == 1
        return True

    await wait_for(joined, 60, f"{name} to be probed and published Ready")

    ns = "lifecycle"
    doc = deployment("m", ns).to_wire()
    doc["spec"]["template"]["spec"]["clusterSelector"] = {"matchLabels": {"lifecycle": name}}
    pinned = parse_resource(doc)
    await apply_resource(stack.client, pinned)

    def on_cluster(s: DeploymentStatus) -> bool:
        return [(r.cluster, r.phase) for r in s.replicas] == [(name, ReplicaPhase.READY)]

    await stack.wait_status(ns, "m", on_cluster)
    assert stack.objects_of(ns, name)

    handle = stack.client.get_workflow_handle_for(ClusterWorkflow.run, cluster_id(name))
    await handle.execute_update(ClusterWorkflow.delete)
    try:
        final = await asyncio.wait_for(handle.result(), 120)
    except TimeoutError:
        status = await handle.query(ClusterWorkflow.status)
        raise AssertionError(f"the drain did not finish: {status}") from None
    assert final.phase == "Deleting"
    # Drained: the replica's objects are gone, nothing of the deployment is left on the
    # cluster, and the fleet no longer knows the cluster or any replica on it.
    assert stack.objects_of(ns, name) == []
    view = await stack.fleet_view()
    assert name not in [c.spec.name for c in view.clusters]
    assert not [r for r in view.replicas if r.spec.cluster_name == name]
    # No other cluster matches the selector: the deployment says so instead of pretending.
    status = await stack.wait_status(ns, "m", lambda s: not s.replicas)
    scheduled = next(c for c in status.conditions if c.type == "ReplicasScheduled")
    assert scheduled.status == "False"
