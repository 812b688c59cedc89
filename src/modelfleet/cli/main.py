"""The ``modelfleet`` command: kubectl-like verbs over the fleet. This module only wires verbs
together; each verb lives in its own module and calls into the library layers.

Nothing here, nor in the verb modules it imports, imports the simulator or the Temporal dev
server at import time: those come with the ``sim`` extra and are loaded by the verbs that need
them (``dev``, ``demo``, ``sim up``), so ``pip install modelfleet`` runs every other verb."""

from __future__ import annotations

import os
import sys
from importlib.metadata import version as package_version
from typing import Annotated

import typer

from modelfleet.cli.apply import apply
from modelfleet.cli.autoscaler import autoscaler_app
from modelfleet.cli.connection import (
    ProfileOption,
    RootAddressOption,
    RootNamespaceOption,
    use_connection,
    use_profile,
)
from modelfleet.cli.controller import controller
from modelfleet.cli.crds import crds
from modelfleet.cli.dev import demo, dev
from modelfleet.cli.diff import diff
from modelfleet.cli.errors import GuardedGroup
from modelfleet.cli.inspect import describe, get
from modelfleet.cli.mutate import delete, scale
from modelfleet.cli.plan import plan
from modelfleet.cli.render import render
from modelfleet.cli.rollout import rollout_app
from modelfleet.cli.schema import schema
from modelfleet.cli.sim import sim_app
from modelfleet.cli.validate import validate
from modelfleet.cli.worker import worker

app = typer.Typer(
    name="modelfleet",
    help="Fleet manager for LLM inference on Kubernetes GPU clusters, orchestrated by Temporal.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish
    pretty_exceptions_enable=False,
    cls=GuardedGroup,  # the one error boundary: messages and exit codes, never a traceback
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
    profile: ProfileOption = None,
    address: RootAddressOption = None,
    temporal_namespace: RootNamespaceOption = None,
) -> None:
    """modelfleet: describe GPU hardware, clusters and models; roll models out durably."""
    use_profile(profile)
    use_connection(address, temporal_namespace)


app.command("validate")(validate)
app.command("schema")(schema)
app.command("crds")(crds)
app.command("plan")(plan)
app.command("render")(render)
app.command("apply")(apply)
app.command("diff")(diff)
app.command("get")(get)
app.command("describe")(describe)
app.command("scale")(scale)
app.command("delete")(delete)
app.command("worker")(worker)
app.command("controller")(controller)
app.command("dev")(dev)
app.command("demo")(demo)

app.add_typer(rollout_app, name="rollout")
app.add_typer(sim_app, name="sim")
app.add_typer(autoscaler_app, name="autoscaler")


def run() -> None:
    """The console script. It leaves with ``os._exit`` after flushing: the Temporal client's
    native threads can abort a normal interpreter shutdown (sdk-python #300)."""
    code: int
    try:
        app()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
