"""The hang guard (tests/hang_guard.py), proved on synthetic tests that hang: each file runs in
a pytest of its own (a subprocess, bounded), with a 3 s timeout and 3 s between the guard's
steps, under xdist as ``make test`` runs (``-n 1 --dist loadfile``), and the output is read.

Both run side by side (they mostly wait out their timeouts).

- ``test_recoverable.py``: hangs the worker process recovers from: a synchronous sleep, an
  ``await`` that never ends while another task keeps the loop busy (pytest-timeout's own
  SIGALRM lands in that task and the test waits for ever), a blocking asyncio callback
  (pytest-timeout's ``Failed`` is swallowed there: the test passes), a coroutine whose
  clean-up waits for ever when cancelled, a test that catches the guard's cancellation and
  finishes (a pass past the timeout: failed all the same), and async and sync fixture
  teardowns that hang. Each fails (or errors at teardown) with every thread's stack, in the
  same worker, and the tests after them run. Also a failure pytest cannot format (CPython
  3.11.7's AST race did that to a workflow test under load): reported as failed, not an
  INTERNALERROR that ends the run.
- ``test_deadlock.py``: test_fleet_scale's hang: a real Temporal worker whose workflow failed
  the SDK's deadlock check (with a ``@pytest.mark.timeout`` of its own past the SDK's 2 s).
  Cancelled, its ``async with Worker`` waits for ever for the stuck activation: the interrupt
  ends it. The SDK's eviction loop ignores cancellation, so the session's event loop cannot
  close: the last test's teardown errors, naming the test the guard ended before.
- ``test_solo.py``: the GIL held without xdist: the processes its test started outlive it,
  and the next run kills them (their owner is gone).
- ``test_crashing.py``: hangs only an exit ends: the interrupt signal blocked, and the GIL held
  by a C call (the watchdog thread cannot run; faulthandler's C timer ends it). The worker is
  reported as crashed with its last words (the stacks), the processes it started die with it
  (a time-skipping test server, a dev server, a plain child in a session of its own), the test
  it crashed on is not run again, and the tests after it run on the replacement worker.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
SRC = TESTS.parent / "src"
TIMEOUT = 3
GRACE = 3
# The subprocess's own bound: far above what the guard needs (about 40 s under load), far
# below this test's own timeout.
RUN_LIMIT = 150

INI = f"""
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = session
asyncio_default_test_loop_scope = session
timeout = {TIMEOUT}
timeout_func_only = false
hang_guard_grace = {GRACE}
"""

RECOVERABLE = """
import asyncio
import time

import pytest
import pytest_asyncio


def test_sync_sleep_forever():
    time.sleep(3600)


async def test_event_wait_while_the_loop_is_busy():
    async def busy():
        while True:
            sum(range(20_000))
            await asyncio.sleep(0)

    task = asyncio.create_task(busy())
    try:
        await asyncio.Event().wait()
    finally:
        task.cancel()


async def test_blocking_asyncio_callback():
    asyncio.get_running_loop().call_soon(time.sleep, 3600)
    await asyncio.sleep(1)


async def test_waits_again_when_cancelled():
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        await asyncio.Event().wait()  # a clean-up that never ends (a worker's shutdown)


async def test_swallows_the_cancellation_and_finishes():
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        pass  # a retry helper that catches too much: the test goes on and would pass


@pytest_asyncio.fixture
async def async_teardown_hangs():
    yield
    await asyncio.Event().wait()


async def test_async_fixture_teardown_hangs(async_teardown_hangs):
    pass


@pytest.fixture
def sync_teardown_hangs():
    yield
    time.sleep(3600)


def test_sync_fixture_teardown_hangs(sync_teardown_hangs):
    pass


@pytest.fixture
def unformattable(request):
    def repr_failure(excinfo, style=None):
        raise SystemError("AST constructor recursion depth mismatch (before=147, after=192)")

    request.node.repr_failure = repr_failure


def test_a_failure_pytest_cannot_format(unformattable):
    assert 1 + 1 == 3


def test_after_the_hangs():
    pass
"""

CRASHING = """
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from modelfleet.worker.devserver import start_dev_server

PIDS = Path(os.environ["HANG_GUARD_PIDS"])


def record(*pids):
    with PIDS.open("a") as f:
        f.writelines(f"{pid}\\n" for pid in pids)


def test_before():
    pass


def test_interrupt_blocked():
    child = subprocess.Popen(["sleep", "3600"], start_new_session=True)
    record(child.pid)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
    time.sleep(3600)


def test_between():
    pass


async def test_gil_held_by_a_c_call(tmp_path):
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(Path(sys.executable).parent / "temporal-test-server")
    )
    server = await start_dev_server(tmp_path, ui=False, db_file=False)
    child = subprocess.Popen(["sleep", "3600"])
    tasks = Path("/proc/self/task").iterdir()
    children = [pid for task in tasks for pid in (task / "children").read_text().split()]
    record(server.process.pid, child.pid, *children)
    ctypes.PyDLL(None).sleep(3600)  # libc sleep(3), the GIL held


def test_after():
    pass
