"""``modelfleet diff -f PATH...``: what ``apply`` would change, as kubectl diff shows it: a
unified diff per resource of the live spec and the applied one, plus what the workflow would do
about it (which replicas roll, scaling). Exit 0 when nothing would change, 1 when something
would (kubectl's convention), 2 for invalid manifests."""

from __future__ import annotations

import typer
from rich.markup import escape

from modelfleet.cli.changes import UNCHANGED, consequences, read_live, unified_diff, verdict
from modelfleet.cli.connection import AddressOption, NamespaceOption, run_async, settings
from modelfleet.cli.kinds import apply_order
from modelfleet.cli.output import console
from modelfleet.cli.resources import connect_with_worker
from modelfleet.cli.targets import resource_name
from modelfleet.cli.validate import FilesOption, load_or_exit


def diff(
    files: FilesOption,
    address: AddressOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """Show what applying the manifests would change; change nothing."""
    result = load_or_exit(files)
    s = settings(address, namespace)

    async def go() -> bool:
        client = await connect_with_worker(s)
        live = await read_live(client, result.resources)
        changed = False
        order = apply_order()
        for resource in sorted(result.resources, key=lambda r: order.get(r.KIND, 9)):
            if resource.KIND not in order:
                continue
            if verdict(live, resource) == UNCHANGED:
                continue
            changed = True
            for line in unified_diff(live, resource):
                colour = {"+": "green", "-": "red", "@": "cyan"}.get(line[:1])
                text = escape(line.rstrip("\n"))
                console.print(f"[{colour}]{text}[/]" if colour else text)
            for line in consequences(live, resource):
                console.print(f"# {resource_name(resource.KIND, resource.name)}: {line}")
        return changed

    if run_async(go):
        raise typer.Exit(1)
