"""Changing what runs: ``scale`` (an Update with a validator) and ``delete``."""

from __future__ import annotations

from typing import Annotated

import typer
from temporalio.client import WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.service import RPCError

from modelfleet.cli.connection import (
    AddressOption,
    NamespaceOption,
    open_client,
    run_async,
    settings,
)
from modelfleet.cli.inspect import NsOption
from modelfleet.cli.output import (
    EXIT_FAILED,
    EXIT_INVALID,
    console,
    err_console,
    kind_or_exit,
    rejection_reason,
)
from modelfleet.cli.serving import delete_serving
from modelfleet.workflows.cluster import ClusterWorkflow
from modelfleet.workflows.deployment import DeploymentWorkflow, ScaleRequest
from modelfleet.workflows.ids import cluster_id, deployment_id


def scale(
    kind: Annotated[str, typer.Argument(help="deployment")],
    name: Annotated[str, typer.Argument()],
    replicas: Annotated[int, typer.Option("--replicas", help="Desired replica count (0-10).")],
    namespace: NsOption = "default",
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """Scale a ModelDeployment (validated before anything changes)."""
    if kind_or_exit(kind) != "ModelDeployment":
        err_console.print("[red]error[/]: only deployments can be scaled")
        raise typer.Exit(EXIT_INVALID)
    s = settings(address, temporal_namespace)

    async def go() -> None:
        client = await open_client(s)
        handle = client.get_workflow_handle(deployment_id(namespace, name))
        status = await handle.execute_update(
            DeploymentWorkflow.scale, ScaleRequest(replicas=replicas)
        )
        console.print(
            f"scaled {namespace}/{name} to {status.desired} replica(s)  "
            f"[dim]{s.workflow_url(deployment_id(namespace, name))}[/]"
        )

    try:
        run_async(go)
    except WorkflowUpdateFailedError as exc:
        err_console.print(f"[red]rejected[/]: {rejection_reason(exc)}")
        raise typer.Exit(EXIT_INVALID) from None
    except RPCError as exc:
        err_console.print(f"[red]error[/]: deployment {namespace}/{name}: {exc.message}")
        raise typer.Exit(EXIT_FAILED) from None


def delete(
    kind: Annotated[str, typer.Argument(help="deployment or cluster")],
    name: Annotated[str, typer.Argument()],
    namespace: NsOption = "default",
    wait: Annotated[bool, typer.Option(help="Wait until everything is torn down.")] = True,
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """Delete a deployment (its replicas are torn down and capacity released), a cluster, a
    service (its route is removed) or an endpoint."""
    resolved = kind_or_exit(kind)
    s = settings(address, temporal_namespace)

    async def go() -> None:
        client = await open_client(s)
        if resolved == "ModelDeployment":
            handle = client.get_workflow_handle(deployment_id(namespace, name))
            if wait:
                await handle.execute_update(DeploymentWorkflow.delete)
                await handle.result()
            else:
                await handle.start_update(
                    DeploymentWorkflow.delete, wait_for_stage=WorkflowUpdateStage.ACCEPTED
                )
            console.print(f"deleted deployment {namespace}/{name}")
        elif resolved == "InferenceCluster":
            handle = client.get_workflow_handle(cluster_id(name))
            await handle.execute_update(ClusterWorkflow.delete)
            if wait:
                await handle.result()
            console.print(f"deleted cluster {name}")
        else:
            await delete_serving(client, resolved, namespace, name, wait=wait)
            console.print(f"deleted {resolved} {namespace}/{name}")

    try:
        run_async(go)
    except RPCError as exc:
        err_console.print(f"[red]error[/]: {resolved} {name}: {exc.message}")
        raise typer.Exit(EXIT_FAILED) from None
