"""Record the golden history of a ModelReplica that repaired drift (a script, not a test).

    .venv/bin/python tests/replay/record_drift_history.py

The main recorder (``record_histories.py``) drives the long-standing scenarios; this one adds the
serving loop of the ``replica-drift-repair`` and ``replica-health-over-time`` patches: on a dev
server with the simulated quickstart fleet, a one-replica deployment is rolled out to Ready, its
engine Deployment is deleted with the Kubernetes client, the replica's health check finds it
gone, a drift check finds it missing and the repair re-applies it (its summary says why), the
replica is Ready again, and the deployment is deleted (the replica tears down). The replica's
history is replayed against the current code and only then written as ``drift-replica.json``
beside the other goldens, with its ``index.json`` entry (the other entries are kept).

When to run it: as for ``record_histories.py``, only after an intentional, patched change.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from modelfleet.adapters.kube_client import KubeCluster
from modelfleet.cli.apply import apply_resource
from modelfleet.cli.devenv import dev_environment
from modelfleet.contracts.ids import FLEET_ID, deployment_id, replica_id
from modelfleet.contracts.status import DeploymentStatus, FleetView, ReplicaPhase
from modelfleet.deployment.workflow import DeploymentWorkflow
from modelfleet.fleet.workflow import FleetWorkflow
from modelfleet.replica.workflow import ReplicaWorkflow
from modelfleet.worker.runner import WORKFLOWS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from integration_support import deployment, wait_for

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
HISTORIES = Path(__file__).resolve().parent / "histories"
FILENAME = "drift-replica.json"
SCENARIO = (
    "an engine Deployment deleted outside modelfleet was re-created by drift repair and the "
    "replica was Ready again, then torn down (replica-drift-repair, replica-health-over-time)"
)


async def record() -> tuple[str, WorkflowHistory]:
    ns = "replay-drift"
    with tempfile.TemporaryDirectory(prefix="modelfleet-record-") as tmp:
        async with dev_environment(
            Path(tmp),
            [str(QUICKSTART / "classes.yaml"), str(QUICKSTART / "clusters.yaml")],
            ui=False,
            startup_seconds=0.5,
        ) as env:
            client = env.client

            async def clusters_ready() -> bool | None:
                view: FleetView = await client.get_workflow_handle(FLEET_ID).query(
                    FleetWorkflow.view
                )
                return True if view.clusters and all(c.ready for c in view.clusters) else None

            await wait_for(clusters_ready, 60, "every cluster Ready")
            await apply_resource(client, deployment("m", ns, replicas=1))
            handle = client.get_workflow_handle_for(DeploymentWorkflow.run, deployment_id(ns, "m"))

            async def ready() -> DeploymentStatus | None:
                status = await handle.query(DeploymentWorkflow.status)
                return status if status.phase == "Ready" and status.ready == 1 else None

            (replica,) = (await wait_for(ready, 120, "Ready")).replicas
            wf = client.get_workflow_handle_for(ReplicaWorkflow.run, replica_id(ns, replica.name))
            kube = KubeCluster(env.fleet.kubeconfig(replica.cluster))
            engines = [
                o
                for o in env.fleet.store(replica.cluster)
                .list_objects(
                    env.fleet.store(replica.cluster).resource_type("apps/v1", "Deployment"),
                    namespace=f"mf-{ns}",
                )
                .items
                if not o["metadata"]["name"].endswith("-epp")
            ]
            (engine,) = engines
            meta = engine["metadata"]
            await asyncio.to_thread(
                kube.delete, "apps/v1", "Deployment", meta["name"], meta["namespace"]
            )
            print(f"  deleted Deployment {meta['namespace']}/{meta['name']}")

            async def repaired() -> bool | None:
                progress = await wf.query(ReplicaWorkflow.progress)
                back = await asyncio.to_thread(
                    kube.get, "apps/v1", "Deployment", meta["name"], meta["namespace"]
                )
                if back is None or back["metadata"]["uid"] == meta["uid"]:
                    return None
                return True if progress.phase is ReplicaPhase.READY else None

            await wait_for(repaired, 120, "the Deployment re-created and the replica Ready")
            kube.close()
            await handle.execute_update(DeploymentWorkflow.delete)
            await asyncio.wait_for(handle.result(), 120)
            await wf.result()
            history = await wf.fetch_history()
            print(f"  {FILENAME}: {wf.id} ({len(history.events)} events)")
            return wf.id, history


async def main() -> None:
    workflow_id, history = await record()
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    if result.replay_failure is not None:
        raise SystemExit(f"{FILENAME} does not replay: {result.replay_failure!r}")
    document = json.loads(history.to_json())
    (HISTORIES / FILENAME).write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    index_path = HISTORIES / "index.json"
    index = json.loads(index_path.read_text())
    index[FILENAME] = {"workflow_id": workflow_id, "type": "ModelReplica", "scenario": SCENARIO}
    index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    print(f"wrote {FILENAME} and its index.json entry to {HISTORIES}")


if __name__ == "__main__":
    asyncio.run(main())
