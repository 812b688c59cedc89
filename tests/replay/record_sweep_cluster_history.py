"""Record a golden history of the InferenceCluster's orphan sweep (a script, not a test).

    .venv/bin/python tests/replay/record_sweep_cluster_history.py [--scenario resync|return]

On the time-skipping test server with a real worker and the activity doubles of
``tests/workflow/test_cluster_orphan_sweep.py``, one scenario, written as its own golden with its
``index.json`` entry (the other goldens and entries are kept), after it replayed against the
current code:

* ``return`` -> ``swept-cluster.json``: an Existing cluster is Ready, goes dark until NotReady,
  comes back (the ``sweep-orphans-after-dark`` patch lists the replicas with objects there, asks
  the Fleet's ledger, deletes the one it no longer holds), then is deleted. The committed golden
  was recorded before ``sweep-orphans-on-resync`` and guards that older path: re-recording it
  today records the newer one, so leave it be.
* ``resync`` (the default) -> ``resync-swept-cluster.json``: the same return, with a replica the
  ledger releases just after the return sweep asked it (kept, then removed by a follow-up sweep
  at a next probe), and later something left while the cluster stayed Ready, removed by the slow
  resync (``sweep-orphans-on-resync``; a 120 s resync).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from datetime import timedelta
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer, Worker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))
from conftest import start_time_skipping_env
from test_cluster_orphan_sweep import SPEC, FakeCluster, _until

from modelfleet.cluster.sweep_schedule import FOLLOW_UPS
from modelfleet.cluster.workflow import ClusterWorkflow
from modelfleet.contracts.status import ClusterStatus
from modelfleet.contracts.workflow_inputs import ClusterInput
from modelfleet.worker.runner import WORKFLOWS

HISTORIES = Path(__file__).resolve().parent / "histories"
FILENAME = "swept-cluster.json"
WORKFLOW_ID = "cluster/replay-swept"
RESYNC_FILENAME = "resync-swept-cluster.json"
RESYNC_WORKFLOW_ID = "cluster/replay-resync-swept"
RESYNC_SECONDS = 120
SCENARIOS = {
    "return": (
        FILENAME,
        WORKFLOW_ID,
        "an Existing cluster Ready, dark until NotReady, Ready again: the orphan sweep "
        "(sweep-orphans-after-dark patch) listed the replicas there, asked the ledger and "
        "deleted the one it no longer holds; then deleted",
    ),
    "resync": (
        RESYNC_FILENAME,
        RESYNC_WORKFLOW_ID,
        "an Existing cluster Ready, dark until NotReady, Ready again: the return sweep kept a "
        "replica the ledger still held, a follow-up sweep at a next probe removed it once "
        "released; then something left while Ready was removed by the resync sweep "
        "(sweep-orphans-on-resync patch, 120 s resync); then deleted",
    ),
}


async def record_resync() -> WorkflowHistory:
    env = await start_time_skipping_env()
    queue = f"record-{uuid.uuid4()}"
    fake = FakeCluster(
        objects={("ns", "gave-up"), ("ns", "serving")},
        ledger={"ns/gave-up", "ns/serving"},
        released_after_asked="ns/gave-up",
    )
    try:
        async with Worker(
            env.client, task_queue=queue, workflows=[ClusterWorkflow], activities=fake.activities()
        ):
            handle = await env.client.start_workflow(
                ClusterWorkflow.run,
                ClusterInput(spec=SPEC, sweep_resync_seconds=RESYNC_SECONDS),
                id=RESYNC_WORKFLOW_ID,
                task_queue=queue,
                result_type=ClusterStatus,
            )
            await _until(env, handle, lambda s: s.ready)
            fake.up = False
            await _until(env, handle, lambda s: not s.ready)
            fake.up = True
            await _until(env, handle, lambda s: s.ready)
            while "sweep ns/gave-up" not in fake.calls:
                await env.sleep(timedelta(seconds=5))
            assert fake.calls[:2] == ["list", "ledger"], fake.calls
            # The serving replica stays held: the follow-ups run out, then the resync is next.
            while fake.calls.count("list") < 1 + FOLLOW_UPS:
                await env.sleep(timedelta(seconds=5))
            fake.objects.add(("ns", "terminated"))
            while "sweep ns/terminated" not in fake.calls:
                await env.sleep(timedelta(seconds=5))
            assert fake.objects == {("ns", "serving")}, fake.objects
            fake.ledger.clear()
            await handle.execute_update(ClusterWorkflow.delete)
            await handle.result()
            return await handle.fetch_history()
    finally:
        await env.shutdown()


async def record() -> WorkflowHistory:
    env = await start_time_skipping_env()
    queue = f"record-{uuid.uuid4()}"
    fake = FakeCluster(objects={("ns", "moved"), ("ns", "kept")}, ledger={"ns/kept"})
    try:
        async with Worker(
            env.client, task_queue=queue, workflows=[ClusterWorkflow], activities=fake.activities()
        ):
            handle = await env.client.start_workflow(
                ClusterWorkflow.run,
                ClusterInput(spec=SPEC),
                id=WORKFLOW_ID,
                task_queue=queue,
                result_type=ClusterStatus,
            )
            await _until(env, handle, lambda s: s.ready)
            fake.up = False
            await _until(env, handle, lambda s: not s.ready)
            fake.up = True
            await _until(env, handle, lambda s: s.ready)
            while "sweep ns/moved" not in fake.calls:
                await env.sleep(timedelta(seconds=5))
            assert fake.objects == {("ns", "kept")}, fake.objects
            fake.ledger.clear()
            await handle.execute_update(ClusterWorkflow.delete)
            await handle.result()
            return await handle.fetch_history()
    finally:
        await env.shutdown()


async def main(scenario: str) -> None:
    filename, workflow_id, described = SCENARIOS[scenario]
    history = await (record_resync() if scenario == "resync" else record())
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    await replayer.replay_workflow(history)
    (HISTORIES / filename).write_text(history.to_json())
    index_path = HISTORIES / "index.json"
    index = json.loads(index_path.read_text())
    index[filename] = {
        "scenario": described,
        "type": "InferenceCluster",
        "workflow_id": workflow_id,
    }
    index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    print(f"wrote {filename}: {len(history.events)} events")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="resync")
    asyncio.run(main(parser.parse_args().scenario))
