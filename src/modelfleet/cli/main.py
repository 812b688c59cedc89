"""The ``modelfleet`` command: kubectl-like verbs over the fleet. This module only wires verbs
together; each verb lives in its own module and calls into the library layers."""

from __future__ import annotations

from importlib.metadata import version as package_version
from typing import Annotated

import typer

from modelfleet.cli.schema import schema
from modelfleet.cli.validate import validate

app = typer.Typer(
    name="modelfleet",
    help="Fleet manager for LLM inference on Kubernetes GPU clusters, orchestrated by Temporal.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        print(f"modelfleet {package_version('modelfleet')}")
        raise typer.Exit(0)


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
) -> None:
    """modelfleet: describe GPU hardware, clusters and models; roll models out durably."""


app.command("validate")(validate)
app.command("schema")(schema)


def run() -> None:
    app()
