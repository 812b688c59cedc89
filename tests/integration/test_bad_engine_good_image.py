"""A good image rolled under load fails no request (issue 27, item 5; how a case is run and what
is counted: ``bad_engines``): each replaced replica drains (its endpoint withdrawn and the routes
rewritten without it) before its objects go."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from bad_engines import GOOD_CASE, check_figures, figures_env, run_change
from crash_env import CrashEnv

pytestmark = pytest.mark.timeout(420)


@pytest_asyncio.fixture(scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CrashEnv]:
    async with figures_env(tmp_path_factory.mktemp("figures-good")) as e:
        yield e


async def test_a_good_image_rolled_under_load_fails_no_request(env: CrashEnv) -> None:
    check_figures(await run_change(env, GOOD_CASE), GOOD_CASE)