"""

DEADLOCK = """
import sys
import time
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker


@workflow.defn
class Stuck:
    @workflow.run
    async def run(self) -> None:
        time.sleep(3600)  # an activation that never yields: the SDK's deadlock check fails it


@pytest.mark.timeout(10)  # past the SDK's 2 s check, with start-up room
async def test_a_temporal_worker_after_a_deadlock():
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(Path(sys.executable).parent / "temporal-test-server")
    )
    try:
        async with Worker(
            env.client,
            task_queue="stuck",
            workflows=[Stuck],
            workflow_runner=UnsandboxedWorkflowRunner(),  # the sandbox forbids time.sleep
        ):
            handle = await env.client.start_workflow(Stuck.run, id="stuck", task_queue="stuck")
            await handle.result()
    finally:
        await env.shutdown()


def test_after():
    pass
"""

SOLO = """
import ctypes
import os
import subprocess
import sys
from pathlib import Path

from temporalio.testing import WorkflowEnvironment


async def test_gil_held_without_xdist():
    await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(Path(sys.executable).parent / "temporal-test-server")
    )
    subprocess.Popen(["sleep", "3600"], start_new_session=True)
    tasks = Path("/proc/self/task").iterdir()
    children = [pid for task in tasks for pid in (task / "children").read_text().split()]
    Path(os.environ["HANG_GUARD_PIDS"]).write_text("\\n".join(children))
    ctypes.PyDLL(None).sleep(3600)
