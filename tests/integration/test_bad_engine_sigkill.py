"""A bad change with the worker SIGKILLed in the middle of its roll (issue 27, item 5; how a case
is run and what is counted: ``bad_engines``): the crash loop, rejected arguments, the image that
cannot be pulled, the 5xx image and a good image, concurrently in namespaces of their own, the
changes applied together and the worker SIGKILLed once, when every case's failure shows on the
cluster (the good image: its first replacement Ready), and restarted at once (``OneKill``). The
slow crasher's roll is over long before it fails: nothing of it is mid-roll but the roll itself,
which the good image shows. Five cases at 3 GPUs each fit h100-east's 16."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from bad_engines import KILLED_CASES, Figures, OneKill, check_figures, figures_env, run_change
from crash_env import CrashEnv

pytestmark = pytest.mark.timeout(480)


@pytest_asyncio.fixture(scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CrashEnv]:
    async with figures_env(tmp_path_factory.mktemp("figures-sigkill")) as e:
        yield e


@pytest_asyncio.fixture(scope="module")
async def sigkill(env: CrashEnv) -> list[Figures | BaseException]:
    """The changes, concurrently, with one SIGKILL of the worker in the middle of every roll."""
    kill = OneKill(env, len(KILLED_CASES))
    return list(
        await asyncio.gather(
            *(run_change(env, c, kill) for c in KILLED_CASES), return_exceptions=True
        )
    )


@pytest.mark.parametrize("index", range(len(KILLED_CASES)), ids=[c.name for c in KILLED_CASES])
async def test_a_change_with_the_worker_sigkilled_mid_roll(
    index: int, sigkill: list[Figures | BaseException]
) -> None:
    figures = sigkill[index]
    if not isinstance(figures, BaseException):
        assert figures.killed_at is not None, "the worker was never killed during this roll"
        # In the middle of it: before the roll was over either way.
        over = figures.rolled_back_at or figures.done_at
        assert over is None or figures.killed_at < over, figures.note
    check_figures(figures, KILLED_CASES[index])
