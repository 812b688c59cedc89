"""Machine-wide slots for integration test files, so that two test runs on one machine share it
instead of overloading it: a pytest plugin loaded by ``tests/conftest.py``.

An integration file brings up a stack of its own (a Temporal dev server, the simulated fleet, a
worker) and most of its tests wait on that stack's timers and tasks. ``make test`` runs four
such files at once, which a 2-core machine carries; a second ``make test`` beside it doubles
that, and (before the slots) its long scenarios (an autoscaler's load test, a front door dark
for a minute) ran past the hang guard's 240 s and failed, in both runs. Like make's jobserver,
the runs share one pool: each process holds one of ``MODELFLEET_TEST_SLOTS`` slots (default:
two per core) from the first test of an integration file until that file's last test ends (its
module fixtures torn down), and a process that finds every slot taken waits for one. The wait
comes before the test's protocol starts, so it is not counted in the test's time limit (the
hang guard's phases begin after it).

A slot is an ``flock`` on a file in ``MODELFLEET_TEST_SLOT_DIR`` (default: a directory per user
in the system's temporary directory): the kernel lets it go when the process that holds it dies,
so a crashed or killed run frees its slot. One run of ``make test`` (four processes, four slots
on two cores) never waits. A process that waited says so in its first test's report (section
"machine slot"), as does the summary of a run that waited at all.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Generator
from pathlib import Path
from typing import IO

import pytest

SLOTS_ENV = "MODELFLEET_TEST_SLOTS"
DIR_ENV = "MODELFLEET_TEST_SLOT_DIR"
MARKER = "integration"
WAITED_PROPERTY = "machine_slot_wait_seconds"
# How often a waiting process tries the slots again: a file lasts tens of seconds, so half a
# second costs nothing and keeps the wait from spinning.
_RETRY_SECONDS = 0.5


def slot_count() -> int:
    raw = os.environ.get(SLOTS_ENV, "")
    if raw.strip():
        try:
            value = int(raw)
        except ValueError:
            raise pytest.UsageError(f"{SLOTS_ENV}={raw!r}: expected a whole number >= 1") from None
        if value < 1:
            raise pytest.UsageError(f"{SLOTS_ENV}={raw!r}: expected a whole number >= 1")
        return value
    return max(2, 2 * (os.cpu_count() or 1))


def slot_dir() -> Path:
    raw = os.environ.get(DIR_ENV, "")
    # Per user: another user's slot files could not be opened for writing.
    default = Path(tempfile.gettempdir()) / f"modelfleet-test-slots-{os.getuid()}"
    return Path(raw) if raw else default


def _try_slots(directory: Path, count: int) -> IO[bytes] | None:
    """An open, locked slot file, or None when all ``count`` are held."""
    for index in range(count):
        handle = open(directory / f"slot-{index}", "ab")  # noqa: SIM115 (held until released)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        return handle
    return None


def acquire(directory: Path, count: int) -> tuple[IO[bytes], float]:
    """Wait for a slot: the locked slot file and the seconds waited."""
    directory.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    while (handle := _try_slots(directory, count)) is None:
        time.sleep(_RETRY_SECONDS)
    return handle, time.monotonic() - started


def release(handle: IO[bytes]) -> None:
    fcntl.flock(handle, fcntl.LOCK_UN)
    handle.close()


class MachineSlots:
    def __init__(self) -> None:
        self.count = slot_count()
        self.directory = slot_dir()
        self.held: IO[bytes] | None = None
        # (test, seconds) of the files that waited: this process's, or under xdist the
        # controller's collection of every worker's (from the reports' user properties).
        self.waited: list[tuple[str, float]] = []

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, None, None]:
        needs = item.get_closest_marker(MARKER) is not None
        if needs and self.held is None:
            self.held, waited = acquire(self.directory, self.count)
            if waited >= 1.0:
                item.user_properties.append((WAITED_PROPERTY, round(waited, 1)))
                item.add_report_section(
                    "setup",
                    "machine slot",
                    f"waited {waited:.1f} s for one of {self.count} machine-wide slots "
                    f"({self.directory})",
                )
        try:
            yield
        finally:
            # The file's module fixtures are torn down in its last test's teardown, the one
            # whose next test is in another file (or that has none).
            if self.held is not None and (nextitem is None or nextitem.path != item.path):
                release(self.held)
                self.held = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "setup":
            for key, value in report.user_properties:
                if key == WAITED_PROPERTY and isinstance(value, int | float):
                    self.waited.append((report.nodeid, float(value)))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.waited:
            total = sum(seconds for _, seconds in self.waited)
            terminalreporter.write_line(
                f"machine slots: {len(self.waited)} integration file(s) waited {total:.0f} s "
                f"in all for one of {self.count} machine-wide slots (taken by this run or another "
                f"on the machine)"
            )


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("machine-slots"):
        config.pluginmanager.register(MachineSlots(), "machine-slots")
