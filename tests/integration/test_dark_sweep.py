"""A cluster back from dark is swept of what replicas the Fleet no longer holds there left
behind (issue 16): an object of a replica with no ledger entry, planted on the cluster, is gone
after the cluster goes NotReady and Ready again, while the objects of the replica the ledger
holds there stay. On the real dev server and the simulated fleet (the sim's dark fault)."""

from __future__ import annotations

import asyncio

from integration_support import Stack, delete_deployment, deployment, wait_for

from modelfleet.api.naming import LABEL_MANAGED_BY, LABEL_NAMESPACE, LABEL_REPLICA, MANAGED_BY
from modelfleet.cli.apply import apply_resource
from modelfleet.contracts.status import ReplicaPhase
from modelfleet.sim.faults import FaultConfig


async def test_back_from_dark_removes_a_replica_the_ledger_does_not_hold(stack: Stack) -> None:
    ns = "dark-sweep"
    await apply_resource(stack.client, deployment("m", ns))
    status = await stack.wait_status(
        ns, "m", lambda s: s.ready == 1 and s.replicas[0].phase is ReplicaPhase.READY
    )
    replica = status.replicas[0]
    cluster = replica.cluster
    kept = sorted(o["metadata"]["name"] for o in stack.objects_of(ns, cluster))
    workload_ns = stack.objects_of(ns, cluster)[0]["metadata"]["namespace"]
    ghost_name = "left-by-a-moved-replica"
    ghost = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": ghost_name,
            "namespace": workload_ns,
            "labels": {LABEL_REPLICA: "m-moved", LABEL_NAMESPACE: ns, LABEL_MANAGED_BY: MANAGED_BY},
        },
        "data": {},
    }
    # The client is synchronous and the simulated API server runs on this event loop.
    await asyncio.to_thread(stack.kube(cluster).apply, ghost)
    assert ghost_name in {o["metadata"]["name"] for o in stack.objects_of(ns, cluster)}

    async def cluster_ready(want: bool) -> bool | None:
        view = await stack.fleet_view()
        record = next(c for c in view.clusters if c.spec.name == cluster)
        return True if record.ready == want else None

    stack.fleet.set_faults(cluster, FaultConfig(dark=True, dark_mode="reset"))
    try:
        await wait_for(lambda: cluster_ready(False), 120, f"{cluster} to be NotReady")
    finally:
        stack.fleet.set_faults(cluster, FaultConfig())
    await wait_for(lambda: cluster_ready(True), 60, f"{cluster} to be Ready again")

    async def swept() -> bool | None:
        names = {o["metadata"]["name"] for o in stack.objects_of(ns, cluster)}
        return True if ghost_name not in names else None

    await wait_for(swept, 60, "the moved replica's object to be swept")
    assert sorted(o["metadata"]["name"] for o in stack.objects_of(ns, cluster)) == kept
    assert (await stack.status(ns, "m")).replicas[0].name == replica.name
    await delete_deployment(stack, ns, "m")
    assert stack.objects_of(ns, cluster) == []
