"""Record a golden history of a ModelReplica on the time-skipping server (a script, not a test).

    .venv/bin/python tests/replay/record_dark_teardown_history.py [--scenario dark-teardown]

With a real worker and the activity doubles of ``tests/workflow/test_replica_saga.py``, one
scenario, written as its own golden with its ``index.json`` entry (the other goldens and entries
are kept), after it replayed against the current code:

* ``dark-teardown`` -> ``dark-teardown-replica.json``: a replica rolled out to Ready and serving;
  its cluster goes dark and it is told to tear down. Every delete fails as an unreachable cluster
  does; between bounded delete tries it asks whether the cluster's workflow will sweep it on its
  return (``fleet.sweep_pending``): first no, so it tries again, then yes, and the teardown ends,
  leaving what is there to the sweep (patch ``replica-teardown-leaves-dark-cluster-to-sweep``).

Stack traces in the recorded failures are scrubbed of this machine's paths (``site-packages/...``
and repo-relative), as in the other goldens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from datetime import timedelta
from pathlib import Path

from temporalio.client import WorkflowExecutionStatus, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer, Worker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))
from conftest import start_time_skipping_env
from test_replica_saga import REPLICA, FakeCluster, ProgressSink

from modelfleet.contracts.status import ReplicaPhase
from modelfleet.contracts.workflow_inputs import ReplicaInput, ReplicaResult
from modelfleet.replica.workflow import ReplicaWorkflow
from modelfleet.worker.runner import WORKFLOWS

ROOT = Path(__file__).resolve().parents[2]
HISTORIES = Path(__file__).resolve().parent / "histories"
SCENARIOS = {
    "dark-teardown": (
        "dark-teardown-replica.json",
        f"replica/replay-dark-teardown/{REPLICA.name}",
        "a serving replica told to tear down while its cluster is dark: bounded delete tries, "
        "the cluster's workflow asked whether it will sweep on return (no, then yes), and the "
        "teardown ended leaving what is there to that sweep "
        "(replica-teardown-leaves-dark-cluster-to-sweep)",
    ),
}
# Absolute paths in stack traces: up to site-packages, and this checkout's root.
_SITE = re.compile(r"/[^\s\"\\]*?/site-packages/")


def scrub(text: str) -> str:
    return _SITE.sub("site-packages/", text).replace(f"{ROOT}/", "")


async def record_dark_teardown(workflow_id: str) -> WorkflowHistory:
    env = await start_time_skipping_env()
    queue = "record-dark-teardown"
    fake = FakeCluster(not_dark_yet=1)
    try:
        async with Worker(
            env.client,
            task_queue=queue,
            workflows=[ReplicaWorkflow, ProgressSink],
            activities=[
                fake.apply,
                fake.wait_ready,
                fake.poll_ready,
                fake.check_ready,
                fake.delete,
                fake.will_be_swept,
                fake.publish,
                fake.withdraw,
            ],
        ):
            parent_id = "sink/replay-dark-teardown"
            sink = await env.client.start_workflow(ProgressSink.run, id=parent_id, task_queue=queue)
            await env.client.start_workflow(
                ReplicaWorkflow.run,
                ReplicaInput(replica=REPLICA, parent_id=parent_id, progress_deadline_seconds=600),
                id=workflow_id,
                task_queue=queue,
            )
            handle = env.client.get_workflow_handle(workflow_id, result_type=ReplicaResult)
            await env.sleep(timedelta(minutes=2))  # serving: the health watch runs
            assert any(c.startswith("publish:") for c in fake.calls), fake.calls
            fake.dark = True
            await handle.signal(ReplicaWorkflow.teardown)
            for _ in range(200):
                if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
                    break
                await env.sleep(timedelta(seconds=10))
            result = await handle.result()
            assert result.phase is ReplicaPhase.TERMINATED, result
            asked = [c for c in fake.calls if c.startswith("sweep pending?")]
            assert len(asked) == 2, fake.calls
            assert fake.deleted == []
            await sink.signal(ProgressSink.finish)
            await sink.result()
            return await handle.fetch_history()
    finally:
        await env.shutdown()


async def main(scenario: str) -> None:
    filename, workflow_id, described = SCENARIOS[scenario]
    history = await record_dark_teardown(workflow_id)
    history = WorkflowHistory.from_json(workflow_id, scrub(history.to_json()))
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    await replayer.replay_workflow(history)
    text = history.to_json()
    # The directory the checkout sits in: any path of this machine.
    if f"{ROOT.parent}/" in text:
        raise SystemExit(f"{filename}: an unscrubbed path is left in the history")
    (HISTORIES / filename).write_text(text)
    index_path = HISTORIES / "index.json"
    index = json.loads(index_path.read_text())
    index[filename] = {"scenario": described, "type": "ModelReplica", "workflow_id": workflow_id}
    index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    print(f"wrote {filename}: {len(history.events)} events")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="dark-teardown")
    asyncio.run(main(parser.parse_args().scenario))
