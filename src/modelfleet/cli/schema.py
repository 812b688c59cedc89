"""``modelfleet schema KIND``: the JSON Schema of a resource kind, for editors and linters."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from modelfleet.api.kinds import KINDS
from modelfleet.cli.output import kind_or_exit


def schema(
    kind: Annotated[str, typer.Argument(help="Kind or short name, e.g. ModelDeployment or md.")],
) -> None:
    """Print the JSON Schema of KIND (camelCase field names, as written in manifests)."""
    model = KINDS[kind_or_exit(kind)]
    print(json.dumps(model.model_json_schema(by_alias=True, mode="validation"), indent=2))
