"""Routes confirmed before teardown, and models checked before a replica joins (issue 29, items
4 and 5), measured the way ``bad_engines`` measures a change under load (its
environment, load, cases and checks, reused): the official ``openai`` client sends 5 chat
completions/s for model ``qwen`` through a ModelService over a Ready 2-replica deployment while
a change rolls, and the run prints requests, failed requests, serving replicas and the
rollback.

- A good image rolled with the worker SIGKILLed right after an old replica's
  ``endpoints.withdraw`` (its endpoint gone from the directory) and kept down 10 s, longer than
  the fixed 5 s drain that preceded the confirmation, the front door's route writes slowed so
  that the kill lands before the service's route drops the replica: no request may fail
  (before, the old replica's route went while the service still routed to it: 404s).
- A change whose engine serves ``qwen3`` (``--served-model-name`` typo) while the service's
  endpoints serve ``qwen``: rolled back with the mismatch as the reason, at most 1% failed
  (before, the replacement joined and answered 404 ``model does not exist``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from bad_engines import Case, check_figures, figures_env, run_change
from crash_env import CrashEnv

pytestmark = pytest.mark.timeout(480)


@pytest_asyncio.fixture(scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CrashEnv]:
    async with figures_env(tmp_path_factory.mktemp("route-gate")) as e:
        yield e


NEW_IMAGE = "vllm/vllm-openai:v0.23.1"
# The front door's API answers route writes 3 s late, so the SIGKILL lands between the old
# replica's withdrawal and the service's route without it (the window the chaos run hit by
# chance): the service's apply dies with the worker and is tried again only after its
# heartbeat timeout (20 s), while the replica's teardown resumes at once.
KILL_CASE = Case(
    "kill-on-withdraw",
    NEW_IMAGE,
    visible=None,
    kill_on_withdraw=10.0,
    front_door_faults={
        "latency_seconds": 3.0,
        "verbs": ["patch", "apply"],
        "resources": ["httproutes.*"],
    },
)
TYPO_CASE = Case(
    "model-typo",
    NEW_IMAGE,
    served_model_name="qwen3",
    # From the replacement's first pod: it is Ready only for as long as its check takes.
    visible="pod",
    because="model mismatch",
)


async def test_a_roll_with_the_worker_killed_after_a_withdraw_fails_no_request(
    env: CrashEnv,
) -> None:
    figures = check_figures(await run_change(env, KILL_CASE), KILL_CASE)
    assert "SIGKILLed" in figures.note, figures.note


async def test_a_served_model_name_typo_is_rolled_back_and_never_served(
    env: CrashEnv,
) -> None:
    figures = check_figures(await run_change(env, TYPO_CASE), TYPO_CASE)
    assert "qwen3" in figures.rollback_reason, figures.rollback_reason
    print(f"rollback reason: {figures.rollback_reason}\nhistory: {figures.history}")
    # ``rollout history`` says the same of the revision it held back.
    assert any("model mismatch" in outcome for outcome in figures.history), figures.history
