"""``modelfleet crds``: the CustomResourceDefinitions of the modelfleet kinds, ready for
``kubectl apply -f -`` on a management cluster (``api.crds`` makes them)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
import yaml

from modelfleet.api.crds import custom_resource_definitions
from modelfleet.cli.output import EXIT_INVALID, OutputFormat, err_console


def crds(
    output: Annotated[
        OutputFormat, typer.Option("--output", "-o", help="yaml (default) or json (a List).")
    ] = OutputFormat.YAML,
    modelplane: Annotated[
        bool,
        typer.Option(
            "--modelplane/--no-modelplane",
            help="Also the CRDs of the Modelplane groups (modelplane.ai), so Modelplane "
            "documents apply unchanged; leave them out where Modelplane itself still runs.",
        ),
    ] = True,
) -> None:
    """Print the CRDs of every modelfleet kind, as multi-document YAML (or a JSON List)."""
    definitions = custom_resource_definitions(modelplane=modelplane)
    if output is OutputFormat.JSON:
        print(json.dumps({"apiVersion": "v1", "kind": "List", "items": definitions}, indent=2))
    elif output is OutputFormat.YAML:
        print(yaml.safe_dump_all(definitions, sort_keys=False), end="")
    else:
        err_console.print(f"[red]error[/]: --output {output.value}: use yaml or json")
        raise typer.Exit(EXIT_INVALID)
