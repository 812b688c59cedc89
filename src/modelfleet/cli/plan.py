"""``modelfleet plan -f PATH...``: where the deployments in some manifests would run, computed
offline by the same placement function the Fleet workflow uses, and what the GKE/EKS/AKS clusters in
them would create and cost per hour (cli/plan_clusters.py).

Every cluster in the manifests is taken as Ready with its pools at ``capacity_nodes``.
Deployments are planned in document order and each plan consumes capacity for the next, as
applying them one after the other would; ModelReplicas in the manifests count as already
running. Not fitting is an answer, not an error: the exit code is 0 unless the manifests are
invalid (2).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import typer

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelDeployment, ModelReplica, PlacedEngine
from modelfleet.api.meta import Resource
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.cli.output import (
    OutputFormat,
    console,
    err_console,
    print_structured,
    print_table,
)
from modelfleet.cli.plan_clusters import cluster_plan_document, plan_clusters, print_cluster_plan
from modelfleet.cli.validate import FilesOption, load_or_exit
from modelfleet.scheduling.placement import Placement, place
from modelfleet.scheduling.snapshot import snapshot_from_manifests
from modelfleet.scheduling.stamp import owned_by

OutputOption = Annotated[
    OutputFormat,
    typer.Option("--output", "-o", help="table (default; wide is the same), json or yaml."),
]


def plan(files: FilesOption, output: OutputOption = OutputFormat.TABLE) -> None:
    """Show where each ModelDeployment would be placed, and why anything does not fit; what
    each GKE/EKS/AKS cluster would create and its hourly cost estimate."""
    loaded = load_or_exit(files)
    plans = plan_resources(loaded.resources)
    clusters = plan_clusters(loaded.resources)
    if output in (OutputFormat.JSON, OutputFormat.YAML):
        document: dict[str, Any] = {"deployments": [plan_document(p) for p in plans]}
        if clusters:
            document["clusters"] = [cluster_plan_document(c) for c in clusters]
        print_structured(document, output)
        return
    for cluster in clusters:
        print_cluster_plan(cluster)
    if not plans and not clusters:
        console.print("No ModelDeployment in the manifests: nothing to plan.")
    for placement in plans:
        print_plan(placement)


def plan_resources(resources: Sequence[Resource]) -> list[Placement]:
    """Plan every ModelDeployment in ``resources`` on the fleet they declare, in order."""
    fleet = snapshot_from_manifests(
        [r for r in resources if isinstance(r, InferenceClass)],
        [r for r in resources if isinstance(r, InferenceCluster)],
    )
    for missing in fleet.missing_classes:
        err_console.print(f"warning: {missing.message}", soft_wrap=True)
    existing = [r for r in resources if isinstance(r, ModelReplica)]
    evaluator = SelectorEvaluator()
    plans: list[Placement] = []
    for deployment in (r for r in resources if isinstance(r, ModelDeployment)):
        placement = place(deployment, fleet, existing, evaluator=evaluator)
        plans.append(placement)
        # What the fleet looks like once this plan is applied, for the next deployment.
        existing = [
            *(r for r in existing if not owned_by(r, deployment)),
            *placement.kept,
            *placement.placed,
        ]
    return plans


def _engine_pool(engine: PlacedEngine) -> str:
    pools = dict.fromkeys(m.node_pool_name for m in engine.members)
    return ",".join(pools)


def _engine_nodes(engine: PlacedEngine) -> int:
    """Pods that hold devices; each sits on one node (sub-node pods may share nodes)."""
    return sum(m.pods * engine.copies for m in engine.members if m.device_requests)


def plan_document(placement: Placement) -> dict[str, Any]:
    """The stable ``-o json|yaml`` shape of one deployment's plan."""
    return {
        "namespace": placement.namespace,
        "name": placement.deployment,
        "desired": placement.desired,
        "scheduled": placement.scheduled,
        "replicas": [
            {
                "name": replica.name,
                "cluster": replica.spec.cluster_name,
                "engines": [
                    {
                        "name": engine.name,
                        "pool": _engine_pool(engine),
                        "nodes": _engine_nodes(engine),
                        "members": [
                            {
                                "role": member.role.value,
                                "pool": member.node_pool_name,
                                "deviceRequests": [
                                    r.to_wire() for r in member.device_requests or []
                                ],
                            }
                            for member in engine.members
                        ],
                    }
                    for engine in replica.spec.engines
                ],
            }
            for replica in placement.replicas
        ],
        "conditions": [
            {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
            for c in placement.conditions
        ],
        "rejections": dict(placement.rejections),
    }


def _devices(engine: PlacedEngine) -> str:
    parts = []
    for member in engine.members:
        claims = " + ".join(f"{r.count} {r.name}" for r in member.device_requests or [])
        role = f"{member.role.value} " if engine.is_gang else ""
        parts.append(f"{role}{claims or 'nothing'}")
    return ", ".join(parts)


def print_plan(placement: Placement) -> None:
    new = {r.name for r in placement.placed}
    title = (
        f"{placement.namespace}/{placement.deployment}: "
        f"{placement.scheduled}/{placement.desired} replicas scheduled"
    )
    console.print(f"[bold]{title}[/]", markup=True)
    rows = []
    for replica in placement.replicas:
        for i, engine in enumerate(replica.spec.engines):
            marker = "+" if replica.name in new else " "
            rows.append(
                [
                    f"{marker} {replica.name}" if i == 0 else "",
                    replica.spec.cluster_name if i == 0 else "",
                    engine.name,
                    _engine_pool(engine),
                    str(_engine_nodes(engine)),
                    _devices(engine),
                ]
            )
    if rows:
        print_table(["REPLICA", "CLUSTER", "ENGINE", "POOL", "NODES", "DEVICES/POD"], rows)
        if new:
            console.print("  (+ new replica)")
    for victim in placement.victims:
        console.print(
            f"  remove {victim.replica.name} ({victim.replica.spec.cluster_name}): "
            f"{victim.reason.value}: {victim.message}",
            soft_wrap=True,
        )
    for c in placement.conditions:
        style = "green" if c.status == "True" else "yellow"
        console.print(
            f"  [{style}]{c.type}={c.status}[/] ({c.reason}): {c.message}",
            soft_wrap=True,
            markup=True,
        )
    if placement.rejections:
        console.print("  Why each cluster did not take the next replica:")
    for cluster, reason in placement.rejections.items():
        console.print(f"    {cluster}: {reason}", soft_wrap=True)
    console.print()
