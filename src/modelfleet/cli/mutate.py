"""Changing what runs: ``scale`` (an Update with a validator) and ``delete`` (by name, by
``KIND/NAME`` or by the manifests in ``-f``; ``--ignore-not-found`` as kubectl)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated

import typer
from temporalio.client import Client, WorkflowUpdateFailedError

from modelfleet.api.support import held_without_action
from modelfleet.cli.connection import AddressOption, NamespaceOption, run_async, settings
from modelfleet.cli.errors import CliError, NotFoundError, UsageError
from modelfleet.cli.kind_actions import delete_held
from modelfleet.cli.kinds import (
    complete_kind_and_name,
    delete_order,
    not_deleted,
    spec_of,
)
from modelfleet.cli.management import refuse_when_managed
from modelfleet.cli.output import (
    EXIT_FAILED,
    console,
    err_console,
    rejection_reason,
)
from modelfleet.cli.resources import (
    connect_with_worker,
    is_running,
)
from modelfleet.cli.targets import (
    Namespace,
    NsOption,
    is_namespaced,
    parse_targets,
    resolve_namespace,
    resource_name,
    single_target,
)
from modelfleet.cli.validate import load_or_exit
from modelfleet.contracts.ids import accepted_id, deployment_id
from modelfleet.deployment.workflow import DeploymentWorkflow, ScaleRequest

# The registry's delete ranks: what scales and routes to deployments, then what runs on
# clusters, then clusters, then classes (apply's order, reversed); held kinds at any time.
DELETE_ORDER = delete_order()
# Kinds that exist but are not deleted by name, and what to do instead.
NOT_DELETED = not_deleted()


def scale(
    args: Annotated[
        list[str],
        typer.Argument(help="deployment NAME or deployment/NAME.", metavar="KIND NAME"),
    ],
    replicas: Annotated[int, typer.Option("--replicas", help="Desired replica count (0-10).")],
    namespace: NsOption = None,
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """Scale a ModelDeployment (validated before anything changes)."""
    refuse_when_managed("scale")
    target = single_target(args, "scale")
    if target.kind != "ModelDeployment":
        raise UsageError(f"only deployments can be scaled, not {target.kind}")
    name = target.name or ""
    ns = resolve_namespace(namespace)
    s = settings(address, temporal_namespace)

    async def go() -> None:
        client = await connect_with_worker(s)
        if not await is_running(client, deployment_id(ns.name, name)):
            raise NotFoundError(f"deployment {name!r} not found in {ns.described()}")
        handle = client.get_workflow_handle(deployment_id(ns.name, name))
        status = await handle.execute_update(
            DeploymentWorkflow.scale, ScaleRequest(replicas=replicas)
        )
        console.print(
            f"{resource_name(target.kind, name)} scaled to {status.desired} replica(s)  "
            f"[dim]{s.workflow_url(deployment_id(ns.name, name))}[/]"
        )

    run_async(go)


@dataclass(frozen=True)
class Doomed:
    kind: str
    namespace: str
    name: str
    # Held by the AcceptedResource workflow (a parity kind, or Modelplane's Traefik gateway).
    held: bool = False

    @property
    def ref(self) -> str:
        return resource_name(self.kind, self.name)

    @property
    def accepted_id(self) -> str:
        return accepted_id(self.kind, self.namespace if is_namespaced(self.kind) else "", self.name)


def _from_files(files: list[str]) -> list[Doomed]:
    loaded = load_or_exit(files)
    return [Doomed(r.KIND, r.namespace, r.name, held_without_action(r)) for r in loaded.resources]


def _from_args(args: list[str], ns: Namespace) -> list[Doomed]:
    targets = parse_targets(args)
    if any(t.name is None for t in targets):
        raise UsageError("name what to delete: KIND NAME..., KIND/NAME... or -f FILE")
    return [Doomed(t.kind, ns.name, t.name or "", spec_of(t.kind).held) for t in targets]


def _deletable(d: Doomed) -> bool:
    return d.held or d.kind in delete_order()


def _workflow_id(d: Doomed) -> str | None:
    """The ID of the workflow of its own that holds ``d``; None for records the Fleet workflow
    or the endpoint directory keep (their spec says how to tell whether they exist)."""
    if d.held:
        return d.accepted_id
    spec = spec_of(d.kind)
    if spec.exists is not None or spec.workflow_id is None:
        return None
    return spec.workflow_id(d.namespace, d.name)


async def _exists(client: Client, d: Doomed) -> bool:
    wid = _workflow_id(d)
    if wid is not None:
        return await is_running(client, wid) is not None
    exists = spec_of(d.kind).exists
    return exists is not None and await exists(client, d.namespace, d.name)


async def _delete(client: Client, d: Doomed, wait: bool, force: bool) -> None:
    if d.held:
        await delete_held(client, d.accepted_id, wait)
        return
    remove = spec_of(d.kind).delete
    if remove is None:
        raise UsageError(f"delete {d.kind} is not supported: {not_deleted().get(d.kind, '')}")
    await remove(client, d.namespace, d.name, wait, force)


def delete(
    args: Annotated[
        list[str] | None,
        typer.Argument(
            help="KIND NAME... or KIND/NAME...",
            metavar="[KIND NAME]...",
            show_default=False,
            autocompletion=complete_kind_and_name,
        ),
    ] = None,
    files: Annotated[
        list[str] | None,
        typer.Option("--filename", "-f", help="Delete what these manifests describe."),
    ] = None,
    namespace: NsOption = None,
    ignore_not_found: Annotated[
        bool, typer.Option("--ignore-not-found", help="Absent resources are not an error.")
    ] = False,
    wait: Annotated[bool, typer.Option(help="Wait until everything is torn down.")] = True,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Delete clusters replicas still run on: drain them (the replicas are "
            "re-placed on other clusters), then tear them down; delete ModelCaches' volumes "
            "even where a workload still mounts them.",
        ),
    ] = False,
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """Delete deployments (replicas torn down, capacity released), clusters (refused while
    replicas run on them unless --force; cloud resources deleted), classes, services (their
    route removed), endpoints or autoscalers (the deployment keeps its count)."""
    if bool(args) == bool(files):
        raise UsageError("give either KIND NAME... / KIND/NAME... or -f FILE, not both or neither")
    refuse_when_managed("delete")
    ns = resolve_namespace(namespace)
    doomed = _from_files(files) if files else _from_args(args or [], ns)
    # A gateway named on the command line may be Modelplane's Traefik one (held, deletable):
    # known only once the fleet is asked.
    maybe_held = [d for d in doomed if d.kind == "InferenceGateway" and not files]
    for d in [d for d in doomed if not _deletable(d) and d not in maybe_held]:
        why = not_deleted().get(d.kind, f"{d.kind} cannot be deleted")
        if not files:
            raise UsageError(f"delete {d.kind} is not supported: {why}")
        console.print(f"[yellow]skipped[/] {d.ref}: {why}")
    doomed = [d for d in doomed if _deletable(d) or d in maybe_held]
    s = settings(address, temporal_namespace)

    async def go() -> int:
        client = await connect_with_worker(s)
        for n, d in enumerate(doomed):
            if d in maybe_held:
                if not await is_running(client, replace(d, held=True).accepted_id):
                    raise UsageError(f"delete {d.kind} is not supported: {not_deleted()[d.kind]}")
                doomed[n] = replace(d, held=True)
        failures = 0
        order = delete_order()
        for d in sorted(doomed, key=lambda d: order.get(d.kind, 0)):
            if not await _exists(client, d):
                if not ignore_not_found:
                    where = f" in namespace {d.namespace!r}" if is_namespaced(d.kind) else ""
                    err_console.print(f"Error from server (NotFound): {d.ref} not found{where}")
                    failures += 1
                continue
            try:
                await _delete(client, d, wait, force)
            except WorkflowUpdateFailedError as exc:
                err_console.print(f"[red]error[/]: {d.ref}: {rejection_reason(exc)}")
                failures += 1
                continue
            except CliError as exc:  # a cluster still in use, or one not fully torn down
                err_console.print(f"[red]error[/]: {exc.message}", soft_wrap=True)
                failures += 1
                continue
            console.print(f"{d.ref} deleted")
        return failures

    if run_async(go):
        raise typer.Exit(EXIT_FAILED)
