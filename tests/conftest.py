"""For every test: the hang guard (``hang_guard.py``): a hang anywhere fails its test within the
time limit (``timeout`` in pyproject.toml) with every thread's stack, and the run goes on. The
module is also the plugin the harness tests load into a pytest of their own (``-p hang_guard``)."""

from __future__ import annotations

import hang_guard

pytest_addoption = hang_guard.pytest_addoption
pytest_configure = hang_guard.pytest_configure
