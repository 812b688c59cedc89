"""A failed replica's cluster is avoided by its deployment for ``AVOID_AFTER_FAILURE`` and is
eligible again afterwards (issue 16, item 7), on the time-skipping server with the real
ModelReplica children and the activity doubles of ``deployment_fakes`` (every activity the
workflows call is a registered fake that answers at once, so the server skips time freely).
The pure decision is unit-tested in tests/unit/test_rollout_decide.py; this checks that the
workflow carries it out: no placement lands on the cluster inside the window, one does after."""

from __future__ import annotations

from datetime import timedelta

from test_deployment_workflow import Harness, harness, ready

from modelfleet.contracts.status import DeploymentStatus
from modelfleet.deployment.decisions import AVOID_AFTER_FAILURE
from modelfleet.deployment.workflow import DeploymentWorkflow, ScaleRequest

__all__ = ["harness"]

STEP = timedelta(seconds=30)


async def test_a_failed_cluster_is_avoided_until_the_window_ends_then_used_again(
    harness: Harness,
) -> None:
    harness.fleet.clusters = ["east", "north"]
    harness.clusters.never_ready = {"east"}
    handle = await harness.start(1)
    first = await harness.wait_status(handle, ready(1), "1 ready after a re-placement")
    assert [r.cluster for r in first.replicas] == ["north"]
    failed_at = await harness.env.get_current_time()
    # east is healthy again, but this deployment's last replica there failed: a scale-up to 2
    # cannot go there (one replica per cluster) until the avoidance ends.
    harness.clusters.never_ready = set()
    await handle.execute_update(DeploymentWorkflow.scale, ScaleRequest(replicas=2))

    status: DeploymentStatus | None = None
    while True:
        now = await harness.env.get_current_time()
        assert now - failed_at < AVOID_AFTER_FAILURE + timedelta(minutes=5), (
            f"east never used again; last status {status}"
        )
        status = await handle.query(DeploymentWorkflow.status)
        on_east = [r for r in status.replicas if r.cluster == "east"]
        if now - failed_at < AVOID_AFTER_FAILURE - STEP:
            # Inside the window: nothing lands on east, and the deployment says why it is short.
            assert on_east == [], f"east used {now - failed_at} after the failure"
            assert [r.cluster for r in status.replicas] == ["north"]
        if ready(2)(status):
            break
        await harness.env.sleep(STEP)

    assert now - failed_at >= AVOID_AFTER_FAILURE - STEP
    assert sorted(r.cluster for r in status.replicas) == ["east", "north"]
    # Every placement asked while the window was open avoided east; the one that placed there
    # did not (the expired entry is no longer sent).
    requests = harness.fleet.requests
    landed = next(
        i for i, r in enumerate(requests) if r.desired == 2 and "east" not in r.avoid_clusters
    )
    assert landed > 0
    assert all("east" in r.avoid_clusters for r in requests[1:landed])
    assert sum(1 for n in harness.fleet.ledger.values() if n == "east") == 1
