"""Self-healing on the dev server and the simulated fleet (issue #16): objects of a serving
replica deleted with the Kubernetes client come back within the cluster's scan interval and the
history says why; a label and a config edited with kubectl (edits that move no generation) are
put back; a cluster restarted empty under a running deployment is re-populated without anything
being re-applied; one injected 500 on the cluster's replica scan leaves a Ready replica Ready.

A Ready replica is watched by its InferenceCluster (``cluster.watch``): the cluster's
probe loop (every ``probe_interval_seconds``, 5 s as the stack applies the clusters) scans its
replicas and signals the one that changed. The first and the last test run a ModelReplica
workflow of their own (started directly, with a parent that does not exist: nobody is told) on
h100-east; each test deletes what it created.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from integration_support import STACK_PROBE_SECONDS, Stack, delete_deployment, deployment, wait_for
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle

from modelfleet.api.deployments import ModelReplica
from modelfleet.cli.apply import apply_resource
from modelfleet.contracts.activity_names import KUBE_SCAN_REPLICAS, TASK_QUEUE
from modelfleet.contracts.ids import cluster_id, deployment_id, replica_id
from modelfleet.contracts.status import ReplicaPhase, ReplicaProgress
from modelfleet.contracts.workflow_inputs import ReplicaResult
from modelfleet.rendering.facts import ClusterFacts
from modelfleet.rendering.replica_manifests import render_replica
from modelfleet.replica.state import ReplicaInput
from modelfleet.replica.workflow import ReplicaWorkflow
from modelfleet.sim.faults import FaultConfig

CLUSTER = "h100-east"
# The stack's clusters probe (and scan their replicas) this often.
SCAN_SECONDS = STACK_PROBE_SECONDS


def _replica(namespace: str) -> ModelReplica:
    """One single-GPU replica of the quickstart model, placed by hand on h100-east."""
    md = deployment("m", namespace)
    member = md.spec.template.spec.engines[0].members[0]
    return ModelReplica.model_validate(
        {
            "metadata": {"name": f"m-{uuid.uuid4().hex[:5]}", "namespace": namespace},
            "spec": {
                "clusterName": CLUSTER,
                "deployment": "m",
                "engines": [
                    {
                        "name": "vllm",
                        "members": [
                            {
                                "role": "Standalone",
                                "nodePoolName": "gpu-h100",
                                "template": member.template.model_dump(
                                    by_alias=True, exclude_none=True
                                ),
                                "deviceRequests": [
                                    {
                                        "name": "gpu",
                                        "deviceClassName": "gpu.nvidia.com",
                                        "count": 1,
                                    }
                                ],
                            }
                        ],
                    }
                ],
            },
        }
    )


@asynccontextmanager
async def serving_replica(
    stack: Stack, namespace: str, **knobs: Any
) -> AsyncIterator[tuple[ModelReplica, WorkflowHandle[Any, ReplicaResult]]]:
    """A Ready replica workflow of its own; torn down (and checked gone) afterwards."""
    replica = _replica(namespace)
    arg = ReplicaInput(
        replica=replica,
        parent_id=f"no-such-deployment/{namespace}",
        progress_deadline_seconds=120,
        health_interval_seconds=1,
        **knobs,
    )
    handle = await stack.client.start_workflow(
        ReplicaWorkflow.run, arg, id=replica_id(namespace, replica.name), task_queue=TASK_QUEUE
    )
    try:
        await wait_phase(handle, ReplicaPhase.READY)
        yield replica, handle
    finally:
        await handle.signal(ReplicaWorkflow.teardown)
        result = await handle.result()
        assert result.phase is ReplicaPhase.TERMINATED
        assert stack.objects_of(namespace, CLUSTER) == []


async def wait_phase(
    handle: WorkflowHandle[Any, ReplicaResult], phase: ReplicaPhase, limit: float = 60
) -> ReplicaProgress:
    async def probe() -> ReplicaProgress | None:
        progress = await handle.query(ReplicaWorkflow.progress)
        return progress if progress.phase is phase else None

    return await wait_for(probe, limit, f"{handle.id} to be {phase.value}")


async def activity_summaries(stack: Stack, handle: WorkflowHandle[Any, Any]) -> list[str]:
    """What the UI shows for each activity the workflow scheduled, in order."""
    converter = stack.client.data_converter.payload_converter
    out = []
    async for event in handle.fetch_history_events():
        scheduled = event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        if scheduled and event.user_metadata.HasField("summary"):
            out.append(str(converter.from_payload(event.user_metadata.summary, str)))
    return out


async def updates_of(handle: WorkflowHandle[Any, Any]) -> int:
    """How many updates (apply, scale) the workflow accepted so far."""
    accepted = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    return len([e async for e in handle.fetch_history_events() if e.event_type == accepted])


async def test_objects_deleted_outside_modelfleet_come_back_and_the_history_says_why(
    stack: Stack,
) -> None:
    ns = "self-heal-drift"
    async with serving_replica(stack, ns) as (replica, wf):
        rendered = render_replica(replica, ClusterFacts())
        manifests = [m for s in rendered.steps for m in s.manifests]
        targets = [
            m
            for m in manifests
            if m["kind"] in ("ResourceClaimTemplate", "InferencePool")
            or (m["kind"] == "Deployment" and not m["metadata"]["name"].endswith("-epp"))
        ]
        assert sorted(m["kind"] for m in targets) == [
            "Deployment",
            "InferencePool",
            "ResourceClaimTemplate",
        ]
        kube = stack.kube(CLUSTER)

        # The client is synchronous and the fleet serves on this event loop: calls go to a thread.
        async def uid(m: dict[str, Any]) -> str | None:
            meta = m["metadata"]
            live = await asyncio.to_thread(
                kube.get, m["apiVersion"], m["kind"], meta["name"], meta["namespace"]
            )
            return None if live is None else str(live["metadata"]["uid"])

        before = {m["kind"]: await uid(m) for m in targets}
        for m in targets:
            meta = m["metadata"]
            assert await asyncio.to_thread(
                kube.delete, m["apiVersion"], m["kind"], meta["name"], meta["namespace"]
            )

        async def all_back() -> bool | None:
            now = {m["kind"]: await uid(m) for m in targets}
            return True if all(now[k] not in (None, before[k]) for k in now) else None

        # Within a scan interval plus the comparison and the re-apply, with room for a loaded
        # machine.
        await wait_for(all_back, 3 * SCAN_SECONDS + 15, "every deleted object re-created")
        await wait_phase(wf, ReplicaPhase.READY)
        summaries = await activity_summaries(stack, wf)
        # The cluster's scan found them gone: the replica ran no health check of its own.
        assert not [s for s in summaries if s == "health check"]
        repairs = "\n".join(s for s in summaries if s.startswith("repair"))
        for m in targets:
            what = f"{m['kind']} {m['metadata']['namespace']}/{m['metadata']['name']}"
            assert f"{what} was deleted outside modelfleet: re-created" in repairs
        kube.close()


async def test_a_label_or_a_config_edited_with_kubectl_is_put_back_and_the_history_says_why(
    stack: Stack, tmp_path: Path
) -> None:
    """Edits that move no generation: a label of ours overwritten on the engine's Deployment,
    and the endpoint picker's ConfigMap (a kind without a generation) patched."""
    ns = "self-heal-edit"
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is not on PATH (the fresh machine has it)"
    async with serving_replica(stack, ns) as (replica, wf):
        rendered = render_replica(replica, ClusterFacts())
        manifests = {
            m["kind"] + "/" + m["metadata"]["name"]: m for s in rendered.steps for m in s.manifests
        }
        (engine,) = [
            m
            for k, m in manifests.items()
            if k.startswith("Deployment/") and not k.endswith("-epp")
        ]
        (picker_config,) = [m for k, m in manifests.items() if k.startswith("ConfigMap/")]
        target_ns = engine["metadata"]["namespace"]
        label = "modelfleet.dev/deployment"

        async def run(*args: str) -> None:
            proc = await asyncio.create_subprocess_exec(
                kubectl,
                *args,
                "-n",
                target_ns,
                env={"KUBECONFIG": str(stack.env.fleet.kubeconfig(CLUSTER)), "HOME": str(tmp_path)},
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await proc.communicate()
            assert proc.returncode == 0, (args, out, err)

        await run(
            "label",
            "deployment",
            engine["metadata"]["name"],
            f"{label}=edited",
            "--overwrite",
        )
        (key, value), *_ = sorted(picker_config["data"].items())
        await run(
            "patch",
            "configmap",
            picker_config["metadata"]["name"],
            "--type",
            "merge",
            "-p",
            json.dumps({"data": {key: value + "\n# edited"}}),
        )
        kube = stack.kube(CLUSTER)

        def live(m: dict[str, Any]) -> dict[str, Any]:
            meta = m["metadata"]
            found = kube.get(m["apiVersion"], m["kind"], meta["name"], meta["namespace"])
            assert found is not None
            return found

        edited = await asyncio.to_thread(live, engine)
        assert edited["metadata"]["labels"][label] == "edited"

        async def put_back() -> bool | None:
            deployment_now = await asyncio.to_thread(live, engine)
            config_now = await asyncio.to_thread(live, picker_config)
            restored = (
                deployment_now["metadata"]["labels"][label] == engine["metadata"]["labels"][label]
                and config_now["data"][key] == value
            )
            return True if restored else None

        await wait_for(put_back, 3 * SCAN_SECONDS + 15, "the label and the config put back")
        await wait_phase(wf, ReplicaPhase.READY)
        repairs = "\n".join(
            s for s in await activity_summaries(stack, wf) if s.startswith("repair")
        )
        for m in (engine, picker_config):
            what = f"{m['kind']} {m['metadata']['namespace']}/{m['metadata']['name']}"
            assert f"{what} was changed outside modelfleet" in repairs, repairs
        kube.close()


async def test_one_injected_500_on_a_replica_scan_leaves_a_ready_replica_ready(
    stack: Stack,
) -> None:
    ns = "self-heal-500"
    async with serving_replica(stack, ns) as (_, wf):
        injected = stack.fleet.server.stats(CLUSTER).injected_500
        # The cluster's scan lists Deployments; nothing else lists them over HTTP in this test.
        stack.fleet.set_faults(
            CLUSTER, FaultConfig(error_rate_500=1.0, verbs=["list"], resources=["deployments"])
        )
        try:

            async def hit() -> bool | None:
                return True if stack.fleet.server.stats(CLUSTER).injected_500 > injected else None

            await wait_for(hit, 3 * SCAN_SECONDS + 15, "a replica scan to get a 500")
        finally:
            stack.fleet.set_faults(CLUSTER, FaultConfig())
        hits = stack.fleet.server.stats(CLUSTER).injected_500 - injected
        assert hits >= 1
        cluster = stack.client.get_workflow_handle(cluster_id(CLUSTER))

        # The scan was retried and passed: a later attempt of a scan completed.
        async def retried() -> bool | None:
            kinds: dict[int, str] = {}
            async for event in cluster.fetch_history_events():
                if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                    attrs = event.activity_task_scheduled_event_attributes
                    kinds[event.event_id] = attrs.activity_type.name
                elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                    started = event.activity_task_started_event_attributes
                    kind = kinds.get(started.scheduled_event_id)
                    if kind == KUBE_SCAN_REPLICAS and started.attempt > 1:
                        return True
            return None

        await wait_for(retried, 30, "a retried replica scan")
        progress = await wf.query(ReplicaWorkflow.progress)
        assert progress.phase is ReplicaPhase.READY
        summaries = await activity_summaries(stack, wf)
        # Never Degraded: it would have withdrawn its endpoint; and it checked nothing itself.
        assert "withdraw endpoint" not in summaries
        assert "health check" not in summaries


async def test_a_cluster_restarted_empty_is_re_populated_without_re_applying(
    stack: Stack,
) -> None:
    ns = "self-heal-restart"
    md = deployment("m", ns)
    await apply_resource(stack.client, md)
    try:
        ready = await stack.wait_status(ns, "m", lambda s: s.phase == "Ready" and s.ready == 1)
        (replica,) = ready.replicas
        expected = sorted(
            (o["kind"], o["metadata"]["name"]) for o in stack.objects_of(ns, replica.cluster)
        )
        assert expected
        handle = stack.client.get_workflow_handle(deployment_id(ns, "m"))
        applied = await updates_of(handle)
        await stack.fleet.restart_cluster(replica.cluster)
        assert stack.objects_of(ns, replica.cluster) == []

        async def repopulated() -> bool | None:
            found = sorted(
                (o["kind"], o["metadata"]["name"]) for o in stack.objects_of(ns, replica.cluster)
            )
            return True if found == expected else None

        # The cluster's next scan finds it gone, the replica's drift check re-creates everything.
        await wait_for(repopulated, 90, "the restarted cluster re-populated")
        status = await stack.wait_status(ns, "m", lambda s: s.phase == "Ready" and s.ready == 1, 60)
        # The same replica, repaired where it was: not re-placed, and nothing re-applied.
        assert [r.name for r in status.replicas] == [replica.name]
        assert status.generation == ready.generation
        assert await updates_of(handle) == applied
    finally:
        await delete_deployment(stack, ns, "m")
