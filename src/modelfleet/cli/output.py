"""Shared CLI output helpers: one rich console for people (stdout), one for diagnostics
(stderr), and structured output (``-o json|yaml``) for scripts. No business logic here."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

import typer
import yaml
from rich.console import Console
from temporalio.client import WorkflowUpdateFailedError

from modelfleet.api.kinds import resolve_kind
from modelfleet.api.manifest_errors import ManifestError

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INVALID = 2


class OutputFormat(StrEnum):
    TABLE = "table"
    WIDE = "wide"
    JSON = "json"
    YAML = "yaml"


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
    try:
        return resolve_kind(word)
    except ValueError as exc:
        err_console.print(f"[red]error[/]: {exc}")
        raise typer.Exit(EXIT_INVALID) from None


def rejection_reason(exc: WorkflowUpdateFailedError) -> str:
    """Why a workflow's Update validator (or handler) refused: its own message, not the SDK's
    wrapping of it."""
    cause = exc.cause
    if cause is None:
        return str(exc)
    return str(cause.__cause__ or cause)
