"""The hang guard: a test that hangs anywhere (body, fixture set-up or teardown, a Temporal
worker's shutdown, a blocked asyncio callback) fails with the stack of every thread, and the run
goes on. A pytest plugin, loaded by ``tests/conftest.py`` (or ``-p hang_guard`` with ``tests`` on
the path, as the harness tests do).

It takes over pytest-timeout's timer (``pytest_timeout_set_timer``): the time limit is still
pytest-timeout's (``timeout`` in the ini, ``--timeout``, ``@pytest.mark.timeout``, with
``timeout_func_only = false`` covering set-up, call and teardown), but pytest-timeout's own
``signal`` method raises ``Failed`` from a SIGALRM handler wherever the main thread happens to be:
inside an asyncio callback (``Handle._run``) the loop's exception handler swallows it and the test
goes on (and may pass); inside another task's step it becomes that task's exception and the test
waits forever. Its stack dump goes to stdout, which an xdist worker sends to /dev/null.

Here, per phase (set-up, call, teardown), a watchdog thread escalates once the deadline passes
(the test's deadline; a phase that starts after it, such as the teardown after a timed-out call,
gets ``hang_guard_grace`` seconds of its own):

1. at the deadline: write every thread's stack and the pending asyncio tasks' stacks to the real
   stderr (and to the test's report), then cancel the asyncio task the main thread's
   ``run_until_complete`` is running (the test or fixture coroutine): it unwinds through its
   ``finally`` and ``async with`` blocks and the test fails with ``CancelledError: hang guard...``
   (a phase that catches the cancellation and ends without an error fails all the same: it ran
   past its timeout); with no event loop running (a synchronous hang), go straight to 2;
2. ``grace`` later, if the phase is still running: the stacks again, and a signal to the main
   thread whose handler raises :class:`HangGuardTimeout`. It derives from ``SystemExit`` because
   asyncio re-raises ``SystemExit`` out of callbacks and task steps instead of swallowing it, so
   it ends ``run_until_complete`` and a blocking call (``time.sleep``, a lock, ``select``);
   pytest reports it as the phase's failure;
3. ``grace`` later still: the stacks, every process this one started is killed (found by the
   ``PYTEST_HANG_GUARD_OWNER`` environment variable they inherit), and the process exits. Under
   xdist the controller reports the test as crashed, with the stacks, and starts a new worker;
4. 5 s after 3, ``faulthandler.dump_traceback_later(exit=True)``, armed per phase,
   dumps the stacks and exits from C, for a main thread that holds the GIL so the watchdog
   thread cannot run.

With the repository's ``timeout = 240`` and ``hang_guard_grace = 15`` a hung test fails at
240 s, 255 s or 270 s after it started (275 s from C). A teardown that hangs too after a hung
call is a hang of its own, with its own steps from the end of the call plus the grace.

Its stacks go in the report as a "hang guard (phase)" section; the guard's messages name what it
ended earlier in the same process (a task that ignores its cancellation, such as the SDK's
eviction loop after a deadlocked activation, keeps the session's event loop from closing at the
last test's teardown). A report pytest itself cannot build (CPython 3.11.7's "AST constructor
recursion depth mismatch" while formatting a failure) is made from the exception as Python prints
it, instead of an INTERNALERROR that ends an xdist run.

At its start a run kills the processes earlier runs left behind: an owner token begins with the
pid of the run's controller (or of the process running the tests without xdist), and one whose
owner is gone is an orphan (a killed ``make test``, or a run without xdist ended by step 4).

Under xdist (``-n``), the controller side:

- gives each worker a token and a file for its last words (the crash report shows that file);
- when a worker goes down, kills the processes it started that are still alive (a time-skipping
  ``temporal-test-server`` outlives a process that exits without shutting it down; the dev
  server dies by ``PR_SET_PDEATHSIG``, but its workers and simulators do not);
- schedules ``--dist loadscope/loadfile/loadgroup`` with fixes to xdist 3.8's handling of a
  crashed worker (pytest-xdist #1371, #1378, #1327): the test a worker crashed on is not run
  again on its replacement (a deterministic hang would crash worker after worker until
  ``--max-worker-restart`` aborts the run), work units already completed are not queued again,
  and once the queue is empty every node is told to finish (a replacement given a single test
  waits for a second one forever otherwise).
"""

from __future__ import annotations

