"""Machine-wide slots (tests/machine_slots.py), proved with two pytest runs side by side (each a
subprocess, bounded), sharing a slot directory: each runs one integration-marked test that holds
its file until it sees the other run's test running, or for ``HOLD`` seconds.

- With one slot the two tests never overlap, the second waited for the first's slot, and that
  wait is not counted in its time limit (the limit is shorter than the wait plus the hold).
- With two slots (the control) they run at the same time, so the first check could fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
SRC = TESTS.parent / "src"
HOLD = 8.0
# Shorter than what the second run's test would take if its wait for a slot (about HOLD) were
# counted: HOLD + HOLD.
LIMIT = 12
RUN_LIMIT = 120
PLUGINS = ["-p", "hang_guard", "-p", "machine_slots", "-p", "no:cacheprovider", "-p", "no:randomly"]

INI = f"""
[pytest]
timeout = {LIMIT}
timeout_func_only = false
hang_guard_grace = 3
"""

HOLDER = f"""
import os
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
LOG = Path(os.environ["SLOT_TEST_LOG"])


def _running(log: str) -> set[str]:
    started = {{line.split()[1] for line in log.splitlines() if line.startswith("start ")}}
    ended = {{line.split()[1] for line in log.splitlines() if line.startswith("end ")}}
    return started - ended


def test_holds_the_file() -> None:
    me = os.environ["SLOT_TEST_NAME"]
    with LOG.open("a") as f:
        f.write(f"start {{me}} {{time.time()}}\\n")
    deadline = time.monotonic() + {HOLD}
    overlapped = False
    while time.monotonic() < deadline:
        if _running(LOG.read_text()) - {{me}}:
            overlapped = True
            break
        time.sleep(0.1)
    with LOG.open("a") as f:
        f.write(f"end {{me}} {{time.time()}} {{'overlap' if overlapped else 'alone'}}\\n")
"""


def _run_pair(tmp_path: Path, slots: int) -> tuple[list[str], list[str]]:
    """Two runs of the holder test started together; their outputs and the shared log."""
    (tmp_path / "pytest.ini").write_text(INI)
    (tmp_path / "test_holder.py").write_text(HOLDER)
    log = tmp_path / "log"
    log.touch()
    procs = []
    for name in ("a", "b"):
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(TESTS), str(SRC)]),
            "SLOT_TEST_LOG": str(log),
            "SLOT_TEST_NAME": name,
            "MODELFLEET_TEST_SLOTS": str(slots),
            "MODELFLEET_TEST_SLOT_DIR": str(tmp_path / "slots"),
        }
        env.pop("PYTEST_XDIST_WORKER", None)
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "pytest", *PLUGINS, "-rA", "test_holder.py"],
                cwd=tmp_path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outputs = []
    for proc in procs:
        try:
            out, _ = proc.communicate(timeout=RUN_LIMIT)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise
        outputs.append(out)
        assert proc.returncode == 0, out
    return outputs, log.read_text().splitlines()


def _intervals(log: list[str]) -> dict[str, tuple[float, float, str]]:
    start = {w[1]: float(w[2]) for w in (line.split() for line in log) if w[0] == "start"}
    return {
        w[1]: (start[w[1]], float(w[2]), w[3])
        for w in (line.split() for line in log)
        if w[0] == "end"
    }


def test_one_slot_runs_the_files_one_after_the_other(tmp_path: Path) -> None:
    outputs, log = _run_pair(tmp_path, slots=1)
    spans = _intervals(log)
    assert sorted(spans) == ["a", "b"], log
    first, second = sorted(spans.values())
    assert first[2] == second[2] == "alone", log
    assert first[1] <= second[0], log
    # The second run waited for the slot (about HOLD), said so, and still passed its limit.
    waited = [out for out in outputs if "machine slot" in out and "waited" in out]
    assert len(waited) == 1, outputs
    assert "machine slots: 1 integration file(s) waited" in waited[0], waited[0]


def test_two_slots_run_them_together(tmp_path: Path) -> None:
    outputs, log = _run_pair(tmp_path, slots=2)
    spans = _intervals(log)
    assert sorted(spans) == ["a", "b"], log
    first, second = sorted(spans.values())
    assert second[0] < first[1], log
    assert "overlap" in {first[2], second[2]}, log
    assert not any("machine slots:" in out for out in outputs), outputs
