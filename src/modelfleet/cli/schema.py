"""``modelfleet schema KIND``: the JSON Schema of a resource kind, for editors and linters."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from modelfleet.api.kinds import KINDS, resolve_kind
from modelfleet.cli.output import EXIT_INVALID, err_console


def schema(
    kind: Annotated[str, typer.Argument(help="Kind or short name, e.g. ModelDeployment or md.")],
) -> None:
    """Print the JSON Schema of KIND (camelCase field names, as written in manifests)."""
    try:
        resolved = resolve_kind(kind)
    except ValueError as exc:
        err_console.print(f"error: {exc}")
        raise typer.Exit(EXIT_INVALID) from None
    model = KINDS[resolved]
    print(json.dumps(model.model_json_schema(by_alias=True, mode="validation"), indent=2))