import asyncio
import faulthandler
import io
import linecache
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

OWNER_ENV = "PYTEST_HANG_GUARD_OWNER"
_TOKEN_KEY = "hang_guard_token"
_DIR_KEY = "hang_guard_dir"
# The signal the watchdog sends the main thread in step 2.
INTERRUPT_SIGNAL = signal.SIGUSR2
# Step 3's exit status (a worker that exits is reported as crashed whatever the status).
EXIT_STATUS = 70
# Step 4 comes this long after step 3.
_C_BACKSTOP_AFTER = 5.0
_MAX_TASKS = 60
_TASK_FRAMES = 12


class HangGuardTimeout(SystemExit):
    """Raised in the main thread when a phase did not end after its task was cancelled. A
    ``SystemExit`` so that asyncio propagates it out of callbacks and task steps."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "hang_guard_grace",
        "Hang guard: seconds between its steps (cancel, interrupt, exit), and the least a "
        "phase that starts after the test's deadline gets.",
        default="15",
    )
    parser.addoption(
        "--hang-guard-grace",
        type=float,
        default=None,
        help="Hang guard: seconds between its steps (default: the hang_guard_grace ini value).",
    )


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("hang-guard"):
        config.pluginmanager.register(HangGuard(config), "hang-guard")


# --- processes this one started --------------------------------------------------------------


def owned_processes(token: str) -> list[int]:
    """Processes (other than this one) whose environment carries ``OWNER_ENV=token``: everything
    started after the token was set, by this process or its children, wherever it was
    re-parented since."""
    needle = f"{OWNER_ENV}={token}".encode()
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(int(name))
    return found


def _token(role: str) -> str:
    """An owner token: this process's pid first (the run's controller, or the process that runs
    the tests without xdist), so that its processes can be told orphaned once it is gone."""
    return f"{os.getpid()}-{role}-{uuid.uuid4().hex[:12]}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_orphaned() -> list[str]:
    """SIGKILL the processes whose owner token names a process that no longer exists."""
    prefix = f"{OWNER_ENV}=".encode()
    me = os.getpid()
    killed = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue
        for entry in environ.split(b"\0"):
            if entry.startswith(prefix):
                owner = entry[len(prefix) :].split(b"-", 1)[0]
                if owner.isdigit() and not _alive(int(owner)):
                    described = f"{name} {_command_line(int(name))}"
                    try:
                        os.kill(int(name), signal.SIGKILL)
                        killed.append(described)
                    except (ProcessLookupError, PermissionError):
                        pass
                break
    return killed


def _command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:160]
    except OSError:
        return "?"


def kill_owned(token: str) -> list[str]:
    """SIGKILL every process :func:`owned_processes` finds; their descriptions."""
    killed = []
    for pid in owned_processes(token):
        described = f"{pid} {_command_line(pid)}"
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
        killed.append(described)
    return killed


# --- stacks ----------------------------------------------------------------------------------


# A stack as (file, line, function), innermost last: taken without touching the file system, so
# that it is quick even while a busy main thread holds the GIL (a syscall gives the GIL up, and
# getting it back waits out the main thread's switch interval); the source lines come later.
_Stack = list[tuple[str, int, str]]


def _stack_of(frame: FrameType | None, limit: int | None = None) -> _Stack:
    stack = []
    while frame is not None and (limit is None or len(stack) < limit):
        stack.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
        frame = frame.f_back
    stack.reverse()
    return stack


def snapshot_threads() -> list[tuple[str, _Stack]]:
    """Every thread's stack but the caller's, the main thread's first."""
    names = {t.ident: t.name for t in threading.enumerate()}
    main = threading.main_thread().ident
    me = threading.get_ident()
    taken = []
    for ident, frame in sorted(sys._current_frames().items(), key=lambda kv: kv[0] != main):
        if ident != me:
            tag = " (main)" if ident == main else ""
            name = names.get(ident, "<not started by threading>")
            taken.append((f"--- thread {name} {ident}{tag}", _stack_of(frame)))
    return taken


