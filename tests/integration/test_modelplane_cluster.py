"""A cluster prepared for Modelplane works unchanged (issue 14 items 4 and 5): declared with a
``modelplane.ai/v1alpha1`` document whose kubeconfig is named by ``existing.secretRef`` (and found
by the worker only under that name), its pools labelled ``modelplane.ai/pool`` and its Gateway in
``modelplane-system``, it is probed Ready with its pools counted, and a deployment lands on it
with workloads pinned by that label and routes attached to that Gateway."""

from __future__ import annotations

from integration_support import Stack, deployment, wait_for

from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.kinds import parse_resource
from modelfleet.cli.apply import apply_resource
from modelfleet.contracts.status import DeploymentStatus, ReplicaPhase


def _cluster(name: str, secret: str) -> InferenceCluster:
    resource = parse_resource(
        {
            "apiVersion": "modelplane.ai/v1alpha1",
            "kind": "InferenceCluster",
            "metadata": {"name": name, "labels": {"prepared-for": name}},
            "spec": {
                "cluster": {"source": "Existing", "existing": {"secretRef": {"name": secret}}},
                "nodePools": [{"name": "gpu-l4", "className": "l4", "nodeCount": 1}],
            },
        }
    )
    assert isinstance(resource, InferenceCluster)
    return resource


async def test_a_cluster_prepared_for_modelplane_serves_unchanged(stack: Stack) -> None:
    name, secret = "modelplane-byo", "modelplane-byo-kubeconfig"
    cluster = _cluster(name, secret)
    classes = {c.name: c for c in stack.env.resources if c.KIND == "InferenceClass"}
    await stack.fleet.add_cluster(cluster, classes)  # type: ignore[arg-type]
    # The simulated fleet also writes the kubeconfig as a Secret mounted under the secretRef's
    # name; without the one named after the cluster, the worker can find it only there.
    by_cluster = stack.fleet.kubeconfig(name)
    mounted = by_cluster.parent / secret / "kubeconfig"
    assert mounted.is_file()
    by_cluster.unlink()
    store = stack.fleet.store(name)
    (node_type,) = [rt for rt in store.registry if rt.kind == "Node"]
    labels = [n["metadata"].get("labels") or {} for n in store.list_objects(node_type).items]
    pinned = [node.get("modelplane.ai/pool") for node in labels]
    # The pool's node carries Modelplane's pool label, as its operator labelled it for Modelplane.
    assert pinned.count("gpu-l4") == 1
    assert not [node for node in labels if "modelfleet.dev/pool" in node]

    await apply_resource(stack.client, cluster)

    async def joined() -> bool | None:
        view = await stack.fleet_view()
        record = next((c for c in view.clusters if c.spec.name == name), None)
        if record is None or not record.ready:
            return None
        assert record.observed_pools["gpu-l4"].nodes == 1
        return True

    await wait_for(joined, 60, f"{name} to be probed Ready through its secretRef")

    ns = "prepared"
    doc = deployment("m", ns).to_wire()
    doc["spec"]["template"]["spec"]["clusterSelector"] = {"matchLabels": {"prepared-for": name}}
    await apply_resource(stack.client, parse_resource(doc))

    def ready_there(s: DeploymentStatus) -> bool:
        return [(r.cluster, r.phase) for r in s.replicas] == [(name, ReplicaPhase.READY)]

    await stack.wait_status(ns, "m", ready_there)
    objects = stack.objects_of(ns, name)
    (workload,) = [
        o
        for o in objects
        if o["kind"] == "Deployment" and not o["metadata"]["name"].endswith("-epp")
    ]
    selector = workload["spec"]["template"]["spec"]["nodeSelector"]
    assert selector == {"modelplane.ai/pool": "gpu-l4"}
    (route,) = [o for o in objects if o["kind"] == "HTTPRoute"]
    assert route["spec"]["parentRefs"][0]["namespace"] == "modelplane-system"
