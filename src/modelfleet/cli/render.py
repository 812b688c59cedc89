"""``modelfleet render -f PATH...``: plan as ``modelfleet plan`` does, then print the Kubernetes
manifests each placed replica would apply, ready for ``kubectl apply -f -``."""

from __future__ import annotations

import json
from typing import Annotated

import typer
import yaml

from modelfleet.cli.output import EXIT_INVALID, OutputFormat, err_console
from modelfleet.cli.plan import plan_resources
from modelfleet.cli.validate import FilesOption, load_or_exit
from modelfleet.rendering.replica_manifests import ClusterFacts, render_replica


def render(
    files: FilesOption,
    replica: Annotated[
        str | None, typer.Option("--replica", help="Only this replica (name from `plan`).")
    ] = None,
    output: Annotated[
        OutputFormat, typer.Option("--output", "-o", help="yaml (default) or json.")
    ] = OutputFormat.YAML,
) -> None:
    """Print the manifests of every placed replica (or one), in apply order."""
    loaded = load_or_exit(files)
    placed = [r for p in plan_resources(loaded.resources) for r in (*p.kept, *p.placed)]
    if replica is not None:
        placed = [r for r in placed if r.name == replica]
        if not placed:
            err_console.print(
                f"[red]error[/]: no placed replica named {replica!r}; see `modelfleet plan`"
            )
            raise typer.Exit(EXIT_INVALID)
    manifests = []
    for r in placed:
        manifests.extend(render_replica(r, ClusterFacts()).manifests())
    if output is OutputFormat.JSON:
        print(json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests}, indent=2))
    else:
        print(yaml.safe_dump_all(manifests, sort_keys=False), end="")