"""


class Run:
    """A pytest of its own on one synthetic file, started at once; :meth:`result` waits for it
    (bounded: on ``RUN_LIMIT`` its whole session is killed and the test fails)."""

    def __init__(self, where: Path, name: str, body: str, *, xdist: bool = True) -> None:
        where.mkdir()
        (where / "pytest.ini").write_text(INI)
        (where / name).write_text(body)
        self.where = where
        self.log = where / "output.txt"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(TESTS), str(SRC)]),
            "HANG_GUARD_PIDS": str(where / "pids"),
            "PYTHONUNBUFFERED": "1",
            "COLUMNS": "250",
        }
        command = [sys.executable, "-m", "pytest", "-p", "hang_guard", "-p", "no:cacheprovider"]
        command += ["-n", "1", "--dist", "loadfile"] if xdist else ["-p", "no:xdist"]
        command += ["-rA", name]
        self.started = time.monotonic()
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                command,
                cwd=where,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def result(self) -> tuple[str, float]:
        try:
            self.process.wait(timeout=max(1.0, self.started + RUN_LIMIT - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            raise AssertionError(
                f"the synthetic run did not end within {RUN_LIMIT} s:\n{self.output()}"
            ) from None
        return self.output(), time.monotonic() - self.started

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    """Both synthetic runs, side by side: they mostly wait out their timeouts."""
    root = tmp_path_factory.mktemp("hang-guard")
    started = {
        "recoverable": Run(root / "recoverable", "test_recoverable.py", RECOVERABLE),
        "crashing": Run(root / "crashing", "test_crashing.py", CRASHING),
        "solo": Run(root / "solo", "test_solo.py", SOLO, xdist=False),
        "deadlock": Run(root / "deadlock", "test_deadlock.py", DEADLOCK),
    }
    try:
        yield started
    finally:
        for run in started.values():
            if run.process.poll() is None:
                os.killpg(run.process.pid, signal.SIGKILL)
                run.process.wait()


def outcomes(output: str) -> dict[str, list[str]]:
    """Per test, the short-summary words pytest printed for it (-rA): PASSED, FAILED, ERROR."""
    found: dict[str, list[str]] = {}
    for word, test in re.findall(r"^(PASSED|FAILED|ERROR) \S+::(\w+)", output, re.M):
        found.setdefault(test, []).append(word)
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_recoverable_hangs_fail_with_their_stacks_and_the_run_goes_on(
    runs: dict[str, Run],
) -> None:
    output, took = runs["recoverable"].result()
    print(output)
    assert outcomes(output) == {
        "test_sync_sleep_forever": ["FAILED"],
        "test_event_wait_while_the_loop_is_busy": ["FAILED"],
        "test_blocking_asyncio_callback": ["FAILED"],
        "test_waits_again_when_cancelled": ["FAILED"],
        "test_swallows_the_cancellation_and_finishes": ["FAILED"],
        "test_async_fixture_teardown_hangs": ["PASSED", "ERROR"],
        "test_sync_fixture_teardown_hangs": ["PASSED", "ERROR"],
        "test_a_failure_pytest_cannot_format": ["FAILED"],
        "test_after_the_hangs": ["PASSED"],
    }, output
    assert "INTERNALERROR" not in output
    assert "pytest could not format this report: SystemError('AST constructor" in output
    assert "assert 1 + 1 == 3" in output  # the exception as Python prints it
    assert "crashed" not in output  # all in one worker process
    # How each ended: interrupted (no loop, or a loop blocked), or its task cancelled.
    assert re.search(r"test_sync_sleep_forever - hang_guard.HangGuardTimeout: hang guard", output)
    assert re.search(r"test_event_wait_while_the_loop_is_busy - .*CancelledError: hang", output)
    assert re.search(r"test_blocking_asyncio_callback - hang_guard.HangGuardTimeout", output)
    assert re.search(r"test_waits_again_when_cancelled - hang_guard.HangGuardTimeout", output)
    assert re.search(
        r"test_swallows_the_cancellation_and_finishes \(call\) ran past its timeout and went "
        r"on after the guard cancelled it .* a pass past the timeout is a failure",
        output,
    )
    assert re.search(r"ERROR \S+::test_async_fixture_teardown_hangs - .*CancelledError", output)
    assert re.search(r"ERROR \S+::test_sync_fixture_teardown_hangs - .*HangGuardTimeout", output)
    # Every thread's stack, each where it hangs: in the report and, at once, on stderr.
    for section in ("hang guard (call)", "hang guard (teardown)"):
        assert section in output
    assert output.count("Every thread's stack") >= 2 * 6 + 1
    assert re.search(r"--- thread MainThread \d+ \(main\)", output)
    for line in (
        "time.sleep(3600)",
        "await asyncio.Event().wait()",
        "sum(range(20_000))",  # the busy task, in the pending tasks' stacks
    ):
        assert line in output
    # Seven hangs, each ended in at most timeout + 2 x grace; the rest is start-up.
    assert took < 7 * (TIMEOUT + 2 * GRACE) + 60, took


def test_unrecoverable_hangs_crash_the_worker_and_the_run_goes_on(
    runs: dict[str, Run],
) -> None:
    output, took = runs["crashing"].result()
    print(output)
    assert outcomes(output) == {
        "test_before": ["PASSED"],
        "test_interrupt_blocked": ["FAILED"],
        "test_between": ["PASSED"],
        "test_gil_held_by_a_c_call": ["FAILED"],
        "test_after": ["PASSED"],
    }, output
    assert "worker 'gw0' crashed while running 'test_crashing.py::test_interrupt_blocked'" in (
        output
    )
    assert "worker 'gw1' crashed while running 'test_crashing.py::test_gil_held_by_a_c_call'" in (
        output
    )
    assert output.count("replacing crashed worker") == 2  # neither crashed test ran again
    # The last words: the Python watchdog's stacks, then faulthandler's (from C).
    assert "this process (pid" in output
    assert "time.sleep(3600)" in output
    assert "Timeout (0:00:" in output  # faulthandler's header
    assert re.search(r'File ".*test_crashing.py", line \d+ in test_gil_held_by_a_c_call', output)
    assert "Killed the processes it started" in output
    assert "went down; killed the processes it left" in output
    # Everything the crashed tests started is gone.
    pids = [int(p) for p in (runs["crashing"].where / "pids").read_text().split()]
    assert len(pids) >= 4, pids  # sleep; dev server, sleep, test server
    deadline = time.monotonic() + 15  # SIGTERM (death signal) and SIGKILL take a moment
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [p for p in pids if alive(p)] == []
    assert took < 2 * (TIMEOUT + 2 * GRACE + 5) + 90, took


def test_a_run_without_xdist_ended_from_c_leaves_orphans_the_next_run_kills(
    runs: dict[str, Run], tmp_path: Path
) -> None:
    """Without xdist nobody is left to clean up after step 4: the next run does."""
    output, _ = runs["solo"].result()
    print(output)
    assert "Timeout (0:00:" in output  # faulthandler's C timer ended it
    orphans = [int(p) for p in (runs["solo"].where / "pids").read_text().split()]
    assert len(orphans) >= 2, orphans  # the time-skipping test server and sleep
    left = [p for p in orphans if alive(p)]
    after, _ = Run(tmp_path / "after", "test_after.py", "def test_nothing():\n    pass\n").result()
    print(after)
    assert "1 passed" in after
    deadline = time.monotonic() + 15
    while any(alive(p) for p in orphans) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [p for p in orphans if alive(p)] == []
    if left:  # unless another pytest on this machine started in between and killed them first
        assert "killed processes left by runs that ended without cleaning up" in after


def test_a_temporal_worker_stuck_after_a_deadlock_fails_and_the_run_goes_on(
    runs: dict[str, Run],
) -> None:
    output, took = runs["deadlock"].result()
    print(output)
    assert outcomes(output) == {
        "test_a_temporal_worker_after_a_deadlock": ["FAILED"],
        "test_after": ["PASSED", "ERROR"],
    }, output
    assert "[TMPRL1101] Potential deadlock detected" in output  # the SDK's check, then the guard
    assert re.search(r"test_a_temporal_worker_after_a_deadlock - .*HangGuardTimeout", output)
    assert "Cancelling the main thread's asyncio task" in output
    assert re.search(
        r"HangGuardTimeout: hang guard: \S+::test_after \(teardown\) .*; the guard ended "
        r"earlier in this process: \S+::test_a_temporal_worker_after_a_deadlock \(call\)",
        output,
    )
    assert "crashed" not in output
    assert took < 10 + 2 * GRACE + TIMEOUT + 2 * GRACE + 60, took
