"""Which local process listens on a TCP port: so a development stack that finds its port taken
can say by whom, and can tell its own server from another one answering on the same port.

Standard library only; Linux's ``/proc`` is read when present (elsewhere the holder is simply
unknown). Only this user's processes can be named: another user's show as unknown.
"""

from __future__ import annotations

import contextlib
import os
import socket
from dataclasses import dataclass
from pathlib import Path

_LISTEN = "0A"  # the TCP state LISTEN in /proc/net/tcp
_SHOWN = 6
_WORD = 40


@dataclass(frozen=True)
class PortHolder:
    pid: int
    command: str

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.command})" if self.command else f"pid {self.pid}"


def port_taken(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a listener already holds ``host:port`` (as a server binding it would find: with
    SO_REUSEADDR, so connections lingering in TIME_WAIT do not count)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if len(parts) <= 9 or parts[3] != _LISTEN:
                continue
            if int(parts[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(parts[9])
    return inodes


def _command(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return ""
    words = [" ".join(a.decode(errors="replace").split()) for a in argv if a.strip()]
    if not words:
        return ""
    words[0] = os.path.basename(words[0])
    # One line, short: each word cut, at most a few of them (a `python -c` script is long).
    shown = " ".join(w if len(w) <= _WORD else w[: _WORD - 3] + "..." for w in words[:_SHOWN])
    return shown + (" ..." if len(words) > _SHOWN else "")


def port_holder(port: int) -> PortHolder | None:
    """The process listening on ``port``, when this user can see it; None otherwise."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    proc = Path("/proc")
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (entry / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in wanted:
                        pid = int(entry.name)
                        return PortHolder(pid, _command(pid))
    return None


def describe_taken(port: int, what: str) -> str:
    """``port 7233 (Temporal) is in use by pid 42 (temporal server start-dev ...)``."""
    holder = port_holder(port)
    by = f" by {holder}" if holder is not None else ""
    return f"port {port} ({what}) is in use{by}"
