"""``modelfleet dev``, ``demo`` and ``sim up`` as real processes refuse to start on a port or a
state directory another process holds: exit 1, one line naming the port or directory and the
process holding it, and nothing started (no Temporal server state, no banner, no worker). Before
this, a second ``dev`` on busy ports printed ``modelfleet dev is up`` and ran its worker against
the first stack's server. Every subprocess has a bounded timeout; nothing sleeps."""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelfleet.cli.devlock import LOCK_FILE

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
EXIT_FAILED = 1


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
        "COLUMNS": "300",
    }
    return subprocess.run(
        [sys.executable, "-m", "modelfleet.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
        cwd=ROOT,
    )


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port this test process listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.fixture
def free_ui_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _hold(state_dir: Path, command: str) -> int:
    """Hold ``state_dir``'s lock as a running stack does (this test process is the holder)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(state_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, f"{os.getpid()} {command}\n".encode())
    return fd


def _refused(done: subprocess.CompletedProcess[str], *named: str) -> str:
    out = done.stdout + done.stderr
    assert done.returncode == EXIT_FAILED, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, out
    for text in named:
        assert text in lines[0], lines[0]
    assert "Traceback" not in out
    assert "Error" not in out
    assert "is up" not in out
    assert "sim ready" not in out
    return lines[0]


def test_dev_refuses_a_busy_temporal_port(
    tmp_path: Path, busy_port: int, free_ui_port: int
) -> None:
    state = tmp_path / "dev"
    done = _cli(
        "dev",
        "--fleet",
        str(QUICKSTART),
        "--state-dir",
        str(state),
        "--port",
        str(busy_port),
        "--ui-port",
        str(free_ui_port),
    )
    _refused(done, f"port {busy_port}", f"pid {os.getpid()}", "--port")
    # No server was started: it would have written its database and log here.
    assert not (state / "temporal").exists()
    assert not (state / "sim" / "kubeconfigs").exists()


def test_dev_refuses_a_busy_ui_port(tmp_path: Path, busy_port: int, free_ui_port: int) -> None:
    done = _cli(
        "dev",
        "--fleet",
        str(QUICKSTART),
        "--state-dir",
        str(tmp_path / "dev"),
        "--port",
        str(free_ui_port),
        "--ui-port",
        str(busy_port),
    )
    _refused(done, f"port {busy_port}", f"pid {os.getpid()}", "--ui-port")
    assert not (tmp_path / "dev" / "temporal").exists()


def test_dev_refuses_a_state_directory_in_use(tmp_path: Path, free_ui_port: int) -> None:
    state = tmp_path / "dev"
    fd = _hold(state, "modelfleet dev")
    try:
        done = _cli(
            "dev",
            "--fleet",
            str(QUICKSTART),
            "--state-dir",
            str(state),
            "--port",
            str(free_ui_port),
            "--ui-port",
            "0",
        )
    finally:
        os.close(fd)
    _refused(done, f"state directory {state}", f"pid {os.getpid()} (modelfleet dev)")
    assert not (state / "temporal").exists()


def test_demo_refuses_a_state_directory_in_use_and_leaves_it_alone(tmp_path: Path) -> None:
    state = tmp_path / "demo"
    fd = _hold(state, "modelfleet demo")
    (state / "theirs.txt").write_text("another demo's state\n")
    try:
        done = _cli("demo", "--once", "--fleet", str(QUICKSTART), "--state-dir", str(state))
    finally:
        os.close(fd)
    _refused(done, f"state directory {state}", f"pid {os.getpid()}")
    assert (state / "theirs.txt").exists()  # not wiped by the "fresh state" of a demo


def test_sim_up_refuses_a_busy_port(tmp_path: Path, busy_port: int) -> None:
    done = _cli(
        "sim", "up", "--fleet", str(QUICKSTART), "--state-dir", str(tmp_path / "sim"),
        "--port", str(busy_port), "--no-clouds",
    )  # fmt: skip
    _refused(done, f"port {busy_port}", f"pid {os.getpid()}")
    assert not (tmp_path / "sim" / "kubeconfigs").exists()


def test_sim_up_refuses_a_state_directory_in_use(tmp_path: Path) -> None:
    state = tmp_path / "sim"
    fd = _hold(state, "modelfleet sim up")
    try:
        done = _cli(
            "sim", "up", "--fleet", str(QUICKSTART), "--state-dir", str(state), "--no-clouds"
        )
    finally:
        os.close(fd)
    _refused(done, f"state directory {state}", f"pid {os.getpid()} (modelfleet sim up)")
    assert not (state / "kubeconfigs").exists()


def test_sim_up_refuses_the_fleet_directory_of_a_running_dev(tmp_path: Path) -> None:
    """``dev`` holds its fleet's directory too: ``sim up`` there would overwrite its kubeconfigs."""
    fd = _hold(tmp_path / "dev" / "sim", "modelfleet dev")
    try:
        done = _cli(
            "sim", "up", "--fleet", str(QUICKSTART), "--state-dir", str(tmp_path / "dev" / "sim"),
            "--no-clouds",
        )  # fmt: skip
    finally:
        os.close(fd)
    _refused(done, "in use", "(modelfleet dev)")
