"""The CLI's one error boundary: every exception that escapes a verb becomes a message on stderr
and an exit code (1: something failed at run time, 2: the input was wrong), never a traceback.

Verbs raise ``CliError`` subclasses for problems they can name themselves (unknown resource, no
worker); everything else (Temporal RPC errors, rejected updates, invalid manifests) is mapped
here by class. ``MODELFLEET_DEBUG=1`` lets the original exception through for developers.
"""

from __future__ import annotations

import os
from typing import Any

import typer
from temporalio.client import (
    RPCTimeoutOrCancelledError,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError, RPCStatusCode
from typer.core import TyperGroup
from typer.exceptions import TyperException

from modelfleet.api.manifest_errors import InvalidManifestsError, InvalidResourceError
from modelfleet.cli.output import (
    EXIT_FAILED,
    EXIT_INVALID,
    err_console,
    print_manifest_errors,
    rejection_reason,
)

ENV_DEBUG = "MODELFLEET_DEBUG"
START_WORKER = "start one with `modelfleet worker` (or run everything with `modelfleet dev`)"


class CliError(Exception):
    """A problem the CLI can describe in a sentence; exit 1 unless a subclass says otherwise."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(CliError):
    """The command line or the input was wrong (exit 2)."""

    exit_code = EXIT_INVALID


class NotFoundError(CliError):
    """A named resource does not exist (exit 1, as kubectl)."""


class NoWorkerError(CliError):
    """Nothing answers on the task queue, so queries and updates would hang."""


def explain(exc: BaseException) -> tuple[int, str]:
    """The exit code and the message for an exception that escaped a verb."""
    if isinstance(exc, CliError):
        return exc.exit_code, exc.message
    if isinstance(exc, InvalidResourceError):
        lines = [f"{e.field}: {e.reason}" for e in exc.errors]
        return EXIT_INVALID, f"{exc.subject} is invalid: " + "; ".join(lines)
    if isinstance(exc, WorkflowUpdateFailedError):
        return EXIT_INVALID, f"rejected: {rejection_reason(exc)}"
    if isinstance(exc, WorkflowUpdateRPCTimeoutOrCancelledError | RPCTimeoutOrCancelledError):
        return EXIT_FAILED, f"no worker answered in time; {START_WORKER}"
    if isinstance(exc, WorkflowQueryRejectedError):
        return EXIT_FAILED, f"the workflow refused the query (status {exc.status})"
    if isinstance(exc, WorkflowQueryFailedError):
        return EXIT_FAILED, f"the workflow could not answer: {exc.message}"
    if isinstance(exc, RPCError):
        return EXIT_FAILED, _rpc_message(exc)
    if isinstance(exc, TimeoutError):
        return EXIT_FAILED, "timed out waiting for Temporal"
    if isinstance(exc, OSError):
        return EXIT_FAILED, f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
    return EXIT_FAILED, (
        f"unexpected {type(exc).__name__}: {exc} (set {ENV_DEBUG}=1 to see the traceback; "
        "please report it)"
    )


def _rpc_message(exc: RPCError) -> str:
    if exc.status is RPCStatusCode.UNAVAILABLE:
        return (
            f"lost the connection to Temporal ({exc.message}); is the server up? "
            "`modelfleet dev` starts one locally"
        )
    if exc.status is RPCStatusCode.DEADLINE_EXCEEDED:
        return f"Temporal did not answer in time ({exc.message}); {START_WORKER}"
    if exc.status is RPCStatusCode.NOT_FOUND:
        return f"not found: {exc.message}"
    return f"Temporal error ({exc.status.name}): {exc.message}"


def report(exc: BaseException) -> int:
    """Print ``exc`` for a person and return the exit code."""
    if isinstance(exc, InvalidManifestsError):
        print_manifest_errors(exc.errors)
        return EXIT_INVALID
    code, message = explain(exc)
    err_console.print(f"[red]error[/]: {message}", soft_wrap=True, markup=True, highlight=False)
    return code


class GuardedGroup(TyperGroup):
    """The root command group: runs the verb and turns any escaping exception into a message."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:
            # Typer's own usage errors (bad option, missing argument) print themselves, exit 2.
            if isinstance(exc, TyperException) or os.environ.get(ENV_DEBUG):
                raise
            raise typer.Exit(report(exc)) from None
