"""What ``modelfleet dev``, ``demo`` and ``sim up`` claim before they start anything: their state
directories (a lock file each, held for the life of the process, so two stacks never share one
fleet's kubeconfigs and state) and the fixed ports they were told to bind. A claim that fails is
one line naming the port or directory and, where it can be found, the process holding it; exit 1.

Nothing here starts a server or a worker; the lock is released by the kernel when the process
ends, however it ends, so a killed stack never leaves a stale claim.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import typer
from rich.markup import escape

from modelfleet.cli.output import EXIT_FAILED, err_console
from modelfleet.worker.ports import describe_taken, port_taken

LOCK_FILE = "modelfleet.lock"


class ClaimError(Exception):
    """A port or state directory another process holds (the message is the one line shown)."""


@contextlib.contextmanager
def _locked(state_dir: Path, command: str) -> Iterator[None]:
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 4096).decode(errors="replace").strip()
            pid, _, held_by = holder.partition(" ")
            by = f" by pid {pid} ({held_by})" if pid.isdigit() else ""
            raise ClaimError(
                f"state directory {state_dir} is in use{by}; stop it, or use another --state-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {command}\n".encode())
        yield
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def claim(
    command: str,
    state_dirs: Sequence[Path],
    ports: Mapping[str, int | None] | None = None,
) -> Iterator[None]:
    """Hold every state directory and check every fixed port (option name -> port; None or 0:
    picked free later) for the body; print one line and exit 1 if another process has one."""
    try:
        with contextlib.ExitStack() as held:
            for state_dir in state_dirs:
                held.enter_context(_locked(state_dir, command))
            for option, port in (ports or {}).items():
                if port and port_taken(port):
                    raise ClaimError(
                        describe_taken(port, option)
                        + f"; stop it, or choose a free port with {option}"
                    )
            yield
    except ClaimError as exc:
        err_console.print(f"[red]error[/]: {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(EXIT_FAILED) from None


def clear_state_dir(state_dir: Path) -> None:
    """Remove everything in ``state_dir`` but its lock file (held by this process)."""
    if not state_dir.is_dir():
        return
    for entry in state_dir.iterdir():
        if entry.name == LOCK_FILE:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
