"""``modelfleet get``, kubectl style: ``get KIND [NAME...]`` or ``get KIND/NAME...``, ``-n`` /
``-A``, ``-l`` label selectors, ``-o wide|json|yaml|name``, ``--watch``.

Tables fit a terminal and are never cut in a pipe; ``-o json|yaml`` prints manifests with
``status`` (a ``List`` unless one resource was named) that ``apply -f -`` takes back.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from typing import Annotated

import typer
import yaml
from rich.text import Text
from temporalio.client import Client

from modelfleet.cli import columns, kinds
from modelfleet.cli.connection import AddressOption, NamespaceOption, run_async, settings
from modelfleet.cli.errors import CliError, NotFoundError
from modelfleet.cli.manifests import Fetched, as_document
from modelfleet.cli.output import (
    OutputFormat,
    console,
    err_console,
    print_plain,
    print_structured,
    print_table,
)
from modelfleet.cli.resources import connect_with_worker, fetch, missing
from modelfleet.cli.selectors import Requirement, matches, parse_selector
from modelfleet.cli.targets import (
    Namespace,
    NsOption,
    Target,
    is_namespaced,
    parse_targets,
    require_orchestrated,
    resolve_namespace,
    resource_name,
)

WATCH_INTERVAL = 2.0

TargetsArgument = Annotated[
    list[str],
    typer.Argument(
        help=f"KIND [NAME...] or KIND/NAME... (kinds: {kinds.listed()}).",
        metavar="KIND [NAME]...",
        show_default=False,
        autocompletion=kinds.complete_kind_and_name,
    ),
]
AllNamespacesOption = Annotated[
    bool, typer.Option("--all-namespaces", "-A", help="Every namespace.")
]
SelectorOption = Annotated[
    str | None,
    typer.Option("--selector", "-l", help="Label selector: k=v, k!=v, k in (a,b), k, !k."),
]
OutputOption = Annotated[
    OutputFormat, typer.Option("--output", "-o", help="table, wide, json, yaml or name.")
]


def group_targets(targets: list[Target]) -> list[tuple[str, list[str]]]:
    """Targets grouped by kind in first-seen order; an empty name list means "all"."""
    groups: dict[str, list[str]] = {}
    for t in targets:
        names = groups.setdefault(t.kind, [])
        if t.name is not None:
            names.append(t.name)
    return list(groups.items())


async def read(
    client: Client,
    targets: list[Target],
    ns: Namespace,
    all_namespaces: bool,
    selector: list[Requirement],
) -> tuple[list[Fetched], list[str]]:
    """What the targets name, label-filtered, and a NotFound line per named resource absent."""
    found: list[Fetched] = []
    errors: list[str] = []
    for kind, names in group_targets(targets):
        namespaced = is_namespaced(kind)
        scope = None if all_namespaces or not namespaced else ns.name
        items = await fetch(client, kind, scope, names)
        items = [i for i in items if matches(selector, i.labels)]
        found.extend(items)
        where = ns.described() if namespaced and not all_namespaces else ""
        errors.extend(missing(kind, names, items, where))
    return found, errors


def get(
    args: TargetsArgument,
    namespace: NsOption = None,
    all_namespaces: AllNamespacesOption = False,
    selector: SelectorOption = None,
    output: OutputOption = OutputFormat.TABLE,
    watch: Annotated[
        bool, typer.Option("--watch", "-w", help="After listing, print changes as they happen.")
    ] = False,
    watch_seconds: Annotated[
        float, typer.Option("--watch-seconds", help="Stop watching after this long (0: never).")
    ] = 0,
    ignore_not_found: Annotated[
        bool, typer.Option("--ignore-not-found", help="A named resource that is absent is fine.")
    ] = False,
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """List resources, kubectl style."""
    targets = parse_targets(args)
    for t in targets:
        require_orchestrated(t.kind)
    ns = resolve_namespace(namespace)
    requirements = parse_selector(selector) if selector else []
    s = settings(address, temporal_namespace)
    single = len(targets) == 1 and targets[0].name is not None

    async def go() -> tuple[list[Fetched], list[str]]:
        client = await connect_with_worker(s)
        found, errors = await read(client, targets, ns, all_namespaces, requirements)
        _print(found, errors, targets, ns, all_namespaces, output, single, ignore_not_found)
        if watch:
            await _watch(
                lambda: read(client, targets, ns, all_namespaces, requirements),
                found,
                output,
                all_namespaces,
                watch_seconds,
            )
        return found, errors

    try:
        _, errors = run_async(go)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
    if errors and not ignore_not_found:
        raise typer.Exit(1)


def _print(
    found: list[Fetched],
    errors: list[str],
    targets: list[Target],
    ns: Namespace,
    all_namespaces: bool,
    output: OutputFormat,
    single: bool,
    ignore_not_found: bool,
) -> None:
    if not ignore_not_found:
        for line in errors:
            err_console.print(f"Error from server (NotFound): {line}")
    if output in (OutputFormat.JSON, OutputFormat.YAML):
        if found or not single:
            print_structured(as_document(found, single), output)
        return
    if output is OutputFormat.NAME:
        for item in found:
            print(resource_name(item.kind, item.name))
        return
    if not found:
        if not errors:
            namespaced = any(is_namespaced(t.kind) for t in targets)
            if namespaced and not all_namespaces:
                err_console.print(f"No resources found in {ns.name} namespace.")
            else:
                err_console.print("No resources found.")
        return
    wide = output is OutputFormat.WIDE
    kinds = list(dict.fromkeys(i.kind for i in found))
    for n, kind in enumerate(kinds):
        if n:
            console.print()
        header = columns.header(kind, wide=wide, all_namespaces=all_namespaces)
        rows = [
            columns.row(i, wide=wide, all_namespaces=all_namespaces)
            for i in found
            if i.kind == kind
        ]
        print_table(header, rows, flexible=columns.FLEXIBLE)


async def _watch(
    reread: Callable[[], object],
    first: list[Fetched],
    output: OutputFormat,
    all_namespaces: bool,
    limit: float,
) -> None:
    """Poll and print each resource whose state changed (one row, or one document)."""
    wide = output is OutputFormat.WIDE
    started = time.monotonic()

    def key(i: Fetched) -> tuple[str, str, str]:
        return (i.kind, i.namespace, i.name)

    def state(i: Fetched) -> str:
        if output in (OutputFormat.JSON, OutputFormat.YAML):
            m = i.manifest
            return json.dumps({"spec": m.get("spec"), "status": m.get("status")}, sort_keys=True)
        # A table row without AGE: a line is printed when something a person sees changed.
        cells = columns.row(i, wide=wide, all_namespaces=all_namespaces)
        age = columns.header(i.kind, wide=wide, all_namespaces=all_namespaces).index("AGE")
        return "\t".join(Text.from_markup(c).plain for n, c in enumerate(cells) if n != age)

    seen = {key(i): state(i) for i in first}
    widths: dict[str, list[int]] = {}
    for kind in {i.kind for i in first}:
        header = columns.header(kind, wide=wide, all_namespaces=all_namespaces)
        rows = [
            [
                Text.from_markup(c).plain
                for c in columns.row(i, wide=wide, all_namespaces=all_namespaces)
            ]
            for i in first
            if i.kind == kind
        ]
        widths[kind] = [max([len(h), *(len(r[c]) for r in rows)]) for c, h in enumerate(header)]
    while not limit or time.monotonic() - started < limit:
        await asyncio.sleep(WATCH_INTERVAL)
        found, _ = await reread()  # type: ignore[misc]
        for item in found:
            if seen.get(key(item)) == state(item):
                continue
            seen[key(item)] = state(item)
            _print_change(item, output, wide, all_namespaces, widths)


def _print_change(
    item: Fetched,
    output: OutputFormat,
    wide: bool,
    all_namespaces: bool,
    widths: dict[str, list[int]],
) -> None:
    if output is OutputFormat.JSON:
        print(json.dumps(item.manifest))
    elif output is OutputFormat.YAML:
        print("---\n" + yaml.safe_dump(item.manifest, sort_keys=False), end="")
    elif output is OutputFormat.NAME:
        print(resource_name(item.kind, item.name))
    else:
        header = columns.header(item.kind, wide=wide, all_namespaces=all_namespaces)
        row = columns.row(item, wide=wide, all_namespaces=all_namespaces)
        if item.kind not in widths:
            widths[item.kind] = print_plain(header, [row], show_header=True, widths=None)
        else:
            print_plain(header, [row], show_header=False, widths=widths[item.kind])
    sys.stdout.flush()


def require_one(found: list[Fetched], target: Target, ns: Namespace) -> Fetched:
    """The single resource a verb acts on, or NotFound naming where it looked."""
    if not found:
        where = f" in {ns.described()}" if is_namespaced(target.kind) else ""
        raise NotFoundError(f"{resource_name(target.kind, target.name or '')} not found{where}")
    if len(found) > 1:
        raise CliError(f"{target.name} names {len(found)} resources")
    return found[0]
