"""``modelfleet get``, kubectl style: ``get KIND[,KIND...] [NAME...]`` or ``get KIND/NAME...``,
``-n`` / ``-A``, ``-l`` label selectors, ``-o wide|json|yaml|name|jsonpath=...|custom-columns=...``,
``--sort-by``, ``--no-headers``, ``--show-labels``, ``--watch``.

Tables fit a terminal and are never cut in a pipe; ``-o json|yaml`` prints manifests with
``status`` (a ``List`` unless one resource was named) that ``apply -f -`` takes back.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

import typer
import yaml
from rich.markup import escape
from rich.text import Text
from temporalio.client import Client

from modelfleet.cli import columns, custom_columns, jsonpath, kinds
from modelfleet.cli.connection import AddressOption, NamespaceOption, run_async, settings
from modelfleet.cli.errors import CliError, NotFoundError, UsageError
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


def _check_output(value: str) -> str:
    """``-o`` is checked as Click checks a choice: a bad value is a usage error (exit 2)."""
    try:
        parse_output(value)
    except UsageError as exc:
        raise typer.BadParameter(exc.message) from None
    return value


OutputOption = Annotated[
    str,
    typer.Option(
        "--output",
        "-o",
        callback=_check_output,
        help="table, wide, json, yaml, name, jsonpath=TEMPLATE or custom-columns=HEADER:PATH,...",
        show_default=False,
    ),
]
SortByOption = Annotated[
    str | None,
    typer.Option(
        "--sort-by", help="Sort by a JSONPath field of each resource, e.g. .metadata.name."
    ),
]
NoHeadersOption = Annotated[
    bool, typer.Option("--no-headers", help="Tables and custom columns without a header row.")
]
ShowLabelsOption = Annotated[
    bool, typer.Option("--show-labels", help="A last LABELS column with every label.")
]


@dataclass(frozen=True)
class Output:
    """How ``get`` prints: a format, or a JSONPath template, or custom columns."""

    format: OutputFormat
    template: tuple[jsonpath.Node, ...] = ()
    custom: list[custom_columns.Column] = field(default_factory=list)
    no_headers: bool = False
    show_labels: bool = False

    @property
    def is_template(self) -> bool:
        return bool(self.template)

    @property
    def is_custom(self) -> bool:
        return bool(self.custom)

    @property
    def brief(self) -> bool:
        """Only names, phases, counts and ages are printed (the plain table, ``-o name``):
        what kinds with a brief reader take from visibility without asking any workflow."""
        plain = self.format in (OutputFormat.TABLE, OutputFormat.NAME)
        return plain and not self.is_template and not self.is_custom and not self.show_labels


FORMATS = "table, wide, json, yaml, name, jsonpath=TEMPLATE, custom-columns=SPEC"


def parse_output(value: str, *, no_headers: bool = False, show_labels: bool = False) -> Output:
    """``-o``'s value (kubectl's: ``jsonpath=...``, ``custom-columns=...`` included)."""
    fmt = OutputFormat.TABLE
    template: tuple[jsonpath.Node, ...] = ()
    custom: list[custom_columns.Column] = []
    name, sep, rest = value.partition("=")
    try:
        if sep and name == "jsonpath":
            if not rest:
                raise UsageError(
                    "-o jsonpath needs a template: -o jsonpath='{.items[*].metadata.name}'"
                )
            template = jsonpath.parse(rest)
        elif sep and name == "custom-columns":
            custom = custom_columns.parse_columns(rest)
        else:
            fmt = OutputFormat(value)
    except jsonpath.JsonPathError as exc:
        raise UsageError(f"-o {name}: {exc}") from None
    except ValueError:
        raise UsageError(f"unknown output format {value!r} (one of: {FORMATS})") from None
    return Output(fmt, template, custom, no_headers=no_headers, show_labels=show_labels)


def sort_items(found: list[Fetched], expr: str) -> list[Fetched]:
    """``--sort-by``: kubectl's order (missing values first, numbers by value, strings in
    natural order: ``r2`` before ``r10``), stable."""
    try:
        path = custom_columns.relaxed(expr)
    except jsonpath.JsonPathError as exc:
        raise UsageError(f"--sort-by: {exc}") from None

    def key(item: Fetched) -> tuple[int, Any]:
        try:
            values = jsonpath.find(path, item.manifest, item.manifest)
        except jsonpath.JsonPathError:
            values = []
        if not values or values[0] is None:
            return (0, ())  # missing first
        v = values[0]
        if isinstance(v, bool):
            return (1, (int(v),))
        if isinstance(v, int | float):
            return (2, (v,))
        if isinstance(v, str):
            return (3, _natural(v))
        return (4, (jsonpath.text(v),))

    keys = [key(i) for i in found]
    if found and all(k == (0, ()) for k in keys):
        raise CliError(f"couldn't find any field with path {expr!r} in the list of objects")
    order = sorted(range(len(found)), key=lambda n: keys[n])
    return [found[n] for n in order]


def _natural(text: str) -> tuple[tuple[int, int, str], ...]:
    """Natural order, as kubectl's sortorder.NaturalLess: runs of digits compare as numbers."""
    return tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part)
        for part in re.findall(r"\d+|\D+", text)
    )


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
    *,
    brief: bool = False,
) -> tuple[list[Fetched], list[str]]:
    """What the targets name, label-filtered, and a NotFound line per named resource absent.
    ``brief``: the output needs no spec (``Output.brief``), so visibility may serve the rows."""
    found: list[Fetched] = []
    errors: list[str] = []
    for kind, names in group_targets(targets):
        namespaced = is_namespaced(kind)
        scope = None if all_namespaces or not namespaced else ns.name
        # A label selector needs the labels, which only the workflows' specs hold.
        # A label selector needs the labels, which only the workflows' specs hold.
        items = await fetch(client, kind, scope, names, brief=brief and not selector)
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
    output: OutputOption = "table",
    sort_by: SortByOption = None,
    no_headers: NoHeadersOption = False,
    show_labels: ShowLabelsOption = False,
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
    out = parse_output(output, no_headers=no_headers, show_labels=show_labels)
    targets = parse_targets(args)
    for t in targets:
        require_orchestrated(t.kind)
    ns = resolve_namespace(namespace)
    requirements = parse_selector(selector) if selector else []
    s = settings(address, temporal_namespace)
    single = len(targets) == 1 and targets[0].name is not None
    brief = out.brief and not sort_by  # --sort-by may name any field of the manifest

    async def go() -> tuple[list[Fetched], list[str]]:
        client = await connect_with_worker(s)
        found, errors = await read(client, targets, ns, all_namespaces, requirements, brief=brief)
        if sort_by:
            found = sort_items(found, sort_by)
        _print(found, errors, targets, ns, all_namespaces, out, single, ignore_not_found)
        if watch:
            await _watch(
                lambda: read(client, targets, ns, all_namespaces, requirements, brief=brief),
                found,
                out,
                all_namespaces,
                watch_seconds,
            )
        return found, errors

    try:
        found, errors = run_async(go)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
    if (errors and not ignore_not_found) or any(i.error or i.source_error for i in found):
        raise typer.Exit(1)


