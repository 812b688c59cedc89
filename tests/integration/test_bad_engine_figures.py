"""How a bad engine is contained, measured under load (issue 27, item 5; how a case is run and
what is counted: ``bad_engines``): the changes of ``CASES`` (a crash loop, rejected arguments,
an image that cannot be pulled, 20% 5xx, a slow crasher) and the dark cluster case, concurrently,
each in its own namespace on h100-east's 16 GPUs (3 each at most: two replicas and a surge;
l4-dev, which goes dark, holds none of the others' replicas), with ``TEST_KNOBS``
(``minReadySeconds`` 20 s, the slow crasher serving 100 s): the behaviour, not the figures of
the product's defaults, which ``bench/bad_engine_figures.py`` prints."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from bad_engines import (
    MOVED_WITHIN,
    TEST_KNOBS,
    Figures,
    cases,
    check_figures,
    figures_env,
    run_change,
    run_dark,
)
from crash_env import CrashEnv

# The slow crasher sets the pace: a roll, 100 s of serving, the rollback (about three minutes).
CASES = cases(TEST_KNOBS)
pytestmark = pytest.mark.timeout(600)


@pytest_asyncio.fixture(scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CrashEnv]:
    async with figures_env(tmp_path_factory.mktemp("figures")) as e:
        yield e


@pytest_asyncio.fixture(scope="module")
async def changes(env: CrashEnv) -> list[Figures | BaseException]:
    """The changes and the dark cluster, concurrently (each in its own namespace)."""
    return list(
        await asyncio.gather(
            *(run_change(env, c) for c in CASES), run_dark(env), return_exceptions=True
        )
    )


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c.name for c in CASES])
async def test_a_change_applied_under_load(
    index: int, changes: list[Figures | BaseException]
) -> None:
    check_figures(changes[index], CASES[index])


async def test_a_dark_cluster_under_load(changes: list[Figures | BaseException]) -> None:
    figures = check_figures(changes[len(CASES)], None)
    assert figures.visible_at is not None, figures.note
    assert figures.visible_at <= MOVED_WITHIN, figures.note
