"""Crash recovery end to end (architecture 7, reliability): kill the worker with SIGKILL, or stop
the Temporal dev server, while replicas wait for readiness; after a restart the rollout finishes
with no duplicate, orphaned or missing object on any cluster and no leaked capacity.

Each test owns its environment (``crash_env``): the simulated fleet in this process, the dev
server on a SQLite file and the worker as separate processes, all stopped at the end.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from crash_env import CrashEnv, all_ready, crash_env
from integration_support import deployment, wait_for
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.service import RPCError

from modelfleet.cli.apply import apply_resource
from modelfleet.contracts.activity_names import KUBE_POLL_READY
from modelfleet.contracts.ids import replica_id
from modelfleet.contracts.status import DeploymentStatus, ReplicaStep
from modelfleet.replica.workflow import ReplicaWorkflow

# Long enough that a replica is still waiting for its leader when the crash comes.
STARTUP_SECONDS = 4.0


async def rollout_waiting_for_leaders(env: CrashEnv, ns: str, replicas: int) -> DeploymentStatus:
    """Apply a deployment and return once every replica is waiting for its leader (its
    ``kube.poll_ready`` pending, between or in its checks): the moment to crash something."""
    await apply_resource(env.temporal, deployment("m", ns, replicas=replicas))
    # The deployment hears only Ready/Failed/Done; the step is the replica's own (a query).
    status = await env.wait_status(
        ns, "m", lambda s: len(s.replicas) == replicas, 60, "every replica placed"
    )

    async def waits_pending() -> bool | None:
        for r in status.replicas:
            handle = env.temporal.get_workflow_handle(replica_id(ns, r.name))
            progress = await handle.query(ReplicaWorkflow.progress)
            described = await handle.describe()
            waiting = [
                a
                for a in described.raw_description.pending_activities
                if a.activity_type.name == KUBE_POLL_READY
            ]
            if progress.step is not ReplicaStep.LEADER_READY or not waiting:
                return None
        return True

    await wait_for(waits_pending, 60, "every replica waiting for its leader")
    now = await env.status(ns, "m")
    assert now.ready == 0, "the crash must come before any replica is Ready"
    return now


async def readiness_finished_by(env: CrashEnv, ns: str, replica: str) -> list[str]:
    """The worker identities that ran the last attempt of a replica's readiness checks."""
    history = await env.temporal.get_workflow_handle(replica_id(ns, replica)).fetch_history()
    scheduled = {
        e.event_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == KUBE_POLL_READY
    }
    return [
        e.activity_task_started_event_attributes.identity
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and e.activity_task_started_event_attributes.scheduled_event_id in scheduled
    ]


async def assert_replica_workflows(env: CrashEnv, ns: str, status: DeploymentStatus) -> None:
    """Exactly one running replica workflow per final replica, and no other."""
    query = f"ModelfleetKind = 'ModelReplica' AND ModelfleetNamespace = '{ns}'"
    running = sorted(
        [w.id async for w in env.temporal.list_workflows(query + " AND ExecutionStatus='Running'")]
    )
    assert running == sorted(replica_id(ns, r.name) for r in status.replicas)


async def test_worker_sigkill_mid_rollout_then_restart_completes_without_strays(
    tmp_path: Path,
) -> None:
    async with crash_env(tmp_path, startup_seconds=STARTUP_SECONDS) as env:
        ns = "crash-worker"
        before = await rollout_waiting_for_leaders(env, ns, replicas=2)

        await env.kill_worker()
        assert env.worker is not None
        assert env.worker.returncode == -9
        await env.start_worker()

        final = await env.wait_status(ns, "m", all_ready(2), 90, "Ready after the restart")
        # The same replicas finished: nothing was placed twice or re-placed.
        assert sorted(r.name for r in final.replicas) == sorted(r.name for r in before.replicas)
        await env.assert_exactly_the_final_replicas(ns, final)
        await assert_replica_workflows(env, ns, final)
        # The kill really interrupted the readiness waits: each finished on the new worker.
        for r in final.replicas:
            identities = await readiness_finished_by(env, ns, r.name)
            assert identities, f"{r.name}: no readiness check started"
            assert identities[-1].startswith(f"{env.worker.pid}@"), (r.name, identities)


async def test_dev_server_stopped_mid_rollout_then_restarted_completes_without_strays(
    tmp_path: Path,
) -> None:
    async with crash_env(tmp_path, startup_seconds=STARTUP_SECONDS) as env:
        ns = "crash-server"
        before = await rollout_waiting_for_leaders(env, ns, replicas=2)
        assert env.server is not None
        old_pid = env.server.process.pid

        await env.stop_server()
        assert env.server.process.returncode is not None
        # Down means down: nothing answers on the port (no stale answer from the old process).
        with pytest.raises(RPCError):
            await env.temporal.workflow_service.get_system_info(
                GetSystemInfoRequest(), retry=False, timeout=timedelta(seconds=5)
            )
        await env.start_server()
        assert env.server.process.pid != old_pid

        final = await env.wait_status(ns, "m", all_ready(2), 90, "Ready after the restart")
        assert sorted(r.name for r in final.replicas) == sorted(r.name for r in before.replicas)
        await env.assert_exactly_the_final_replicas(ns, final)
        await assert_replica_workflows(env, ns, final)
        # The same worker process carried on through the outage.
        assert env.worker is not None
        assert env.worker.returncode is None
        assert len(env.worker_logs) == 1
