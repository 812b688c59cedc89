"""Plugins for every test, kept in modules of their own (``pytest_plugins`` is only allowed in
a rootdir conftest), registered here before the command line is parsed:

- ``hang_guard``: a hang anywhere fails its test within the time limit (``timeout`` in
  pyproject.toml) with every thread's stack, and the run goes on; the harness tests load it into
  pytests of their own (``-p hang_guard``);
- ``file_order``: test files slowest first, so that the xdist processes finish together;
- ``machine_slots``: integration files take one of a few machine-wide slots, so that two test
  runs on one machine share it instead of overloading it;
- ``deadlock_limit``: the workers the tests start allow a workflow activation 30 s, not the
  SDK's 2 s, before calling it a deadlock (a starved CPU is not a deadlock).
"""

from __future__ import annotations

import gc

import pytest

import deadlock_limit
import file_order
import hang_guard
import machine_slots


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    for plugin in (hang_guard, file_order, machine_slots, deadlock_limit):
        if not pluginmanager.is_registered(plugin):
            pluginmanager.register(plugin)  # its own pytest_addoption runs now


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # What the tests left to the garbage collector (asyncio futures whose exception nobody
    # retrieved log from ``__del__``) is finalised now, not during a later compile(): CPython
    # 3.11 fails that compile with "AST constructor recursion depth mismatch" when a collection
    # runs Python code in the middle of it, and hypothesis's plugin imports (pytest rewrites) a
    # module in the terminal summary.
    gc.collect()
