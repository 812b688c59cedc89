"""Teardown deletes what carries the replica's label, not only what today's render names: an
object of the replica left under another name (as a renderer rename would leave it) is gone
after the deployment is deleted, on the real dev server and the simulated fleet."""

from __future__ import annotations

import asyncio

from integration_support import Stack, delete_deployment, deployment

from modelfleet.api.naming import LABEL_NAMESPACE, LABEL_REPLICA
from modelfleet.cli.apply import apply_resource
from modelfleet.contracts.status import ReplicaPhase


async def test_delete_sweeps_an_object_applied_under_an_old_name(stack: Stack) -> None:
    ns = "sweep"
    await apply_resource(stack.client, deployment("m", ns))
    status = await stack.wait_status(
        ns, "m", lambda s: s.ready == 1 and s.replicas[0].phase is ReplicaPhase.READY
    )
    replica = status.replicas[0]
    objects = stack.objects_of(ns, replica.cluster)
    workload = next(o for o in objects if o["kind"] == "Deployment")
    stray = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": f"{workload['metadata']['name']}-v0",
            "namespace": workload["metadata"]["namespace"],
            "labels": {LABEL_REPLICA: replica.name, LABEL_NAMESPACE: ns},
        },
        "spec": workload["spec"],
    }
    # The client is synchronous and the simulated API server runs on this event loop.
    await asyncio.to_thread(stack.kube(replica.cluster).apply, stray)
    assert any(o["metadata"]["name"].endswith("-v0") for o in stack.objects_of(ns, replica.cluster))

    await delete_deployment(stack, ns, "m")
    assert stack.objects_of(ns, replica.cluster) == []