def _print(
    found: list[Fetched],
    errors: list[str],
    targets: list[Target],
    ns: Namespace,
    all_namespaces: bool,
    out: Output,
    single: bool,
    ignore_not_found: bool,
) -> None:
    if not ignore_not_found:
        for line in errors:
            err_console.print(f"Error from server (NotFound): {line}")
    for item in found:
        if item.error:  # its row shows what visibility knows; structured output leaves it out
            where = f" in namespace {item.namespace}" if item.namespace else ""
            err_console.print(
                f"Error from server (Unavailable): {resource_name(item.kind, item.name)}{where} "
                f"did not answer: {escape(item.error)}",
                soft_wrap=True,
            )
    for reason in dict.fromkeys(i.source_error for i in found if i.source_error):
        err_console.print(f"Error from server (Unavailable): {escape(reason)}", soft_wrap=True)
    output = out.format
    if output is OutputFormat.NAME:  # a name visibility holds is never made up
        found = [i for i in found if not i.error]
    elif output is not OutputFormat.TABLE and output is not OutputFormat.WIDE:
        found = [i for i in found if not i.error and not i.source_error]
    if out.is_template:
        if found or not single:
            print_template(out, as_document(found, single))
        return
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
    if out.is_custom:
        print_custom_columns(out, found)
        return
    kinds = list(dict.fromkeys(i.kind for i in found))
    # kubectl names each row KIND/NAME when more than one kind was asked for.
    with_kind = len({t.kind for t in targets}) > 1
    for n, kind in enumerate(kinds):
        if n:
            console.print()
        header = table_header(kind, out, all_namespaces)
        rows = [table_row(i, out, all_namespaces, with_kind) for i in found if i.kind == kind]
        print_table(header, rows, flexible=columns.FLEXIBLE, show_header=not out.no_headers)


