"""kubectl's uses of a JSONPath beyond templates: the relaxed path of ``-o custom-columns`` and
``--sort-by`` (``.a.b``, ``a.b`` or ``{.a.b}``), custom-columns specs and cells, and the table
layout of Go's ``tabwriter`` as kubectl's printers set it up. Pure; the paths themselves are
``cli.jsonpath``'s."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from modelfleet.cli.jsonpath import JsonPathError, Path, find, go_sprint, parse

_RELAXED = re.compile(r"^\{?(\.?[^{}]+)\}?$")


def relaxed(expr: str) -> Path:
    """kubectl's relaxed path (custom-columns, ``--sort-by``): ``.a.b``, ``a.b`` or ``{.a.b}``."""
    if not expr:
        raise JsonPathError("an empty path")
    m = _RELAXED.match(expr)
    if not m:
        raise JsonPathError(
            f"unexpected path string, expected a 'name1.name2' or "
            f"'.name1.name2' or '{{name1.name2}}' or '{{.name1.name2}}': {expr!r}"
        )
    inner = m.group(1)
    nodes = parse("{" + (inner if inner.startswith(".") else "." + inner) + "}")
    if len(nodes) != 1 or not isinstance(nodes[0], Path):
        raise JsonPathError(f"{expr!r} is not a path")
    return nodes[0]


@dataclass(frozen=True)
class Column:
    header: str
    path: Path


def parse_columns(spec: str) -> list[Column]:
    """``-o custom-columns=HEADER:PATH,...``."""
    if not spec:
        raise JsonPathError("custom-columns format specified but no custom columns given")
    columns = []
    for part in spec.split(","):
        header, sep, expr = part.partition(":")
        if not sep:
            raise JsonPathError(
                f"unexpected custom-columns spec: {part}, expected <header>:<json-path-expr>"
            )
        columns.append(Column(header, relaxed(expr)))
    return columns


def column_cells(columns: list[Column], item: Any) -> list[str]:
    """One custom-columns row: a column's values comma-joined, ``<none>`` when there are none."""
    cells = []
    for column in columns:
        values = find(column.path, item, item)
        cells.append(",".join(go_sprint(v) for v in values) if values else "<none>")
    return cells


def tabulate(rows: list[list[str]]) -> str:
    """Go's ``tabwriter`` as kubectl's printers set it up (minimum width 6, padding 3): every
    column but the last padded to its widest cell plus 3, at least 6."""
    if not rows:
        return ""
    ncols = max(len(r) for r in rows)
    widths = [max([6, *(len(r[c]) + 3 for r in rows if c < len(r))]) for c in range(ncols - 1)]
    lines = []
    for r in rows:
        cells = [cell.ljust(widths[c]) if c < ncols - 1 else cell for c, cell in enumerate(r)]
        lines.append("".join(cells) + "\n")
    return "".join(lines)