def snapshot_tasks(loop: asyncio.AbstractEventLoop) -> list[tuple[str, _Stack]]:
    """The loop's pending tasks (at most ``_MAX_TASKS``) and their coroutines' stacks."""
    try:
        tasks = list(asyncio.all_tasks(loop))
    except RuntimeError as exc:  # the set changed under us, or the loop is gone
        return [(f"--- asyncio tasks not listed: {exc}", [])]
    taken = [(f"--- {len(tasks)} pending asyncio tasks", [])]
    for task in tasks[:_MAX_TASKS]:
        try:
            frames = task.get_stack(limit=_TASK_FRAMES)
            stack = [(f.f_code.co_filename, f.f_lineno, f.f_code.co_name) for f in frames]
            taken.append((f"- {task!r}", stack))
        except Exception as exc:  # a task finishing under us
            taken.append((f"- {task!r}: stack not read ({exc!r})", []))
    if len(tasks) > _MAX_TASKS:
        taken.append((f"... and {len(tasks) - _MAX_TASKS} more tasks", []))
    return taken


def format_snapshot(taken: list[tuple[str, _Stack]]) -> str:
    out = io.StringIO()
    for title, stack in taken:
        out.write(title + "\n")
        for filename, lineno, name in stack:
            out.write(f'  File "{filename}", line {lineno}, in {name}\n')
            line = linecache.getline(filename, lineno).strip()
            if line:
                out.write(f"    {line}\n")
    return out.getvalue()


def _running_loop_of(frame: FrameType | None) -> tuple[asyncio.AbstractEventLoop, Any] | None:
    """The loop and the task of the innermost ``run_until_complete`` on this stack."""
    suffix = os.path.join("asyncio", "base_events.py")
    while frame is not None:
        code = frame.f_code
        if code.co_name == "run_until_complete" and code.co_filename.endswith(suffix):
            local = frame.f_locals
            loop, task = local.get("self"), local.get("future")
            if isinstance(loop, asyncio.AbstractEventLoop) and isinstance(task, asyncio.Future):
                return loop, task
            return None
        frame = frame.f_back
    return None


def plain_report(item: pytest.Item, call: pytest.CallInfo[None], error: Exception) -> Any:
    """A failed report of ``call`` with its exception as Python prints it, for when pytest
    could not build the report itself (``error``)."""
    exc = call.excinfo.value if call.excinfo is not None else None
    text = "".join(traceback.format_exception(exc)) if exc is not None else ""
    sections = [
        (f"Captured {key} {when}", content)
        for when, key, content in getattr(item, "_report_sections", [])
    ]
    return pytest.TestReport(
        nodeid=item.nodeid,
        location=item.location,
        keywords=dict.fromkeys(item.keywords, 1),
        outcome="failed",
        longrepr=f"{text}\n(pytest could not format this report: {error!r})",
        when=call.when,
        sections=sections,
        duration=call.duration,
        start=call.start,
        stop=call.stop,
        user_properties=item.user_properties,
    )


def _cancel(task: asyncio.Future[Any], message: str) -> None:
    if not task.done():
        task.cancel(message)


# --- the guard -------------------------------------------------------------------------------


@dataclass
class _Watch:
    """One phase of one test under watch."""

    seq: int
    nodeid: str
    when: str
    timeout: float
    started: float  # the test's start (the timer's)
    next_at: float
    step: int = 0  # 0: cancel, 1: interrupt, 2: exit
    fired: list[str] = field(default_factory=list)


