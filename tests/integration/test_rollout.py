"""Rollouts end to end: the real Temporal dev server, the worker, the simulated quickstart fleet
over real HTTP. Apply, scale (Update and signal), roll a spec change, delete, reject bad input."""

from __future__ import annotations

import asyncio
import os
import re
import sys

import pytest
from integration_support import Stack, deployment, wait_for
from temporalio.client import WithStartWorkflowOperation, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy

from modelfleet.cli.apply import apply_resource
from modelfleet.contracts.activity_names import TASK_QUEUE
from modelfleet.contracts.ids import deployment_id
from modelfleet.contracts.status import DeploymentStatus, ReplicaPhase
from modelfleet.deployment.workflow import DeploymentInput, DeploymentWorkflow, ScaleRequest


def all_ready(n: int):  # type: ignore[no-untyped-def]
    def check(s: DeploymentStatus) -> bool:
        return (
            s.phase == "Ready"
            and s.ready == n
            and len(s.replicas) == n
            and all(r.phase is ReplicaPhase.READY for r in s.replicas)
        )

    return check


async def test_apply_rolls_out_to_ready_across_clusters(stack: Stack) -> None:
    md = deployment("qwen", "rollout-a", replicas=2)
    await apply_resource(stack.client, md)
    status = await stack.wait_status("rollout-a", "qwen", all_ready(2))
    clusters = sorted(r.cluster for r in status.replicas)
    # Spread first: one replica per cluster with a 20Gi+ GPU; the tainted H200 cluster is skipped.
    assert clusters == ["h100-east", "l4-dev"]
    for r in status.replicas:
        objects = stack.objects_of("rollout-a", r.cluster)
        kinds = sorted(o["kind"] for o in objects)
        assert {"Deployment", "InferencePool", "HTTPRoute"} <= set(kinds)
        assert all(o["metadata"]["namespace"] == "mf-rollout-a" for o in objects)
    scheduled = next(c for c in status.conditions if c.type == "ReplicasScheduled")
    assert scheduled.status == "True"


async def test_apply_twice_is_idempotent(stack: Stack) -> None:
    md = deployment("idem", "rollout-b")
    await apply_resource(stack.client, md)
    first = await stack.wait_status("rollout-b", "idem", all_ready(1))
    await apply_resource(stack.client, md)
    again = await stack.status("rollout-b", "idem")
    assert again.generation == first.generation
    assert [r.name for r in again.replicas] == [r.name for r in first.replicas]


async def test_scale_up_and_down_by_update_and_signal_releases_capacity(stack: Stack) -> None:
    ns = "scale"
    await apply_resource(stack.client, deployment("m", ns, replicas=1))
    await stack.wait_status(ns, "m", all_ready(1))
    handle = stack.client.get_workflow_handle(deployment_id(ns, "m"))

    await handle.execute_update(DeploymentWorkflow.scale, ScaleRequest(replicas=3))
    three = await stack.wait_status(ns, "m", all_ready(3))
    view = await stack.fleet_view()
    assert sum(1 for r in view.replicas if r.namespace == ns) == 3

    await handle.signal("scale", 1)
    one = await stack.wait_status(ns, "m", all_ready(1))
    removed = {r.name for r in three.replicas} - {r.name for r in one.replicas}
    assert len(removed) == 2
    view = await stack.fleet_view()
    assert {r.name for r in view.replicas if r.namespace == ns} == {r.name for r in one.replicas}
    for cluster in {r.cluster for r in three.replicas}:
        for obj in stack.objects_of(ns, cluster):
            replica = obj["metadata"]["labels"].get("modelfleet.dev/replica")
            assert replica not in removed, f"{obj['kind']} of removed replica left on {cluster}"


async def test_invalid_scale_is_rejected_and_changes_nothing(stack: Stack) -> None:
    ns = "badscale"
    await apply_resource(stack.client, deployment("m", ns))
    before = await stack.wait_status(ns, "m", all_ready(1))
    handle = stack.client.get_workflow_handle(deployment_id(ns, "m"))
    with pytest.raises(WorkflowUpdateFailedError) as info:
        await handle.execute_update(DeploymentWorkflow.scale, ScaleRequest(replicas=11))
    assert "between 0 and 10" in str(info.value.cause)
    after = await stack.status(ns, "m")
    assert after.generation == before.generation


