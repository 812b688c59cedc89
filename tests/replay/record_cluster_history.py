"""Record the golden history of the InferenceCluster workflow, ``histories/cluster.json`` (a
script, not a test).

    .venv/bin/python tests/replay/record_cluster_history.py [--out DIR]

It starts the cloud provisioning environment of the integration tests (a Temporal dev server,
the simulated GKE and EKS clouds, a worker; probes every 2 s, NotReady after 2 failed ones) and
drives one GKE cluster through its life: provisioned (cluster, pool, kubeconfig), its access
reviewed and its serving stack verified before it is Ready; given a new pool and wider bounds
(pools created and resized), then the new pool removed (the apply asks the Fleet which replicas
run on it; the pool is deleted); dark until NotReady and lit again (the return sweep lists the
cluster, asks the ledger); then deleted (drain, withdraw, deprovision). The history is replayed
against the current workflow code and only then written, with its ``index.json`` entry (the
other entries are kept).

No ``workflow.patched`` before the first release: when a change alters the commands the
InferenceCluster workflow issues, re-record this one golden with the change and commit both.
A replay failure without such a change is a determinism bug: fix the code, never re-record.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from modelfleet.api.clusters import InferenceCluster, NodePool
from modelfleet.cli.apply import apply_resource
from modelfleet.cluster.workflow import ClusterWorkflow
from modelfleet.contracts.ids import cluster_id
from modelfleet.contracts.status import ClusterStatus
from modelfleet.worker.client import data_converter
from modelfleet.worker.runner import WORKFLOWS
from modelfleet.worker.tuning import ENV_FAILURE_THRESHOLD, ENV_PROBE_SECONDS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from cloud_support import CLUSTERS, CloudStack, cloud_environment, renamed
from integration_support import wait_for
from record_histories import scrubbed

DEFAULT_OUT = Path(__file__).resolve().parent / "histories"
FILENAME = "cluster.json"
NAME = "gke-pools"
SCENARIO = (
    "a GKE cluster provisioned (access reviewed, serving stack verified) to Ready, given a pool "
    "and new bounds, the pool removed, dark until NotReady and back (return sweep), then deleted "
    "and deprovisioned"
)


async def pools_changed(stack: CloudStack) -> WorkflowHistory:
    spec = renamed(CLUSTERS["gke-central"], NAME)
    first = spec.spec.node_pools[0]

    def with_pools(*pools: NodePool) -> InferenceCluster:
        return spec.model_copy(
            update={"spec": spec.spec.model_copy(update={"node_pools": list(pools)})}
        )

    async def pools_match(message: str) -> ClusterStatus | None:
        status = await stack.cluster(NAME)
        found = [c for c in status.conditions if c.type == "NodePools"]
        return status if found and found[0].message == message else None

    await apply_resource(stack.client, spec)
    await stack.wait_phase(NAME, "Ready")
    wider = first.model_copy(update={"min_node_count": 1, "max_node_count": 6})
    extra = first.model_copy(
        update={"name": "gpu-extra", "min_node_count": None, "max_node_count": None}
    )
    await apply_resource(stack.client, with_pools(wider, extra))
    await wait_for(lambda: pools_match("created gpu-extra; resized gpu-h100"), 90, "pools")
    await apply_resource(stack.client, with_pools(wider))
    await wait_for(lambda: pools_match("deleted gpu-extra"), 90, "gpu-extra deleted")
    stack.fleet.set_faults(NAME, {"dark": True, "dark_mode": "reset"})
    await stack.wait_phase(NAME, "NotReady", 120)
    stack.fleet.set_faults(NAME, {})
    await stack.wait_phase(NAME, "Ready", 120)

    async def swept() -> ClusterStatus | None:
        status = await stack.cluster(NAME)
        return None if status.sweep_pending else status

    await wait_for(swept, 60, "the return sweep")
    handle = stack.client.get_workflow_handle(cluster_id(NAME), result_type=ClusterStatus)
    await handle.execute_update(ClusterWorkflow.delete)
    await asyncio.wait_for(handle.result(), 120)
    return await handle.fetch_history()


async def record() -> WorkflowHistory:
    os.environ[ENV_PROBE_SECONDS] = "2"
    os.environ[ENV_FAILURE_THRESHOLD] = "2"
    with tempfile.TemporaryDirectory(prefix="modelfleet-record-cluster-") as tmp:
        async with cloud_environment(Path(tmp)) as stack:
            history = await pools_changed(stack)
    replayer = Replayer(workflows=WORKFLOWS, data_converter=data_converter())
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    if result.replay_failure is not None:  # write nothing: the code is not deterministic
        raise SystemExit(f"{FILENAME} does not replay: {result.replay_failure!r}")
    return history


def write(history: WorkflowHistory, out: Path) -> None:
    index_path = out / "index.json"
    index = json.loads(index_path.read_text())
    document = json.loads(history.to_json())
    (out / FILENAME).write_text(scrubbed(json.dumps(document, indent=1, sort_keys=True)) + "\n")
    index[FILENAME] = {
        "scenario": SCENARIO,
        "type": "InferenceCluster",
        "workflow_id": cluster_id(NAME),
    }
    index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    print(f"  {FILENAME}: {cluster_id(NAME)} ({len(history.events)} events)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    write(asyncio.run(record()), args.out)


if __name__ == "__main__":
    main()
