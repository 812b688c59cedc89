"""Record the golden histories of the InferenceCluster provisioning paths (a script, not a test).

    .venv/bin/python tests/replay/record_cloud_histories.py [--out DIR]

It starts the cloud provisioning environment of the integration tests (a Temporal dev server,
the simulated GKE and EKS clouds, a worker) and drives two GKE scenarios, replays what it
fetched against the current workflow code, and only then writes the histories and adds them to
``index.json`` (leaving the other goldens, recorded by ``record_histories.py``, untouched):

* provisioned: gke-central provisioned to Ready, then deleted (drain, withdraw, deprovision);
* rolled back: a two-pool cluster whose second pool hits a quota error, compensated in reverse,
  then deleted.

When to run it: as for ``record_histories.py``, only after an intentional, patched change to the
provisioning path of the InferenceCluster workflow.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from modelfleet.cli.apply import apply_resource
from modelfleet.contracts.status import ClusterStatus
from modelfleet.sim.clouds.faults import CloudFault, ErrorKind, FaultStage
from modelfleet.worker.runner import WORKFLOWS
from modelfleet.workflows.cluster import ClusterWorkflow
from modelfleet.workflows.ids import cluster_id

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from cloud_support import CLUSTERS, CloudStack, cloud_environment, renamed

DEFAULT_OUT = Path(__file__).resolve().parent / "histories"


async def finish(stack: CloudStack, name: str) -> WorkflowHistory:
    handle = stack.client.get_workflow_handle(cluster_id(name), result_type=ClusterStatus)
    await handle.execute_update(ClusterWorkflow.delete)
    await asyncio.wait_for(handle.result(), 120)
    return await handle.fetch_history()


async def record_all() -> dict[str, tuple[str, str, WorkflowHistory]]:
    out: dict[str, tuple[str, str, WorkflowHistory]] = {}
    with tempfile.TemporaryDirectory(prefix="modelfleet-record-clouds-") as tmp:
        async with cloud_environment(Path(tmp)) as stack:
            await apply_resource(stack.client, CLUSTERS["gke-central"])
            await stack.wait_phase("gke-central", "Ready")
            out["provisioned-cluster-gke.json"] = (
                cluster_id("gke-central"),
                "gke-central provisioned to Ready, then deleted and deprovisioned",
                await finish(stack, "gke-central"),
            )
            spec = renamed(CLUSTERS["gke-central"], "gke-quota")
            first = spec.spec.node_pools[0]
            pools = [first, first.model_copy(update={"name": "gpu-more"})]
            spec = spec.model_copy(
                update={"spec": spec.spec.model_copy(update={"node_pools": pools})}
            )
            stack.clouds.gke.faults.add(
                CloudFault(
                    operation="createNodePool",
                    target="gpu-more",
                    error=ErrorKind.QUOTA,
                    stage=FaultStage.OPERATION,
                )
            )
            await apply_resource(stack.client, spec)
            await stack.wait_phase("gke-quota", "Failed")
            out["rolled-back-cluster-gke.json"] = (
                cluster_id("gke-quota"),
                "quota on the second GKE node pool, compensated in reverse, then deleted",
                await finish(stack, "gke-quota"),
            )
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    for filename, (_, _, history) in out.items():
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        if result.replay_failure is not None:
            raise SystemExit(f"{filename} does not replay: {result.replay_failure!r}")
    return out


def write(recorded: dict[str, tuple[str, str, WorkflowHistory]], out: Path) -> None:
    index_path = out / "index.json"
    index = json.loads(index_path.read_text())
    for filename, (workflow_id, scenario, history) in recorded.items():
        document = json.loads(history.to_json())
        (out / filename).write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
        index[filename] = {
            "scenario": scenario,
            "type": "InferenceCluster",
            "workflow_id": workflow_id,
        }
        print(f"  {filename}: {workflow_id} ({len(history.events)} events)")
    index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    write(asyncio.run(record_all()), args.out)


if __name__ == "__main__":
    main()
