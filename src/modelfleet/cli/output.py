"""Shared CLI output helpers: one rich console for people (stdout), one for diagnostics
(stderr), tables, and structured output (``-o json|yaml``) for scripts. No business logic here.

On a terminal, tables fit its width; anywhere else (a pipe, a file) nothing is ever wrapped or
cut, so ``modelfleet get replicas | awk`` sees whole names and links.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import typer
import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

from modelfleet.api.manifest_errors import ManifestError

# Re-exported: the CLI prints it, the controller writes it to a condition.
from modelfleet.applying.entities import rejection_reason as rejection_reason


class _Console(Console):
    """A console that never wraps or cuts text when it is not writing to a terminal."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        if not self.is_terminal:
            kwargs.setdefault("soft_wrap", True)
            kwargs.setdefault("crop", False)
        super().print(*objects, **kwargs)


console = _Console(highlight=False)
err_console = _Console(stderr=True, highlight=False)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INVALID = 2


class OutputFormat(StrEnum):
    TABLE = "table"
    WIDE = "wide"
    JSON = "json"
    YAML = "yaml"
    NAME = "name"


def stdout_is_terminal() -> bool:
    return bool(getattr(sys.stdout, "isatty", lambda: False)())


def print_table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    flexible: Sequence[str] = (),
    show_header: bool = True,
    widths: Sequence[int] | None = None,
) -> list[int]:
    """Print a kubectl-style table; returns the column widths used (for ``--watch`` rows).

    On a terminal it is a rich table fitted to the width: the ``flexible`` columns (messages,
    reasons) give way first, with an ellipsis. Elsewhere it is plain text, every cell whole,
    columns separated by three spaces, no colour.
    """
    if not stdout_is_terminal():
        return print_plain(header, rows, show_header=show_header, widths=widths)
    table = Table(box=None, header_style="bold", show_header=show_header, pad_edge=False)
    for i, h in enumerate(header):
        if h in flexible:
            table.add_column(h, overflow="ellipsis", no_wrap=True, ratio=1)
        else:
            # Names and links keep their width; only the flexible columns give way.
            whole = max([len(h), *(len(Text.from_markup(r[i]).plain) for r in rows)])
            table.add_column(h, no_wrap=True, min_width=whole)
    for row in rows:
        table.add_row(*row)
    console.print(table, soft_wrap=False)
    return list(widths or [])


def print_plain(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    show_header: bool,
    widths: Sequence[int] | None,
) -> list[int]:
    plain_rows = [[Text.from_markup(c).plain for c in row] for row in rows]
    if widths is None:
        widths = [max([len(h), *(len(r[i]) for r in plain_rows)]) for i, h in enumerate(header)]
    out = [list(header)] if show_header else []
    out.extend(plain_rows)
    for row in out:
        cells = [c.ljust(w) for c, w in zip(row, widths, strict=False)]
        sys.stdout.write("   ".join(cells).rstrip() + "\n")
    sys.stdout.flush()
    return list(widths)


def human_age(since: datetime | None, now: datetime | None = None) -> str:
    """kubectl's AGE: 45s, 3m20s, 17m, 5h10m, 30h, 3d4h, 45d, 2y30d; ``<unknown>`` if unset."""
    if since is None:
        return "<unknown>"
    now = now or datetime.now(UTC)
    seconds = int((now - since).total_seconds())
    if seconds < -1:
        return "<invalid>"
    seconds = max(seconds, 0)
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{seconds}s"
    if minutes < 10:
        s = seconds % 60
        return f"{minutes}m{s}s" if s else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        m = minutes % 60
        return f"{hours}h{m}m" if m else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{days}d{h}h" if h else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    years = days // 365
    if years < 8:
        d = days % 365
        return f"{years}y{d}d" if d else f"{years}y"
    return f"{years}y"


def print_structured(data: Any, fmt: OutputFormat) -> None:
    """Print ``data`` as JSON or YAML on stdout, unstyled so scripts can parse it."""
    if fmt is OutputFormat.JSON:
        print(json.dumps(data, indent=2, sort_keys=False))
    else:
        print(yaml.safe_dump(data, sort_keys=False), end="")


def print_manifest_errors(errors: list[ManifestError]) -> None:
    """Every error, each with file, line, document, field path and reason."""
    for e in errors:
        where = f"{e.source}:{e.line}" if e.line else e.source
        subject = f" ({e.subject})" if e.subject else ""
        err_console.print(
            f"[bold red]error[/]: {where}: document {e.document}{subject}: "
            f"[bold]{e.field}[/]: {e.reason}",
            markup=True,
            soft_wrap=True,
        )
    n = len(errors)
    err_console.print(f"{n} error{'s' if n != 1 else ''}; nothing was changed.")


def kind_or_exit(word: str) -> str:
    """The kind a CLI word names (``md``, ``clusters``...), or exit 2 saying which exist."""
    from modelfleet.cli.errors import UsageError  # errors prints through this module
    from modelfleet.cli.kinds import resolve  # the registry's columns print through it too

    try:
        return resolve(word)
    except UsageError as exc:
        err_console.print(f"[red]error[/]: {exc}")
        raise typer.Exit(EXIT_INVALID) from None
