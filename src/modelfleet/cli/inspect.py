"""Reading state back: ``get``, ``describe`` and ``rollout status``. Lists come from search
attributes (visibility), details from the entity workflows' queries."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

import typer
from rich.live import Live
from rich.table import Table
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from modelfleet.api.infrastructure import CLOUD_CLUSTER_KINDS
from modelfleet.cli.connection import (
    AddressOption,
    NamespaceOption,
    open_client,
    run_async,
    settings,
)
from modelfleet.cli.output import (
    EXIT_FAILED,
    EXIT_INVALID,
    EXIT_OK,
    OutputFormat,
    console,
    err_console,
    kind_or_exit,
    print_structured,
)
from modelfleet.cli.serving import SERVING_KINDS
from modelfleet.cli.serving_inspect import describe_service, get_serving
from modelfleet.contracts.accepted import AcceptedStatus
from modelfleet.contracts.status import (
    ClusterStatus,
    DecisionQuery,
    DeploymentStatus,
    FleetView,
    ReplicaPhase,
)
from modelfleet.workflows.accepted import AcceptedResourceWorkflow
from modelfleet.workflows.cluster import ClusterWorkflow
from modelfleet.workflows.deployment import DeploymentWorkflow
from modelfleet.workflows.fleet import FleetWorkflow
from modelfleet.workflows.ids import FLEET_ID, cluster_id, deployment_id

# A rollout that has placed nothing this long after we started watching, with the scheduler
# saying why, is reported as failed rather than watched until the timeout.
UNSCHEDULABLE_GRACE_SECONDS = 10.0

OutputOption = Annotated[
    OutputFormat, typer.Option("--output", "-o", help="table, wide, json or yaml.")
]
NsOption = Annotated[
    str, typer.Option("--namespace", "-n", help="Namespace of namespaced resources.")
]


async def _running_ids(client: Client, kind: str, namespace: str | None = None) -> list[str]:
    query = f"ModelfleetKind = '{kind}' AND ExecutionStatus = 'Running'"
    if namespace:
        query += f" AND ModelfleetNamespace = '{namespace}'"
    return sorted([w.id async for w in client.list_workflows(query)])


async def deployment_status(client: Client, namespace: str, name: str) -> DeploymentStatus:
    handle = client.get_workflow_handle(deployment_id(namespace, name))
    status: DeploymentStatus = await handle.query(DeploymentWorkflow.status)
    return status


async def fleet_view(client: Client) -> FleetView:
    view: FleetView = await client.get_workflow_handle(FLEET_ID).query(FleetWorkflow.view)
    return view


# Kinds held by the AcceptedResource workflow: accepted and listed, not acted upon.
ACCEPTED_KINDS = frozenset({"ModelCache", "ServingStack"} | {k.KIND for k in CLOUD_CLUSTER_KINDS})


async def accepted_statuses(
    client: Client, kind: str, namespace: str | None
) -> list[AcceptedStatus]:
    out = []
    for wid in await _running_ids(client, kind, namespace):
        handle = client.get_workflow_handle(wid)
        status: AcceptedStatus = await handle.query(AcceptedResourceWorkflow.status)
        out.append(status)
    return out


def _deployment_row(d: DeploymentStatus, wide: bool) -> list[str]:
    row = [d.namespace, d.name, f"{d.ready}/{d.desired}", str(d.updated), d.phase]
    if wide:
        row.append(", ".join(sorted({r.cluster for r in d.replicas})) or "-")
        row.append(d.summary or "")
    return row


def get(
    kind: Annotated[
        str,
        typer.Argument(
            help="classes, clusters, deployments, replicas, services, endpoints or gateways."
        ),
    ],
    namespace: NsOption = "",
    output: OutputOption = OutputFormat.TABLE,
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """List resources, kubectl style."""
    resolved = kind_or_exit(kind)
    s = settings(address, temporal_namespace)
    wide = output is OutputFormat.WIDE

    async def go() -> tuple[list[str], list[list[str]], Any]:
        client = await open_client(s)
        if resolved == "ModelDeployment":
            ids = await _running_ids(client, "ModelDeployment", namespace or None)
            statuses = []
            for wid in ids:
                _, ns, name = wid.split("/", 2)
                statuses.append(await deployment_status(client, ns, name))
            header = ["NAMESPACE", "NAME", "READY", "UP-TO-DATE", "PHASE"]
            if wide:
                header += ["CLUSTERS", "MESSAGE"]
            return (
                header,
                [_deployment_row(d, wide) for d in statuses],
                [d.model_dump(mode="json", by_alias=True) for d in statuses],
            )
        if resolved in ACCEPTED_KINDS:
            accepted = await accepted_statuses(client, resolved, namespace or None)
            return (
                ["NAMESPACE", "NAME", "STATUS", "REASON"],
                [[a.namespace, a.name, "NotActedUpon", a.reason] for a in accepted],
                [a.model_dump(mode="json", by_alias=True) for a in accepted],
            )
        if resolved in SERVING_KINDS:
            ids = await _running_ids(client, "ModelService", namespace or None)
            return await get_serving(client, resolved, namespace, ids)
        view = await fleet_view(client)
        if resolved == "InferenceCluster":
            rows = []
            for c in view.clusters:
                pools = ", ".join(
                    f"{p.name}({p.class_name} x{p.capacity_nodes})" for p in c.spec.spec.node_pools
                )
                row = [
                    c.spec.name,
                    c.spec.spec.cluster.source.value,
                    "Ready" if c.ready else "NotReady",
                    pools,
                ]
                if wide:
                    row += [c.gateway_address or "-", c.reason]
                rows.append(row)
            header = ["NAME", "SOURCE", "STATUS", "POOLS"] + (["GATEWAY", "REASON"] if wide else [])
            return header, rows, [c.model_dump(mode="json", by_alias=True) for c in view.clusters]
        if resolved == "InferenceClass":
            return ["NAME"], [[c] for c in view.classes], view.classes
        if resolved == "ModelReplica":
            replicas = [r for r in view.replicas if not namespace or r.namespace == namespace]
            rows = [
                [
                    r.namespace,
                    r.name,
                    r.spec.deployment,
                    r.spec.cluster_name,
                    ", ".join(f"{e.name}:{e.members[0].node_pool_name}" for e in r.spec.engines),
                ]
                for r in replicas
            ]
            return (
                ["NAMESPACE", "NAME", "DEPLOYMENT", "CLUSTER", "POOLS"],
                rows,
                [r.to_wire() for r in replicas],
            )
        raise ValueError(f"get {resolved} is not supported yet")

    try:
        header, rows, data = run_async(go)
    except ValueError as exc:
        err_console.print(f"[red]error[/]: {exc}")
        raise typer.Exit(EXIT_INVALID) from None
    if output in (OutputFormat.JSON, OutputFormat.YAML):
        print_structured(data, output)
        return
    table = Table(box=None, header_style="bold")
    for h in header:
        table.add_column(h)
    for row in rows:
        table.add_row(*row)
    console.print(table)


def _replica_table(status: DeploymentStatus) -> Table:
    table = Table(box=None, header_style="bold")
    for h in ("REPLICA", "CLUSTER", "POOLS", "PHASE", "STEP", "REASON"):
        table.add_column(h)
    colours = {
        ReplicaPhase.READY: "green",
        ReplicaPhase.FAILED: "red",
        ReplicaPhase.DEGRADED: "yellow",
    }
    for r in status.replicas:
        colour = colours.get(r.phase, "cyan")
        table.add_row(
            r.name,
            r.cluster,
            ", ".join(f"{e}:{p}" for e, p in r.pools.items()),
            f"[{colour}]{r.phase.value}[/]",
            r.step.value,
            r.reason,
        )
    return table


def describe(
    kind: Annotated[str, typer.Argument(help="deployment, cluster or service.")],
    name: Annotated[str, typer.Argument()],
    namespace: NsOption = "default",
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """Show conditions, per-replica steps, placement reasons and recent decisions."""
    resolved = kind_or_exit(kind)
    s = settings(address, temporal_namespace)

    async def go() -> None:
        client = await open_client(s)
        if resolved == "ModelDeployment":
            status = await deployment_status(client, namespace, name)
            decisions = await client.get_workflow_handle(FLEET_ID).query(
                FleetWorkflow.decisions,
                DecisionQuery(namespace=namespace, deployment=name, limit=5),
            )
            console.print(
                f"[bold]ModelDeployment {namespace}/{name}[/]  phase {status.phase}, "
                f"{status.ready}/{status.desired} ready, generation {status.generation}"
            )
            console.print(f"Workflow: {s.workflow_url(deployment_id(namespace, name))}")
            console.print("\n[bold]Conditions[/]")
            for c in status.conditions:
                console.print(f"  {c.type}={c.status} ({c.reason}) {c.message}")
            console.print("\n[bold]Replicas[/]")
            console.print(_replica_table(status))
            if status.rejections:
                console.print("\n[bold]Placement[/]  " + status.summary)
                for cluster, reason in sorted(status.rejections.items()):
                    console.print(f"  {cluster}: {reason}")
            console.print("\n[bold]Recent decisions[/]")
            for d in decisions:
                console.print(
                    f"  {d.at:%H:%M:%S} desired {d.desired}: placed "
                    f"{', '.join(d.placed) or '-'}; removed {', '.join(d.victims) or '-'}"
                    + (f"; {d.summary}" if d.summary else "")
                )
        elif resolved == "InferenceCluster":
            cstatus: ClusterStatus = await client.get_workflow_handle(cluster_id(name)).query(
                ClusterWorkflow.status
            )
            console.print(f"[bold]InferenceCluster {name}[/]  {cstatus.phase}: {cstatus.reason}")
            console.print(f"Workflow: {s.workflow_url(cluster_id(name))}")
            console.print(
                f"Gateway: {cstatus.gateway_address or '-'}   failed probes: "
                f"{cstatus.failed_probes}"
            )
            for pool, obs in sorted(cstatus.observed_pools.items()):
                console.print(f"  pool {pool}: {obs.ready_nodes}/{obs.nodes} nodes ready")
        elif resolved == "ModelService":
            await describe_service(client, s, namespace, name)
        else:
            raise ValueError(f"describe {resolved} is not supported yet")

    try:
        run_async(go)
    except RPCError as exc:
        err_console.print(f"[red]error[/]: {resolved} {name} not found ({exc.message})")
        raise typer.Exit(EXIT_FAILED) from None


async def watch_rollout(client: Client, namespace: str, name: str, limit_seconds: float) -> bool:
    """Show live progress until every replica is Ready (True) or something failed (False)."""
    deadline = time.monotonic() + limit_seconds
    handle = client.get_workflow_handle(deployment_id(namespace, name))
    with Live(console=console, refresh_per_second=4, transient=False) as live:
        ok = await _follow(handle, live, deadline, limit_seconds, namespace, name)
    console.print()
    return ok


async def _follow(
    handle: Any, live: Live, deadline: float, limit_seconds: float, namespace: str, name: str
) -> bool:
    started = deadline - limit_seconds
    while True:
        status: DeploymentStatus = await handle.query(DeploymentWorkflow.status)
        head = (
            f"[bold]{namespace}/{name}[/] {status.phase}: {status.ready}/{status.desired} "
            f"ready, {status.updated} up to date"
        )
        if status.summary:
            head += f"\n[dim]{status.summary}[/]"
        grid = Table.grid()
        grid.add_row(head)
        grid.add_row(_replica_table(status))
        live.update(grid)
        if status.phase == "Ready":
            return True
        if any(r.phase is ReplicaPhase.FAILED for r in status.replicas) and not any(
            r.phase in (ReplicaPhase.PENDING, ReplicaPhase.PROGRESSING) for r in status.replicas
        ):
            return False
        if (
            status.desired > 0
            and not status.replicas
            and any(
                c.type == "ReplicasScheduled" and c.status == "False" for c in status.conditions
            )
            and time.monotonic() - started > UNSCHEDULABLE_GRACE_SECONDS
        ):
            return False
        desc = await handle.describe()
        if desc.status is not WorkflowExecutionStatus.RUNNING:
            return False
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.5)


def rollout_status(
    name: Annotated[str, typer.Argument(help="ModelDeployment name.")],
    namespace: NsOption = "default",
    timeout: Annotated[float, typer.Option(help="Give up after this many seconds.")] = 1800,
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """Follow a rollout live until every replica is Ready (exit 0) or it fails (exit 1)."""
    s = settings(address, temporal_namespace)

    async def go() -> bool:
        client = await open_client(s)
        console.print(f"Workflow: {s.workflow_url(deployment_id(namespace, name))}")
        return await watch_rollout(client, namespace, name, timeout)

    ok = run_async(go)
    raise typer.Exit(EXIT_OK if ok else EXIT_FAILED)
