"""Changes that must not take a serving deployment down, on the time-skipping server with the
real ModelReplica children and the activity doubles of ``deployment_fakes``: a template that
fits nowhere is held back at the dry placement, and a replacement that never becomes Ready
rolls the deployment back to its last good template.

These run on a time-skipping server of their own (module scope): after the blocked-change test
the shared session server stopped skipping time for a later test's ``env.sleep`` (a test-server
quirk seen with two Updates in one test), so they are kept apart from the other tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from conftest import start_time_skipping_env
from deployment_fakes import deployment
from temporalio.testing import WorkflowEnvironment
from test_deployment_workflow import Harness, harness, ready

from modelfleet.deployment.workflow import DeploymentWorkflow

__all__ = ["harness"]


@pytest_asyncio.fixture(scope="module")
async def time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await start_time_skipping_env()
    try:
        yield env
    finally:
        await env.shutdown()


async def test_a_change_that_fits_nowhere_is_blocked_with_the_old_replicas_serving(
    harness: Harness,
) -> None:
    handle = await harness.start(2)
    before = await harness.wait_status(handle, ready(2), "2 ready on the old image")
    old_hash = before.replicas[0].template_hash
    harness.clusters.events.clear()
    harness.fleet.unplaceable = {"vllm:bad"}

    bad = deployment(before.name, replicas=2, image="vllm:bad")
    await handle.execute_update(DeploymentWorkflow.apply, bad)
    blocked = await harness.wait_status(
        handle,
        lambda s: any(c.type == "RolloutBlocked" for c in s.conditions),
        "the change reported blocked",
    )
    assert "change blocked: the new template cannot be placed" in blocked.summary
    assert "vllm:bad fits no pool" in blocked.summary
    assert ready(2, old_hash)(blocked)
    # The dry placement asked about the new template with none of ours counted.
    dry = harness.fleet.dry_requests[-1]
    assert sorted(dry.without) == sorted(r.name for r in before.replicas)
    # A resync later still nothing was touched: no apply, no delete, nothing placed for real.
    assert harness.clusters.events == []
    assert all(_image(r) != "vllm:bad" for r in harness.fleet.requests)

    good = deployment(before.name, replicas=2, image="vllm:1")
    restored = await handle.execute_update(DeploymentWorkflow.apply, good)
    assert not any(c.type == "RolloutBlocked" for c in restored.conditions)
    assert ready(2, old_hash)(restored)
    assert sorted(r.name for r in restored.replicas) == sorted(r.name for r in before.replicas)


async def test_a_replacement_that_never_becomes_ready_rolls_back(harness: Harness) -> None:
    handle = await harness.start(2)
    before = await harness.wait_status(handle, ready(2), "2 ready on the old image")
    old_hash = before.replicas[0].template_hash
    serving = {r.cluster for r in before.replicas}
    harness.clusters.never_ready = {"west"}  # where the surge replica lands
    harness.clusters.events.clear()

    await handle.execute_update(
        DeploymentWorkflow.apply, deployment(before.name, replicas=2, image="vllm:2")
    )
    after = await harness.wait_status(
        handle,
        lambda s: "rolled back to the last good template" in s.summary and ready(2, old_hash)(s),
        "rolled back with the old replicas serving",
    )
    assert "ImagePullBackOff" in after.summary
    assert {r.name for r in after.replicas} == {r.name for r in before.replicas}
    # Only the failed surge replica was ever deleted; the serving ones never were.
    deletes = [e for e in harness.clusters.events if e.startswith("delete")]
    assert deletes == ["delete west"]
    assert not serving & {e.split()[1] for e in deletes}


def _image(request: object) -> str:
    md = request.deployment  # type: ignore[attr-defined]
    image: str = md.spec.template.spec.engines[0].members[0].template.spec.containers[0].image
    return image
