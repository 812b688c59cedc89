"""The SDK's deadlock check, relaxed for the tests' own workers: a pytest plugin loaded by
``tests/conftest.py``.

The Python SDK fails a workflow task whose activation has not yielded within 2 s of wall time
("[TMPRL1101] Potential deadlock detected"), and nothing configures that but ``debug_mode``
(which also moves activations onto the event loop's thread). On a 2-core machine running two
test runs and a benchmark, a workflow test's activation waited that long for the CPU (its stack:
the garbage collector's weakref callbacks), the task failed, the time-skipping server's sleep
timed out, and the test hung until the hang guard ended it. That says nothing about the
workflow, so the workers the tests start (in-process: workflow tests, integration stacks) allow
``TEST_DEADLOCK_SECONDS`` instead. A workflow that really blocks still fails its test, 30 s in.

What this does not relax: the product (``modelfleet worker``, the CLI's ``dev`` and ``demo``,
and the worker subprocesses the crash tests start keep the SDK's 2 s), the harness tests of the
hang guard (pytests of their own that do not load this plugin), and the task-time figures, which
``bench/`` measures against the 2 s limit (``bench/fleet.py --task-times``, ``bench/rollout.py``).
"""

from __future__ import annotations

import functools
from typing import Any

from temporalio.worker import _workflow

TEST_DEADLOCK_SECONDS = 30.0
_MARK = "_modelfleet_relaxed_deadlock"


def relax() -> None:
    original = _workflow._WorkflowWorker.__init__
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if not hasattr(self, "_deadlock_timeout_seconds"):
            raise RuntimeError(
                "temporalio's workflow worker no longer has _deadlock_timeout_seconds: "
                "update tests/deadlock_limit.py for this SDK version"
            )
        if self._deadlock_timeout_seconds is not None:  # None: debug mode, no check at all
            self._deadlock_timeout_seconds = TEST_DEADLOCK_SECONDS

    setattr(init, _MARK, True)
    _workflow._WorkflowWorker.__init__ = init  # type: ignore[method-assign]


def pytest_configure() -> None:
    relax()
