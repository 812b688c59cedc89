"""A serving ModelReplica carries its whole state (``replica.state.ReplicaState``) across
continue-as-new: a continued run neither publishes its endpoint nor tells its deployment again,
keeps counting failed health checks across the hand-over, stays Degraded (not Ready) when it
was, and its teardown still deletes what the first run applied.

On the time-skipping server with ``turns_per_run=2``, so that a polling replica (no cluster
workflow to watch it) continues-as-new every second health check (the time-skipping server
never suggests it), with ``test_replica_healing``'s scripted cluster."""

from __future__ import annotations

from datetime import timedelta

from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment
from test_replica_healing import READY, Cluster, Outcome, _phases, _serve

from modelfleet.contracts.kube_payloads import ReadyResult
from modelfleet.contracts.status import ReplicaPhase

# Not ready, but not reported so by the cluster: Degraded only after 3 such checks in a row.
NOT_READY = ReadyResult(ready=False, reason="Deployment mf-ml/qwen-abcde-vllm-7641c not ready")


async def _runs(env: WorkflowEnvironment, out: Outcome) -> int:
    """How many runs the replica's workflow had, following continue-as-new from its first."""
    runs, run_id = 0, out.first_run
    while run_id:
        runs += 1
        handle = env.client.get_workflow_handle(out.workflow_id, run_id=run_id)
        run_id = ""
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                run_id = (
                    event.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
                )
    return runs


async def test_a_continued_replica_serves_on_without_publishing_or_telling_again(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    cluster = Cluster(health=lambda n: READY)
    out = await _serve(time_skipping_env, cluster, serve_for=timedelta(minutes=2), turns_per_run=2)
    assert await _runs(time_skipping_env, out) >= 4
    assert out.result is not None
    assert out.result.phase is ReplicaPhase.TERMINATED
    # Published once at Ready, withdrawn once at the teardown; nothing applied after the
    # rollout (its applies all precede the first health check).
    assert cluster.calls.count("publish") == 1
    assert cluster.calls.count("withdraw") == 1
    first_check = cluster.calls.index("check")
    assert not any(c.startswith("apply:") for c in cluster.calls[first_check:])
    # The deployment heard Ready once, then the end: no run told it again.
    assert _phases(out.seen) == [
        (ReplicaPhase.READY, ""),
        (ReplicaPhase.TERMINATED, ""),
    ]
    assert cluster.calls[-1] == "delete"


async def test_failed_checks_and_degraded_survive_continue_as_new(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    # Ready for two checks, then not ready for good: the 3rd failed check in a row (in the run
    # after the one that saw the first) makes it Degraded, and later runs keep it so.
    cluster = Cluster(health=lambda n: READY if n < 2 else NOT_READY)
    out = await _serve(time_skipping_env, cluster, serve_for=timedelta(minutes=2), turns_per_run=2)
    assert await _runs(time_skipping_env, out) >= 4
    phases = [p for p, _ in _phases(out.seen)]
    assert phases == [ReplicaPhase.READY, ReplicaPhase.DEGRADED, ReplicaPhase.TERMINATED]
    degraded = out.seen[1]
    assert degraded.reason == NOT_READY.reason
    # Withdrawn once when it went Degraded; never published again.
    assert cluster.calls.count("publish") == 1
    assert cluster.calls.count("withdraw") == 1