class HangGuard:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        option = config.getoption("--hang-guard-grace")
        self.grace = float(option if option is not None else config.getini("hang_guard_grace"))
        self.worker_input: dict[str, Any] | None = getattr(config, "workerinput", None)
        self.controller = self.worker_input is None and config.getoption("dist", "no") != "no"
        self.active = not (config.getoption("usepdb", False) or config.getoption("trace", False))
        self._cond = threading.Condition()
        self._seq = 0
        self._watch: _Watch | None = None
        self._item: tuple[str, float, float] | None = None  # nodeid, timeout, start
        self._when: str | None = None
        self._interrupt_seq: int | None = None
        self._interrupt_message = ""
        self._sections: dict[tuple[str, str], list[str]] = {}
        self._fired_any = False
        self._ended: list[str] = []  # "nodeid (phase)" the guard acted on, in this process
        self._closed = False
        self._main_ident = threading.main_thread().ident
        self._dump_dir: str | None = None
        self._last_words: Any = None  # the file step 3 and step 4 write to under xdist
        self._handler_installed = False
        self._previous_handler: Any = None
        self._thread: threading.Thread | None = None
        self.token = ""
        self._stderr = self._real_stderr()
        if self.worker_input is None:
            # What an earlier run left when it died without cleaning up (its controller killed,
            # or a run without xdist ended by step 4): its owner is gone.
            killed = kill_orphaned()
            if killed:
                self._write_controller(
                    "hang guard: killed processes left by runs that ended without cleaning up: "
                    + "; ".join(killed)
                )
        if self.controller:
            self._dump_dir = tempfile.mkdtemp(prefix="hang-guard-")
            return
        if self.worker_input is not None and _TOKEN_KEY in self.worker_input:
            self.token = str(self.worker_input[_TOKEN_KEY])
            path = Path(self.worker_input[_DIR_KEY]) / f"{self.token}.log"
            self._last_words = path.open("ab", buffering=0)
        else:
            self.token = _token("solo")
        os.environ[OWNER_ENV] = self.token
        if threading.current_thread() is threading.main_thread():
            self._previous_handler = signal.signal(INTERRUPT_SIGNAL, self._on_interrupt)
            self._handler_installed = True
        self._thread = threading.Thread(target=self._run, name="hang-guard", daemon=True)
        self._thread.start()

    def _real_stderr(self) -> int:
        """A descriptor of the stderr pytest started with (not the capture's)."""
        capman = self.config.pluginmanager.getplugin("capturemanager")
        if capman is None:
            return os.dup(2)
        with capman.global_and_fixture_disabled():
            return os.dup(2)

    def pytest_report_header(self, config: pytest.Config) -> str:
        if not self.active:
            return "hang guard: off (a debugger is in use)"
        return (
            f"hang guard: past the timeout, cancel the test's task; {self.grace:g} s later "
            f"interrupt it; {self.grace:g} s later end the process"
        )

    # --- pytest-timeout's timer, and the phases ----------------------------------------------

    @pytest.hookimpl(tryfirst=True, optionalhook=True)
    def pytest_timeout_set_timer(self, item: pytest.Item, settings: Any) -> bool:
        if self.controller:
            return True
        with self._cond:
            self._item = (item.nodeid, float(settings.timeout), time.monotonic())
            if self._when is not None:
                self._start_watch()
        return True

    @pytest.hookimpl(tryfirst=True, optionalhook=True)
    def pytest_timeout_cancel_timer(self, item: pytest.Item) -> bool:
        with self._cond:
            self._item = None
            self._stop_watch()
        return True

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        with self._phase("setup"):
            return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        with self._phase("call"):
            return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, None, None]:
        with self._phase("teardown"):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        try:
            report = yield
        except Exception as error:
            # pytest could not format the report (an INTERNALERROR, which ends an xdist run).
            # Seen: CPython 3.11.7's "SystemError: AST constructor recursion depth mismatch"
            # (gh-106905: once an AST conversion fails anywhere in the process, later ones may
            # raise) while formatting a failure's source.
            report = plain_report(item, call, error)
        fired = self._sections.pop((item.nodeid, call.when), None)
        if fired:
            report.sections.append((f"hang guard ({call.when})", "\n".join(fired)))
            if report.passed:
                # The phase caught the guard's cancellation (a retry helper that catches too
                # much, a clean-up that swallows CancelledError) and went on to finish: it ran
                # past its timeout all the same, and a pass would hide that.
                report.outcome = "failed"
                report.longrepr = (
                    f"hang guard: {item.nodeid} ({call.when}) ran past its timeout and went on "
                    f"after the guard cancelled it (its cancellation was caught), finishing "
                    f"{call.duration:.0f} s into the phase: a pass past the timeout is a "
                    f"failure.\n\n" + fired[0]
                )
        return report

    def _phase(self, when: str) -> Any:
        guard = self

        class _Phase:
            def __enter__(self) -> None:
                with guard._cond:
                    guard._when = when
                    if guard._item is not None:
                        guard._start_watch()

            def __exit__(self, *exc: object) -> None:
                with guard._cond:
                    guard._when = None
                    guard._stop_watch()

        return _Phase()

    def _start_watch(self) -> None:
        """Under the lock: watch the current phase of the current test."""
        assert self._item is not None
        assert self._when is not None
        if not self.active or self._item[1] <= 0:
            return
        nodeid, timeout, started = self._item
        now = time.monotonic()
        self._seq += 1
        deadline = max(started + timeout, now + self.grace)
        self._watch = _Watch(self._seq, nodeid, self._when, timeout, started, deadline)
        backstop = deadline + 2 * self.grace + _C_BACKSTOP_AFTER - now
        faulthandler.dump_traceback_later(
            backstop, exit=True, file=self._last_words or self._stderr
        )
        self._cond.notify_all()

    def _stop_watch(self) -> None:
        if self._watch is not None:
            faulthandler.cancel_dump_traceback_later()
            if self._watch.fired:
                self._ended.append(f"{self._watch.nodeid} ({self._watch.when})")
                self._sections[(self._watch.nodeid, self._watch.when)] = self._watch.fired
        self._watch = None
        self._interrupt_seq = None
        self._seq += 1
        self._cond.notify_all()

    # --- the watchdog ------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._closed:
                    return
                watch = self._watch
                if watch is None:
                    self._cond.wait()
                    continue
                now = time.monotonic()
                if now < watch.next_at:
                    self._cond.wait(watch.next_at - now)
                    continue
                step = watch.step
                watch.step += 1
                watch.next_at = now + self.grace
                self._fired_any = True
            try:
                self._act(watch, step)
            except Exception:  # the guard must not die of its own error
                self._emit(watch, f"hang guard: step {step} failed:\n{traceback.format_exc()}")

    def _current(self, watch: _Watch) -> bool:
        with self._cond:
            return self._watch is watch

    def _act(self, watch: _Watch, step: int) -> None:
        """Step ``step`` for ``watch``: the stacks are taken first (cheaply), then the step acts,
        then the stacks are written (reading source lines is slow while the main thread keeps
        the GIL busy)."""
        if not self._current(watch):
            return
        elapsed = time.monotonic() - watch.started
        where = f"{watch.nodeid} ({watch.when})"
        main_frame = sys._current_frames().get(self._main_ident or -1)
        running = _running_loop_of(main_frame)
        taken = snapshot_threads()
        if running is not None and step < 2:
            taken += snapshot_tasks(running[0])
        if step == 0:
            head = (
                f"hang guard: {where} still running {elapsed:.0f} s after the test started "
                f"(timeout {watch.timeout:g} s){self._earlier()}; pid {os.getpid()}. "
            )
            if running is not None:
                loop, task = running
                message = (
                    f"hang guard: {where} exceeded its {watch.timeout:g} s timeout"
                    + self._earlier()
                )
                try:
                    loop.call_soon_threadsafe(_cancel, task, message)
                    head += f"Cancelling the main thread's asyncio task {task!r}. "
                except RuntimeError:  # the loop closed meanwhile
                    running = None
            if running is None:
                head += "No event loop runs in the main thread: interrupting it. "
                self._interrupt(watch, elapsed)
                with self._cond:
                    watch.step = 2
        elif step == 1:
            head = (
                f"hang guard: {where} still running {elapsed:.0f} s after the test started, "
                f"{self.grace:g} s after its task was cancelled: interrupting the main thread. "
            )
            self._interrupt(watch, elapsed)
        else:
            killed = kill_owned(self.token)
            head = (
                f"hang guard: {where} still running {elapsed:.0f} s after the test started and "
                f"{self.grace:g} s after the main thread was interrupted: this process "
                f"(pid {os.getpid()}) exits so that the run goes on. "
            )
            if killed:
                head += "Killed the processes it started: " + "; ".join(killed) + ". "
        self._emit(watch, head + "Every thread's stack:\n" + format_snapshot(taken))
        if step >= 2:
            os._exit(EXIT_STATUS)

    def _earlier(self) -> str:
        """What the guard ended earlier in this process: what those left behind (a task that
        ignores its cancellation, a thread that never returns) may be what this one waits for,
        e.g. the session's event loop closing at the last test's teardown."""
        if not self._ended:
            return ""
        return f"; the guard ended earlier in this process: {', '.join(self._ended)}"

    def _interrupt(self, watch: _Watch, elapsed: float) -> None:
        if not self._handler_installed:
            return  # pytest runs outside the main thread: only step 3 is left
        with self._cond:
            if self._watch is not watch:
                return
            self._interrupt_seq = watch.seq
            self._interrupt_message = (
                f"hang guard: {watch.nodeid} ({watch.when}) still running {elapsed:.0f} s "
                f"after the test started (timeout {watch.timeout:g} s)" + self._earlier()
            )
        if self._main_ident is not None:
            signal.pthread_kill(self._main_ident, INTERRUPT_SIGNAL)

    def _on_interrupt(self, signum: int, frame: FrameType | None) -> None:
        # In the main thread; the phase ends in the main thread too, so no race with it.
        watch = self._watch
        if (
            self._interrupt_seq is not None
            and watch is not None
            and watch.seq == self._interrupt_seq
        ):
            self._interrupt_seq = None
            raise HangGuardTimeout(self._interrupt_message)

    def _emit(self, watch: _Watch, text: str) -> None:
        watch.fired.append(text)
        data = ("\n" + text).encode(errors="replace")
        for fd in (self._stderr, self._last_words.fileno() if self._last_words else None):
            if fd is None:
                continue
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            except OSError:
                pass

    # --- xdist, on the controller ------------------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[_TOKEN_KEY] = _token(f"{node.gateway.id}")
        node.workerinput[_DIR_KEY] = self._dump_dir

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object | None) -> None:
        token = node.workerinput.get(_TOKEN_KEY)
        if not token:
            return
        killed = kill_owned(token)
        if killed:
            self._write_controller(
                f"hang guard: {node.gateway.id} went down; killed the processes it left: "
                + "; ".join(killed)
            )

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: Any) -> None:
        node = getattr(report, "node", None)
        token = node.workerinput.get(_TOKEN_KEY) if node is not None else None
        if token and self._dump_dir:
            path = Path(self._dump_dir) / f"{token}.log"
            words = path.read_text(errors="replace") if path.exists() else ""
            if words.strip() and isinstance(report.longrepr, str):
                report.longrepr += "\n\nthe worker's last words:\n" + words

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        return make_scheduler(config, log)

    def _write_controller(self, text: str) -> None:
        reporter = self.config.pluginmanager.getplugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(text)
        else:
            os.write(self._stderr, (text + "\n").encode())

    # --- the end -------------------------------------------------------------------------------

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self.controller:
            if self._dump_dir:
                shutil.rmtree(self._dump_dir, ignore_errors=True)
            return
        if self._handler_installed and threading.current_thread() is threading.main_thread():
            signal.signal(INTERRUPT_SIGNAL, self._previous_handler or signal.SIG_DFL)
        if self._fired_any and self.worker_input is None and self.active:
            # A hang left threads or tasks behind that may hold the interpreter's exit (it
            # joins executor threads); xdist kills its own workers after 10 s, pytest alone
            # would wait for ever.
            faulthandler.dump_traceback_later(
                2 * self.grace, exit=True, file=self._last_words or self._stderr
            )


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's scheduler for ``--dist loadscope/loadfile/loadgroup``, fixed for crashed
    workers; None (xdist's own choice) for the other modes or an xdist this does not fit."""
    try:
        from xdist.scheduler import (
            LoadFileScheduling,
            LoadGroupScheduling,
            LoadScopeScheduling,
        )
    except ImportError:
        return None
    base = {
        "loadscope": LoadScopeScheduling,
        "loadfile": LoadFileScheduling,
        "loadgroup": LoadGroupScheduling,
    }.get(config.getvalue("dist"))
    if base is None or not all(
        hasattr(base, name) for name in ("remove_node", "_reschedule", "nodes")
    ):
        return None

    class CrashSafe(base):  # type: ignore[misc, valid-type]
        def remove_node(self, node: Any) -> str | None:
            crashitem: str | None = super().remove_node(node)
            if crashitem is not None:
                # Reported as crashed already: never run it again (pytest-xdist #1371); and
                # queue no unit with nothing left to run (#1378).
                for unit in self.workqueue.values():
                    if crashitem in unit:
                        unit[crashitem] = True
                for scope in [s for s, unit in self.workqueue.items() if all(unit.values())]:
                    del self.workqueue[scope]
            return crashitem

        def _reschedule(self, node: Any) -> None:
            super()._reschedule(node)
            if not self.workqueue:
                # Nothing left to hand out: let every node run what it holds to the end (a
                # node holding one test waits for a next one or for this, pytest-xdist #1327).
                for other in self.nodes:
                    if not other.shutting_down:
                        other.shutdown()

    CrashSafe.__name__ = CrashSafe.__qualname__ = f"CrashSafe{base.__name__}"
    return CrashSafe(config, log)
