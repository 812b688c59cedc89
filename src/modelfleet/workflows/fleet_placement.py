"""How the Fleet workflow turns its state into a scheduler snapshot and a placement answer.

Pure and deterministic (it runs inside the Fleet workflow): live capacity comes from what each
cluster's workflow observed (ready nodes per pool), falling back to the declared capacity until
a cluster has been probed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from modelfleet.activities.contracts import PlaceRequest, PlaceResponse, Victim
from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import Taint, TaintEffect
from modelfleet.api.deployments import ModelReplica
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.scheduling.explain import NOT_READY, summarize
from modelfleet.scheduling.placement import place
from modelfleet.scheduling.snapshot import (
    ClusterSnapshot,
    FleetSnapshot,
    MissingClass,
    PoolSnapshot,
)
from modelfleet.workflows.status import ClusterRecord

DRAINING_TAINT = Taint(key="modelfleet.dev/draining", value="true", effect=TaintEffect.NO_EXECUTE)
# One evaluator for every placement in the worker process: compiled selectors and their results
# per device are pure, so sharing them across workflow runs is safe and saves recompiling CEL
# (lark parsing) on every placement.
_EVALUATOR = SelectorEvaluator()


def fleet_snapshot(
    classes: Mapping[str, InferenceClass],
    clusters: Mapping[str, ClusterRecord],
    *,
    gone: Collection[str] = (),
    avoid: Collection[str] = (),
) -> FleetSnapshot:
    snapshot = FleetSnapshot()
    for name in sorted(clusters):
        if name in gone:
            continue  # NotReady past its grace period: its replicas are re-placed elsewhere
        record = clusters[name]
        spec = record.spec
        observed = record.observed_pools
        pools: list[PoolSnapshot] = []
        for pool in spec.spec.node_pools:
            cls = classes.get(pool.class_name)
            if cls is None:
                snapshot.missing_classes.append(
                    MissingClass(cluster=name, pool=pool.name, class_name=pool.class_name)
                )
                continue
            if observed:
                seen = observed.get(pool.name)
                nodes = min(seen.ready_nodes, pool.capacity_nodes) if seen else 0
            else:
                nodes = pool.capacity_nodes
            pools.append(
                PoolSnapshot(
                    name=pool.name,
                    class_name=pool.class_name,
                    nodes=nodes,
                    devices=list(cls.spec.devices),
                )
            )
        taints = list(spec.spec.taints)
        if record.draining:
            # A drain evicts like a NoExecute taint: replicas move, and with nowhere else to go
            # they are removed (not frozen in place as a bad selector would be).
            taints.append(DRAINING_TAINT)
        snapshot.clusters.append(
            ClusterSnapshot(
                name=name,
                labels=dict(spec.metadata.labels),
                taints=taints,
                ready=record.ready and name not in avoid,
                gateway_address=record.gateway_address,
                pools=pools,
            )
        )
    return snapshot


def run_placement(
    request: PlaceRequest,
    *,
    classes: Mapping[str, InferenceClass],
    clusters: Mapping[str, ClusterRecord],
    replicas: Sequence[ModelReplica],
    gone_clusters: Collection[str] = (),
) -> PlaceResponse:
    snapshot = fleet_snapshot(
        classes, clusters, gone=gone_clusters, avoid=set(request.avoid_clusters)
    )
    result = place(
        request.deployment, snapshot, replicas, desired=request.desired, evaluator=_EVALUATOR
    )
    rejections = dict(result.rejections)
    for cluster in request.avoid_clusters:
        # The scheduler saw an avoided cluster as not Ready; say why it really got nothing.
        if rejections.get(cluster, NOT_READY) == NOT_READY:
            why = request.avoid_reasons.get(cluster, "a replica failed here recently")
            rejections[cluster] = f"avoided for a while: {why}"
    summary, conditions = result.summary, list(result.conditions)
    if summary and rejections != result.rejections:
        summary = summarize(len(snapshot.clusters), 0, rejections)
        conditions = [
            c.model_copy(update={"message": c.message.replace(result.summary, summary)})
            for c in conditions
        ]
    return PlaceResponse(
        kept=list(result.kept),
        placed=list(result.placed),
        victims=[
            Victim(replica=v.replica, reason=v.message or v.reason.value) for v in result.victims
        ],
        conditions=conditions,
        rejections=rejections,
        summary=summary,
    )