def table_header(kind: str, out: Output, all_namespaces: bool) -> list[str]:
    wide = out.format is OutputFormat.WIDE
    header = columns.header(kind, wide=wide, all_namespaces=all_namespaces)
    return [*header, "LABELS"] if out.show_labels else header


def table_row(item: Fetched, out: Output, all_namespaces: bool, with_kind: bool) -> list[str]:
    wide = out.format is OutputFormat.WIDE
    cells = columns.row(item, wide=wide, all_namespaces=all_namespaces)
    if with_kind:
        at = columns.header(item.kind, wide=wide, all_namespaces=all_namespaces).index("NAME")
        cells[at] = resource_name(item.kind, item.name)
    if out.show_labels:
        cells.append(columns.labels_cell(item.labels))
    return cells


def print_template(out: Output, document: Any) -> None:
    """``-o jsonpath=...`` of the document ``-o json`` prints."""
    try:
        text = jsonpath.execute(out.template, document)
    except jsonpath.JsonPathError as exc:
        raise CliError(f"-o jsonpath: {exc}") from None
    sys.stdout.write(text)
    sys.stdout.flush()


def print_custom_columns(out: Output, found: list[Fetched], *, header: bool = True) -> None:
    """``-o custom-columns=...``: a row per resource (every kind in one table), as kubectl."""
    rows = [[c.header for c in out.custom]] if header and not out.no_headers else []
    try:
        rows += [custom_columns.column_cells(out.custom, i.manifest) for i in found]
    except jsonpath.JsonPathError as exc:
        raise CliError(f"-o custom-columns: {exc}") from None
    sys.stdout.write(custom_columns.tabulate(rows))
    sys.stdout.flush()


async def _watch(
    reread: Callable[[], object],
    first: list[Fetched],
    out: Output,
    all_namespaces: bool,
    limit: float,
) -> None:
    """Poll and print each resource whose state changed (one row, or one document)."""
    started = time.monotonic()
    whole = out.is_template or out.is_custom or out.format in (OutputFormat.JSON, OutputFormat.YAML)

    def key(i: Fetched) -> tuple[str, str, str]:
        return (i.kind, i.namespace, i.name)

    def plain(i: Fetched) -> list[str]:
        return [Text.from_markup(c).plain for c in table_row(i, out, all_namespaces, False)]

    def state(i: Fetched) -> str:
        if whole:
            m = i.manifest
            return json.dumps({"spec": m.get("spec"), "status": m.get("status")}, sort_keys=True)
        # A table row without AGE: a line is printed when something a person sees changed.
        age = table_header(i.kind, out, all_namespaces).index("AGE")
        return "\t".join(c for n, c in enumerate(plain(i)) if n != age)

    seen = {key(i): state(i) for i in first}
    widths: dict[str, list[int]] = {}
    for kind in {i.kind for i in first}:
        header = table_header(kind, out, all_namespaces)
        rows = [plain(i) for i in first if i.kind == kind]
        widths[kind] = [max([len(h), *(len(r[c]) for r in rows)]) for c, h in enumerate(header)]
    while not limit or time.monotonic() - started < limit:
        await asyncio.sleep(WATCH_INTERVAL)
        found, _ = await reread()  # type: ignore[misc]
        for item in found:
            if seen.get(key(item)) == state(item):
                continue
            seen[key(item)] = state(item)
            _print_change(item, out, all_namespaces, widths)


def _print_change(
    item: Fetched, out: Output, all_namespaces: bool, widths: dict[str, list[int]]
) -> None:
    output = out.format
    if out.is_template:
        print_template(out, item.manifest)
    elif out.is_custom:
        print_custom_columns(out, [item], header=False)
    elif output is OutputFormat.JSON:
        print(json.dumps(item.manifest))
    elif output is OutputFormat.YAML:
        print("---\n" + yaml.safe_dump(item.manifest, sort_keys=False), end="")
    elif output is OutputFormat.NAME:
        print(resource_name(item.kind, item.name))
    else:
        header = table_header(item.kind, out, all_namespaces)
        row = table_row(item, out, all_namespaces, False)
        if item.kind not in widths:
            show = not out.no_headers
            widths[item.kind] = print_plain(header, [row], show_header=show, widths=None)
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