async def test_invalid_apply_bad_cel_is_rejected_and_running_replicas_untouched(
    stack: Stack,
) -> None:
    ns = "badcel"
    good = deployment("m", ns)
    await apply_resource(stack.client, good)
    before = await stack.wait_status(ns, "m", all_ready(1))
    bad = good.model_copy(deep=True)
    device = bad.spec.template.spec.engines[0].members[0].node_selector
    assert device is not None
    device.devices[0].selectors[0].cel = 'device.driver == "x" &&'
    with pytest.raises(WorkflowUpdateFailedError) as info:
        await stack.client.execute_update_with_start_workflow(
            DeploymentWorkflow.apply,
            bad,
            start_workflow_operation=WithStartWorkflowOperation(
                DeploymentWorkflow.run,
                DeploymentInput(spec=bad),
                id=deployment_id(ns, "m"),
                task_queue=TASK_QUEUE,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            ),
        )
    assert "invalid CEL selector" in str(info.value.cause)
    after = await stack.status(ns, "m")
    assert after.generation == before.generation
    assert [(r.name, r.phase) for r in after.replicas] == [
        (r.name, r.phase) for r in before.replicas
    ]


async def test_image_change_rolls_replica_by_replica_surge_first(stack: Stack) -> None:
    ns = "roll"
    md = deployment("m", ns, replicas=2)
    await apply_resource(stack.client, md)
    old = await stack.wait_status(ns, "m", all_ready(2))
    changed = md.model_copy(deep=True)
    changed.spec.template.spec.engines[0].members[0].template.spec.containers[
        0
    ].image = "vllm/vllm-openai:v0.24.0"
    await apply_resource(stack.client, changed)
    peak = 0

    async def rolled() -> DeploymentStatus | None:
        nonlocal peak
        s = await stack.status(ns, "m")
        peak = max(peak, len(s.replicas))
        done = all_ready(2)(s) and s.updated == 2
        return s if done else None

    new = await wait_for(rolled, 120, "the rollout to finish")
    # Names come from (cluster, index), so a replacement may reuse a freed slot's name; what
    # must differ is the template every replica runs.
    assert {r.template_hash for r in new.replicas} != {r.template_hash for r in old.replicas}
    assert len({r.template_hash for r in new.replicas}) == 1
    # Surge: a third replica existed while the first old one was still serving, never a fourth.
    assert peak == 3
    for r in new.replicas:
        for obj in stack.objects_of(ns, r.cluster):
            if obj["kind"] == "Deployment" and "epp" not in obj["metadata"]["name"]:
                image = obj["spec"]["template"]["spec"]["containers"][0]["image"]
                assert image == "vllm/vllm-openai:v0.24.0"


async def test_delete_tears_down_everything_and_releases_capacity(stack: Stack) -> None:
    ns = "gone"
    await apply_resource(stack.client, deployment("m", ns, replicas=2))
    status = await stack.wait_status(ns, "m", all_ready(2))
    handle = stack.client.get_workflow_handle_for(DeploymentWorkflow.run, deployment_id(ns, "m"))
    await handle.execute_update(DeploymentWorkflow.delete)
    result = await handle.result()
    assert result.deleting
    for r in status.replicas:
        assert stack.objects_of(ns, r.cluster) == []
    view = await stack.fleet_view()
    assert not [r for r in view.replicas if r.namespace == ns]


async def test_cli_get_and_describe_show_clusters_pools_and_steps(stack: Stack) -> None:
    ns = "cli"
    await apply_resource(stack.client, deployment("m", ns))
    await stack.wait_status(ns, "m", all_ready(1))
    env = {
        **os.environ,
        "MODELFLEET_TEMPORAL_ADDRESS": stack.env.settings.address,
        "COLUMNS": "200",
    }
    cli = [sys.executable, "-m", "modelfleet.cli"]

    async def run(*args: str) -> str:
        # Asynchronously: the worker answering the CLI's queries runs on this event loop.
        proc = await asyncio.create_subprocess_exec(
            *cli, *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
        return out.decode()

    clusters = await run("get", "clusters")
    for expected in ("h200-west", "gpu-h200", "Ready"):
        assert expected in clusters
    deployments = await run("get", "deployments", "-n", ns, "-o", "wide")
    assert "1/1" in deployments
    assert "Ready" in deployments
    described = await run("describe", "deployment", "m", "-n", ns)
    assert "ReplicasScheduled=True" in described
    assert "serving" in described
    assert "Recent decisions" in described
    # The deployment's own log: what changed (its one replica placed), no per-resync no-ops.
    decisions = described.split("Recent decisions", 1)[1].strip().splitlines()
    assert len(decisions) == 1, decisions
    assert re.search(r"placed m-\S+ on \S+", decisions[0]), decisions
