"""Node pool changes of a provisioned InferenceCluster, run inside its workflow: plan the
declared pools from their classes, list what the cloud holds, diff (the pure
:func:`~modelfleet.cluster.plan.diff_pools`), refuse to delete a pool that still runs
replicas (the Fleet knows which), then create, resize and delete through the cloud activities.
Deterministic orchestration only.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from modelfleet.api.clusters import ClusterSource, InferenceCluster
    from modelfleet.cluster.plan import diff_pools, removal_refused
    from modelfleet.cluster.provisioning import Provisioner, describe
    from modelfleet.contracts.activity_names import FLEET_REPLICAS_BY_POOL
    from modelfleet.contracts.cloud_payloads import ProvisioningState


async def replicas_by_pool(cluster: str) -> dict[str, list[str]]:
    """Per node pool of ``cluster``, the replicas the Fleet has placed on it."""
    found: dict[str, list[str]] = await workflow.execute_activity(
        FLEET_REPLICAS_BY_POOL,
        cluster,
        result_type=dict[str, list[str]],
        start_to_close_timeout=timedelta(seconds=30),
        summary="replicas per node pool",
    )
    return found


async def reconcile_pools(
    spec: InferenceCluster, state: ProvisioningState, nodes: Mapping[str, int]
) -> tuple[str, str, str]:
    """Carry out the pool changes; the NodePools condition's (status, reason, message).
    ``nodes``: the nodes per pool the cluster's last probe saw registered."""
    prov = Provisioner(spec, state, timedelta(hours=1))
    plans, problems = prov.plan(await prov.classes())
    if problems:
        return "False", "WaitingForClasses", "; ".join(problems)
    try:
        observed = await prov.list_pools()
        if spec.spec.cluster.source is ClusterSource.GKE:
            # A GKE node pool reports the size it was created with, never its resizes: the
            # nodes the cluster has registered are the size a fixed pool really has.
            observed = [
                s.model_copy(update={"node_count": nodes[s.name]}) if s.name in nodes else s
                for s in observed
            ]
        changes = diff_pools(spec.spec.cluster.source, plans, observed, prov.ours())
        if changes.delete:
            refused = removal_refused(changes.delete, await replicas_by_pool(spec.name))
            if refused is not None:
                return "False", "PoolInUse", refused
        if changes:
            workflow.set_current_details(f"**Changing pools** · {changes.summary()}")
        await prov.change_pools(changes)
    except ActivityError as exc:
        return "False", "PoolChangeFailed", describe(exc)
    return "True", "PoolsMatchSpec", changes.summary()
