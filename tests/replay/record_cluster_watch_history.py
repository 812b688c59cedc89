"""Record the golden histories of the per-cluster replica watch (a script, not a test).

    .venv/bin/python tests/replay/record_cluster_watch_history.py [--verified]

Adds the ``replica-cluster-watch`` path (issue 11): on a dev server with the simulated quickstart
fleet, a one-replica deployment is rolled out to Ready and its replica registers with its
InferenceCluster; the engine Deployment is deleted with the Kubernetes client, the cluster's
next ``kube.scan_replicas`` finds it missing and signals the replica, which compares, re-applies
(the repair's summary says why), registers again and is told it is healthy once the Deployment
is Available; then the deployment is deleted (the replica unregisters and tears down). Both
histories are replayed against the current code and only then written as
``watched-replica.json`` beside the other goldens, with its ``index.json`` entry (the other
entries are kept). Paths in stack traces are cut to ``site-packages/...`` and repository-relative
paths. With ``--verified`` it writes the replica's history as ``verified-watched-replica.json``
(``replica-verify-watch-baseline``: the first news after each registration is followed by a
drift comparison). The InferenceCluster's one golden is ``cluster.json``
(``record_cluster_history.py``); this scenario's cluster history is not kept.

When to run it: as for ``record_histories.py``, only after an intentional, patched change.
"""

from __future__ import annotations

import asyncio
import json
import re
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
REPLICA_FILE = "watched-replica.json"
REPLICA_SCENARIO = (
    "a Ready replica watched by its cluster (replica-cluster-watch): registered, told its engine "
    "Deployment was missing, repaired it, registered again, told healthy, then torn down"
)
VERIFIED_FILE = "verified-watched-replica.json"
VERIFIED_SCENARIO = (
    "a Ready replica watched by its cluster, each baseline verified "
    "(replica-verify-watch-baseline): registered, compared when acknowledged, told its engine "
    "Deployment was missing, repaired it, registered again, compared again, told healthy, then "
    "torn down"
)


async def record() -> list[tuple[str, str, WorkflowHistory]]:
    ns = "replay-watch"
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
            store = env.fleet.store(replica.cluster)
            engines = [
                o
                for o in store.list_objects(
                    store.resource_type("apps/v1", "Deployment"), namespace=f"mf-{ns}"
                ).items
                if not o["metadata"]["name"].endswith("-epp")
            ]
            (engine,) = engines
            meta = engine["metadata"]
            # A scan or two with the replica healthy first (nothing is signalled).
            await asyncio.sleep(35)
            await asyncio.to_thread(
                kube.delete, "apps/v1", "Deployment", meta["name"], meta["namespace"]
            )
            print(f"  deleted Deployment {meta['namespace']}/{meta['name']}")

            seen: set[ReplicaPhase] = set()

            async def repaired() -> bool | None:
                # Degraded first (the repair re-created it), then Ready: a query between the
                # re-apply and the workflow task after it still reads Ready.
                progress = await wf.query(ReplicaWorkflow.progress)
                seen.add(progress.phase)
                back = await asyncio.to_thread(
                    kube.get, "apps/v1", "Deployment", meta["name"], meta["namespace"]
                )
                if back is None or back["metadata"]["uid"] == meta["uid"]:
                    return None
                if ReplicaPhase.DEGRADED not in seen:
                    return None
                return True if progress.phase is ReplicaPhase.READY else None

            await wait_for(repaired, 180, "the Deployment re-created and the replica Ready")
            kube.close()
            await handle.execute_update(DeploymentWorkflow.delete)
            await asyncio.wait_for(handle.result(), 120)
            await wf.result()
            history = await wf.fetch_history()
            print(f"  {REPLICA_FILE}: {wf.id} ({len(history.events)} events)")
            return [(REPLICA_FILE, wf.id, history)]


def scrubbed(text: str) -> str:
    """No machine paths in a golden: stack traces name site-packages/... and repo paths."""
    text = re.sub(r"/[^\s\"']*?/site-packages/", "site-packages/", text)
    return text.replace(str(ROOT) + "/", "")


async def main() -> None:
    recorded = await record()
    verified = "--verified" in sys.argv
    names = {
        REPLICA_FILE: (VERIFIED_FILE, VERIFIED_SCENARIO)
        if verified
        else (REPLICA_FILE, REPLICA_SCENARIO)
    }
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    index_path = HISTORIES / "index.json"
    index = json.loads(index_path.read_text())
    for recorded_as, workflow_id, history in recorded:
        if recorded_as not in names:
            continue
        filename, scenario = names[recorded_as]
        text = scrubbed(json.dumps(json.loads(history.to_json()), indent=1, sort_keys=True))
        again = WorkflowHistory.from_json(workflow_id, text)
        result = await replayer.replay_workflow(again, raise_on_replay_failure=False)
        if result.replay_failure is not None:
            raise SystemExit(f"{filename} does not replay: {result.replay_failure!r}")
        # The directory the checkout sits in, and home directories: paths of this machine.
        if f"{ROOT.parent}/" in text or "/home/" in text:
            raise SystemExit(f"{filename} still holds a machine path")
        (HISTORIES / filename).write_text(text + "\n")
        index[filename] = {"workflow_id": workflow_id, "type": "ModelReplica", "scenario": scenario}
        print(f"wrote {filename} and its index.json entry to {HISTORIES}")
    index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
