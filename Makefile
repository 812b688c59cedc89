# Two entry points on a fresh machine: `make run` (the demo on the embedded default) and
# `make test` (lint, format check, types, import contracts, tests; what CI runs). Both create
# .venv with the `dev` extra (test tools + the `sim` extra: simulated fleet and Temporal dev
# server). `make check` is the quick loop while editing: the same checks, and every test but the
# integration and kubectl ones (about 3 minutes on a 2-core machine).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test check lint typecheck contracts pytest pytest-quick durations bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# At a terminal the environment stays up after the rollout (the UI link works) until Ctrl-C;
# without one (CI, scripts) `demo --once` exits with the rollout's result.
run: $(STAMP)
	@if [ -t 0 ] && [ -t 1 ] && [ -z "$$CI" ]; then $(BIN)/modelfleet demo; \
	else $(BIN)/modelfleet demo --once; fi

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

contracts: $(STAMP)
	$(BIN)/lint-imports

# One test file at a time per process (--dist loadfile), the slowest files first
# (tests/file_order.py): each integration test file gets its own dev server + simulated fleet.
# A hung test fails within 300 s with its stacks and the run goes on (tests/hang_guard.py).
# The integration tests mostly wait (on timers, the dev server, the simulated fleet), so more
# processes than cores pay: the whole suite (3,700 tests) took 14:34-14:53 at four, 27:06 at
# two, on this 2-core machine. Each integration file has a stack of its own
# (tests/integration/conftest.py), so a busy neighbour slows a file but no longer freezes it.
# Six took 12:01-12:33 (1,157 CPU-s, the cores 77% busy), but 3 of 4 fresh clones failed a
# time-bound scenario (a bad engine's crash inside its rollback window, a cloud crash's
# recovery within 240 s) with the cores saturated: TEST_PROCESSES=6 is for a quick look, 2 for
# a machine shared with other work.
# Integration files also take one of MODELFLEET_TEST_SLOTS machine-wide slots (default two per
# core, tests/machine_slots.py): a second test run beside this one waits for slots instead of
# doubling the stacks the cores carry.
# Bytecode caches on even where the environment turns them off (PYTHONDONTWRITEBYTECODE, as on
# this machine): every xdist process collects all test files (assertion rewriting: 14 CPU-s a
# process uncached, 7.5 cached) and each CLI subprocess the tests start compiles src afresh.
unexport PYTHONDONTWRITEBYTECODE
PYTEST := $(BIN)/pytest -q --dist loadfile
TEST_PROCESSES ?= 4
QUICK_TESTS := tests/unit tests/replay tests/workflow tests/harness

pytest: $(STAMP)
	$(PYTEST) -n $(TEST_PROCESSES)

pytest-quick: $(STAMP)
	$(PYTEST) -n 2 $(QUICK_TESTS)

test: lint typecheck contracts pytest

check: lint typecheck contracts pytest-quick

# Measure every test file again (tests/file_durations.json orders them).
durations: $(STAMP)
	-$(PYTEST) -n $(TEST_PROCESSES) --junitxml=.pytest-durations.xml
	$(BIN)/python tests/file_order.py .pytest-durations.xml

bench: $(STAMP)
	$(BIN)/python bench/scheduling.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .pytest-durations.xml
