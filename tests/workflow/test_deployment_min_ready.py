"""Replacements prove themselves (issue 27), on the time-skipping server with the real
ModelReplica children and the activity doubles of ``deployment_fakes``: an old replica is
deleted only once its replacement has stayed Ready for minReadySeconds (a durable timer, not
a poll), and a replacement that crash-loops after Ready rolls the deployment back by itself,
with its restarts and how long after Ready in the status, the revisions and the history.

On a time-skipping server of their own (module scope), as the guard tests are."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest_asyncio
from conftest import start_time_skipping_env
from deployment_fakes import deployment
from temporalio.api.enums.v1 import EventType
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


async def test_an_old_replica_goes_only_after_its_replacement_stayed_ready(
    harness: Harness,
) -> None:
    handle = await harness.start(2)
    before = await harness.wait_status(handle, ready(2), "2 ready on the old image")
    old = {r.cluster for r in before.replicas}
    old_names = {r.name for r in before.replicas}
    harness.clusters.timeline.clear()

    new = deployment(before.name, replicas=2, image="vllm:2")
    new.spec.strategy.min_ready_seconds = 45
    await handle.execute_update(DeploymentWorkflow.apply, new)
    after = await harness.wait_status(
        handle,
        lambda s: ready(2)(s) and not {r.name for r in s.replicas} & old_names,
        "rolled to the new image",
    )
    assert after.phase == "Ready"
    timeline = harness.clusters.timeline
    deletes = [(e.split()[1], t) for e, t in timeline if e.startswith("delete")]
    assert sorted(c for c, _ in deletes) == sorted(old)
    for cluster, deleted in deletes:
        # The replacement it made way for became Ready at least minReadySeconds before.
        readies = [t for e, t in timeline if e.startswith("ready") and t <= deleted]
        assert readies, timeline
        assert deleted - max(readies) >= timedelta(seconds=45), (cluster, timeline)
    # Waited with one timer per replacement, named for what it waits for.
    history = await handle.fetch_history()
    timers = [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED
        and "minReadySeconds" in e.user_metadata.summary.data.decode()
    ]
    assert len(timers) == 2


async def test_a_replacement_crash_looping_after_ready_rolls_back_by_itself(
    harness: Harness,
) -> None:
    handle = await harness.start(2)
    before = await harness.wait_status(handle, ready(2), "2 ready on the old image")
    old_hash = before.replicas[0].template_hash
    serving = {r.cluster for r in before.replicas}
    harness.clusters.crash_after_ready = {"west"}  # where the surge replica lands
    harness.clusters.events.clear()

    bad = deployment(before.name, replicas=2, image="vllm:crashes")
    # Longer than the replica's first health check (30 s after Ready).
    bad.spec.strategy.min_ready_seconds = 120
    await handle.execute_update(DeploymentWorkflow.apply, bad)
    after = await harness.wait_status(
        handle,
        lambda s: "rolled back to the last good template" in s.summary and ready(2, old_hash)(s),
        "rolled back with the old replicas serving",
    )
    print(f"\nrolled back: {after.summary}")
    assert "surge replica" in after.summary
    assert "crash-looping 30 s after Ready (2 restarts)" in after.summary
    assert "CrashLoopBackOff (restarted 2 times)" in after.summary
    assert any(c.type == "RolloutBlocked" and c.reason == "RolledBack" for c in after.conditions)
    # Only the crash-looping surge replica was ever deleted; the serving ones never were.
    deletes = [e for e in harness.clusters.events if e.startswith("delete")]
    assert deletes == ["delete west"]
    assert not serving & {e.split()[1] for e in deletes}
    # ``rollout history``: the revision rolled back says why, with the figures.
    revisions = await handle.query(DeploymentWorkflow.revisions)
    assert "crash-looping 30 s after Ready (2 restarts)" in revisions[-1].outcome
    assert not revisions[0].outcome
    # ``describe``'s decisions, and the history (the memo, a properties-modified event).
    decisions = await handle.query(DeploymentWorkflow.decisions)
    assert any("crash-looping 30 s after Ready" in d.message for d in decisions)
    history = await handle.fetch_history()
    modified = [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED
    ]
    assert modified
    memo = modified[-1].workflow_properties_modified_event_attributes.upserted_memo
    assert b"crash-looping 30 s after Ready (2 restarts)" in memo.fields["heldBack"].data
