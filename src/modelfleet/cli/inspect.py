"""``modelfleet describe KIND NAME`` (or ``KIND/NAME``): conditions, per-replica steps,
placement reasons and recent decisions of a deployment; probes of a cluster; devices of a class;
placement of a replica; services, endpoints, the gateway and autoscalers (printed by
cli/serving_inspect). ``get`` and ``rollout status`` live in their own modules and are
re-exported here for existing importers."""

from __future__ import annotations

from typing import Annotated

import typer

from modelfleet.cli.connection import AddressOption, NamespaceOption, run_async, settings
from modelfleet.cli.describers import Described, describe_accepted
from modelfleet.cli.get import get, require_one
from modelfleet.cli.kinds import complete_kind_and_name, spec_of
from modelfleet.cli.manifests import NOT_ACTED_UPON
from modelfleet.cli.resources import connect_with_worker, fetch
from modelfleet.cli.rollout import rollout_status, watch_rollout
from modelfleet.cli.targets import (
    NsOption,
    is_namespaced,
    require_orchestrated,
    resolve_namespace,
    single_target,
)

__all__ = ["describe", "get", "rollout_status", "watch_rollout"]


def describe(
    args: Annotated[
        list[str],
        typer.Argument(
            help="KIND NAME or KIND/NAME.",
            metavar="KIND NAME",
            show_default=False,
            autocompletion=complete_kind_and_name,
        ),
    ],
    namespace: NsOption = None,
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """Show one resource in detail: conditions, replicas, reasons, decisions, UI link."""
    target = single_target(args, "describe")
    assert target.name is not None
    name = target.name
    ns = resolve_namespace(namespace)
    s = settings(address, temporal_namespace)
    require_orchestrated(target.kind)

    async def go() -> None:
        client = await connect_with_worker(s)
        scope = ns.name if is_namespaced(target.kind) else None
        # The resource as visibility holds it where the kind can (a deployment: its own
        # record): the describer asks the workflow, and falls back on this if it is silent.
        found = await fetch(client, target.kind, scope, [name], brief=True)
        item = require_one(found, target, ns)
        if item.status.get("phase") == NOT_ACTED_UPON:
            describe_accepted(item)
            return
        await spec_of(target.kind).describe(Described(client, s, ns, name, item))

    run_async(go)
