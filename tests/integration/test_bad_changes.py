"""The nine bad changes of issue 16, each applied to a Ready two-replica deployment on the real
Temporal dev server and the simulated quickstart fleet, while a watcher checks continuously
that no serving replica is ever deleted (its status stays Ready, its Deployment object stays
on its cluster). Each change is rejected, blocked or rolled back with the reason in the
status, and restoring the good spec leaves every replica as it was."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
from integration_support import Stack, cancel_and_wait, cli, deployment
from temporalio.client import WorkflowUpdateFailedError

from modelfleet.api.deployments import ModelDeployment
from modelfleet.api.naming import LABEL_REPLICA, LABEL_SERVING
from modelfleet.cli.apply import apply_resource
from modelfleet.contracts.ids import deployment_id
from modelfleet.contracts.status import DeploymentStatus, ReplicaPhase
from modelfleet.deployment.workflow import DeploymentWorkflow, ScaleRequest
from modelfleet.sim.faults import FaultConfig

NS = "bad-changes"
GPU_20GI = ["h100-east", "l4-dev"]
GPU = 'device.capacity["gpu.nvidia.com"]'
ATTR = 'device.attributes["gpu.nvidia.com"]'


def good() -> ModelDeployment:
    md = deployment("m", NS, replicas=2)
    # Surge only: with no room to surge the change is blocked rather than replaced in place.
    md.spec.strategy.max_unavailable = 0
    md.spec.strategy.progress_deadline_seconds = 10
    return md


def with_selector(cel: str) -> ModelDeployment:
    md = good()
    selector = md.spec.template.spec.engines[0].members[0].node_selector
    assert selector is not None
    selector.devices[0].selectors[0].cel = cel
    return md


def with_image(image: str) -> ModelDeployment:
    md = good()
    md.spec.template.spec.engines[0].members[0].template.spec.containers[0].image = image
    return md


def with_cluster_selector() -> ModelDeployment:
    doc = good().to_wire()
    doc["spec"]["template"]["spec"]["clusterSelector"] = {"matchLabels": {"region": "mars"}}
    return type(good()).model_validate(doc)


def blocked(*words: str) -> Callable[[DeploymentStatus], bool]:
    def check(s: DeploymentStatus) -> bool:
        return any(c.type == "RolloutBlocked" for c in s.conditions) and all(
            w in s.summary for w in words
        )

    return check


class Watcher:
    """Polls the status and every serving replica's Deployment object until stopped and
    records any moment one of them is not there."""

    def __init__(self, stack: Stack, serving: dict[str, str]) -> None:
        self.stack, self.serving = stack, serving
        self.violations: list[str] = []
        self.looks = 0

    async def run(self) -> None:
        while True:
            status = await self.stack.status(NS, "m")
            phases = {r.name: r.phase for r in status.replicas}
            for name, cluster in self.serving.items():
                if phases.get(name) is not ReplicaPhase.READY:
                    self.violations.append(f"{name} is {phases.get(name)} in the status")
                kinds = {
                    o["kind"]
                    for o in self.stack.objects_of(NS, cluster)
                    if o["metadata"]["labels"].get(LABEL_REPLICA) == name
                }
                if "Deployment" not in kinds:
                    self.violations.append(f"{name}'s Deployment is gone from {cluster}")
            self.looks += 1
            await asyncio.sleep(0.1)


async def test_nine_bad_changes_never_remove_a_serving_replica(stack: Stack) -> None:
    try:
        await _nine_bad_changes(stack)
    finally:
        # The stack is shared by the modules after this one: free the two GPU pools it holds.
        handle = stack.client.get_workflow_handle(deployment_id(NS, "m"))
        await handle.execute_update(DeploymentWorkflow.delete)
        await asyncio.wait_for(handle.result(), 60)


async def _nine_bad_changes(stack: Stack) -> None:
    await apply_resource(stack.client, good())
    ready = await stack.wait_status(
        NS, "m", lambda s: s.ready == 2 and all(r.phase is ReplicaPhase.READY for r in s.replicas)
    )
    serving = {r.name: r.cluster for r in ready.replicas}
    handle = stack.client.get_workflow_handle(deployment_id(NS, "m"))
    watcher = Watcher(stack, serving)
    watch = asyncio.create_task(watcher.run())
    seen: dict[str, str] = {}
    try:
        # 1, 2: rejected up front.
        with pytest.raises(WorkflowUpdateFailedError) as info:
            await handle.execute_update(DeploymentWorkflow.apply, with_selector(f"{GPU}.memory >="))
        seen["cel syntax"] = str(info.value.cause)
        with pytest.raises(WorkflowUpdateFailedError) as info:
            await handle.execute_update(DeploymentWorkflow.scale, ScaleRequest(replicas=11))
        seen["replicas out of range"] = str(info.value.cause)

        # 3-8: blocked at the dry placement, in the scheduler's words.
        cases = {
            "string vs int": (with_selector(f"{ATTR}.productName > 5"), "fails to evaluate"),
            "int vs quantity": (with_selector(f"{GPU}.memory > 5"), "fails to evaluate"),
            "division by zero": (
                with_selector(f'{GPU}.memory.compareTo(quantity("1Gi")) / 0 >= 0'),
                "division by zero",
            ),
            "type error": (with_selector(f"{ATTR}.productName + 1 == 2"), "type error"),
            "no cluster matches": (with_cluster_selector(), "no cluster matches"),
            "no pool satisfies": (
                with_selector(f'{GPU}.memory.compareTo(quantity("4000Gi")) >= 0'),
                "no pool satisfies",
            ),
        }
        for name, (md, words) in cases.items():
            await handle.execute_update(DeploymentWorkflow.apply, md)
            status = await stack.wait_status(NS, "m", blocked("change blocked", words), 30)
            seen[name] = status.summary
            await _restore(stack, handle, serving)

        # 9: an image that never becomes ready: the surge replica fails, the change rolls back.
        for cluster in GPU_20GI:
            stack.fleet.set_faults(cluster, FaultConfig(never_ready=[f"mf-{NS}/*"]))
        try:
            await handle.execute_update(DeploymentWorkflow.apply, with_image("vllm/broken:1"))
            status = await stack.wait_status(
                NS, "m", blocked("rolled back to the last good template"), 90
            )
            seen["never ready"] = status.summary
        finally:
            for cluster in GPU_20GI:
                stack.fleet.set_faults(cluster, FaultConfig())
        await _restore(stack, handle, serving)
    finally:
        await cancel_and_wait(watch)
    assert watcher.violations == []
    assert watcher.looks > 20
    assert "invalid CEL selector" in seen["cel syntax"]
    assert "between 0 and 10" in seen["replicas out of range"]
    assert "ImagePullBackOff" in seen["never ready"]
    final = await stack.status(NS, "m")
    assert {r.name: r.cluster for r in final.replicas} == serving


CRASH_NS = "crash-loop"


def _pods_ready(stack: Stack, cluster: str, replica: str) -> tuple[bool, int]:
    """Whether every serving (engine) pod of ``replica`` on ``cluster`` is Ready (as the
    simulated kubelet has it), and the most restarts of one of their containers."""
    store = stack.fleet.store(cluster)
    pods = next(rt for rt in store.registry if rt.kind == "Pod")
    listed = store.list_objects(pods, label_selector=f"{LABEL_SERVING}={replica}").items
    ready = bool(listed) and all(
        any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (p.get("status") or {}).get("conditions") or []
        )
        for p in listed
    )
    restarts = max(
        (
            int(s.get("restartCount") or 0)
            for p in listed
            for s in (p.get("status") or {}).get("containerStatuses") or []
        ),
        default=0,
    )
    return ready, restarts


async def test_a_change_whose_pods_crash_loop_after_ready_rolls_back_by_itself(
    stack: Stack,
) -> None:
    """Issue 27: pods of the new template become Ready, then crash-loop 5 s later (inside the
    default minReadySeconds of 30 s). The roll pauses and rolls back by itself; the replicas
    whose engines pass health never number fewer than replicas - maxUnavailable."""
    md = deployment("c", CRASH_NS, replicas=2)
    md.spec.strategy.max_unavailable = 0
    md.spec.strategy.min_ready_seconds = 30  # the default, which the stack's helper shortens
    handle = stack.client.get_workflow_handle(deployment_id(CRASH_NS, "c"))
    await apply_resource(stack.client, md)
    try:
        ready = await stack.wait_status(
            CRASH_NS,
            "c",
            lambda s: s.ready == 2 and all(r.phase is ReplicaPhase.READY for r in s.replicas),
        )
        old_hash = ready.replicas[0].template_hash
        floor = md.spec.replicas - md.spec.strategy.max_unavailable
        samples: list[tuple[float, int, int]] = []  # (t, status ready, engines passing health)
        crashed_at: float | None = None
        rolled_back_at: float | None = None
        worst_restarts = 0
        for cluster in GPU_20GI:
            stack.fleet.set_faults(
                cluster,
                FaultConfig(crash_after_ready_seconds=5, crash_after_ready=[f"mf-{CRASH_NS}/*"]),
            )
        bad = md.model_copy(deep=True)
        bad.spec.template.spec.engines[0].members[0].template.spec.containers[
            0
        ].image = "vllm/crashes:1"
        start = time.monotonic()
        try:
            await handle.execute_update(DeploymentWorkflow.apply, bad)
            deadline = start + 150
            while time.monotonic() < deadline:
                status = await stack.status(CRASH_NS, "c")
                now = time.monotonic() - start
                healthy = 0
                for r in status.replicas:
                    pods_ready, restarts = _pods_ready(stack, r.cluster, r.name)
                    if r.template_hash != old_hash:
                        worst_restarts = max(worst_restarts, restarts)
                        if restarts and crashed_at is None:
                            crashed_at = now
                    if r.phase is ReplicaPhase.READY and pods_ready:
                        healthy += 1
                samples.append((now, status.ready, healthy))
                held = "rolled back to the last good template" in status.summary
                if held and rolled_back_at is None:
                    rolled_back_at = now
                if (
                    held
                    and len(status.replicas) == 2
                    and all(
                        r.template_hash == old_hash and r.phase is ReplicaPhase.READY
                        for r in status.replicas
                    )
                ):
                    break
                await asyncio.sleep(0.5)
        finally:
            for cluster in GPU_20GI:
                stack.fleet.set_faults(cluster, FaultConfig())
        final = await stack.status(CRASH_NS, "c")
        lowest_healthy = min(h for _, _, h in samples)
        lowest_ready = min(r for _, r, _ in samples)
        print(
            f"\ncrash loop after Ready: {len(samples)} samples over {samples[-1][0]:.0f} s; "
            f"engines passing health never below {lowest_healthy} (floor {floor}), status "
            f"ready never below {lowest_ready}; first restart seen at "
            f"{crashed_at if crashed_at is None else round(crashed_at, 1)} s, rolled back at "
            f"{rolled_back_at if rolled_back_at is None else round(rolled_back_at, 1)} s "
            f"(most restarts {worst_restarts})\nsummary: {final.summary}"
        )
        assert rolled_back_at is not None, final.summary
        assert crashed_at is not None
        assert lowest_healthy >= floor, samples
        assert {r.template_hash for r in final.replicas} == {old_hash}
        assert {r.name for r in final.replicas} == {r.name for r in ready.replicas}
        assert "crash-looping" in final.summary
        assert "s after Ready" in final.summary
        assert "CrashLoopBackOff" in final.summary
        assert any(c.reason == "RolledBack" for c in final.conditions)
        # What a user reads: ``rollout history`` and ``describe``.
        address = stack.client.service_client.config.target_host
        history = await cli(address, "rollout", "history", "deployment/c", "-n", CRASH_NS)
        print(history)
        assert "OUTCOME" in history
        assert "rolled back" in history
        assert "crash-looping" in history
        described = await cli(address, "describe", "deployment", "c", "-n", CRASH_NS)
        assert "crash-looping" in described
    finally:
        await handle.execute_update(DeploymentWorkflow.delete)
        await asyncio.wait_for(handle.result(), 60)


async def _restore(stack: Stack, handle: object, serving: dict[str, str]) -> None:
    await handle.execute_update(DeploymentWorkflow.apply, good())  # type: ignore[attr-defined]
    status = await stack.wait_status(
        NS,
        "m",
        lambda s: (
            not any(c.type == "RolloutBlocked" for c in s.conditions)
            and s.phase == "Ready"
            and {r.name: r.cluster for r in s.replicas} == serving
        ),
        60,
    )
    assert status.ready == 2
