"""The workload simulator and SimulatedFleet, driven the way production drives a cluster: rendered
replicas applied over real HTTP on 127.0.0.1 through the Kubernetes adapter (official client),
then observed with ``readiness()``. Waits are event-driven (``settle`` or store subscriptions)
and bounded."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from render_factories import H100, gang, gpus, replica, standalone

from modelfleet.adapters.kube_client import KubeCluster, Readiness, RetryableKubeError
from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.loading import load_paths
from modelfleet.api.naming import LABEL_POOL
from modelfleet.rendering.facts import ClusterFacts
from modelfleet.rendering.replica_manifests import RenderedReplica, render_replica
from modelfleet.sim.apiserver.store import ClusterStore
from modelfleet.sim.controllers.device_allocation import unschedulable_message
from modelfleet.sim.controllers.kubelet import STARTUP_ANNOTATION, StartupPolicy
from modelfleet.sim.loop_thread import LoopThread
from modelfleet.sim.simulated_fleet import SimulatedFleet

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
L4 = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("20Gi")) >= 0'
WAIT = 10.0


def _quickstart() -> tuple[list[InferenceClass], list[InferenceCluster]]:
    result = load_paths([str(QUICKSTART / "classes.yaml"), str(QUICKSTART / "clusters.yaml")])
    assert not result.errors
    classes = [r for r in result.resources if isinstance(r, InferenceClass)]
    clusters = [r for r in result.resources if isinstance(r, InferenceCluster)]
    return classes, clusters


def _start(tmp_path: Path, **kw: Any) -> LoopThread[SimulatedFleet]:
    classes, clusters = _quickstart()
    kw.setdefault("startup_seconds", 0)
    return SimulatedFleet.start_in_thread(classes, clusters, state_dir=tmp_path, **kw)


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[LoopThread[SimulatedFleet]]:
    with _start(tmp_path) as f:
        yield f


def _settle(fleet: LoopThread[SimulatedFleet], seconds: float, *, timers: bool = True) -> None:
    fleet.run(fleet.target.settle(seconds, timers=timers), timeout=seconds + 5.0)


def _kube(fleet: LoopThread[SimulatedFleet], cluster: str) -> KubeCluster:
    return KubeCluster(fleet.target.kubeconfig(cluster), request_timeout=5.0)


def _l4_replica(copies: int = 1, name: str = "qwen-5ab63", **member: Any) -> RenderedReplica:
    member.setdefault("requests", [gpus(1, "gpu", L4)])
    rep = replica(
        standalone(pool="gpu-l4", copies=copies, **member),
        cluster="l4-dev",
        name=name,
        deployment=name.rsplit("-", 1)[0],
    )
    return render_replica(rep, ClusterFacts())


def _apply(kube: KubeCluster, rendered: RenderedReplica) -> None:
    for manifest in rendered.manifests():
        kube.apply(manifest)


def _workload_readiness(kube: KubeCluster, rendered: RenderedReplica) -> Readiness:
    """Readiness of the engine workload (the first rule; the picker is the last)."""
    return kube.readiness(rendered.readiness[0])


def _wait_until(
    fleet: LoopThread[SimulatedFleet],
    cluster: str,
    check: Callable[[ClusterStore], Awaitable[bool]],
    timeout: float = WAIT,
) -> None:
    """Block until ``check(store)`` holds, re-checking on every change in the cluster."""
    store = fleet.target.store(cluster)

    async def wait() -> None:
        sub = store.subscribe()
        try:
            async with asyncio.timeout(timeout):
                while not await check(store):
                    await sub.get()
        finally:
            sub.close()

    fleet.run(wait(), timeout=timeout + 5)


# ------------------------------------------------------------------------- infrastructure


def test_nodes_slices_device_classes_and_gateway(fleet: LoopThread[SimulatedFleet]) -> None:
    assert fleet.target.cluster_names == ["l4-dev", "h100-east", "h200-west"]
    assert all(p.is_file() for p in fleet.target.kubeconfigs.values())
    assert fleet.target.kubeconfig_dir == fleet.target.kubeconfig("l4-dev").parent
    with _kube(fleet, "h200-west") as kube:
        nodes = kube.nodes()
        pools = [n.pool for n in nodes]
        assert pools.count("gpu-h200") == 4
        assert pools.count(None) == 1  # the system node
        gpu_node = kube.get("v1", "Node", "h200-west-gpu-h200-0")
        assert gpu_node is not None
        assert gpu_node["metadata"]["labels"][LABEL_POOL] == "gpu-h200"
        assert gpu_node["metadata"]["labels"]["nvidia.com/gpu.present"] == "true"
        assert gpu_node["spec"]["taints"] == [
            {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
        ]
        # Fleet-level taints steer placement between clusters; they are not node taints.
        assert all(t["key"] != "frontier-only" for t in gpu_node["spec"]["taints"])
        slices = kube.resource_slices()
        # The class's InfiniBand NICs are Synthetic: no driver, so nothing is published.
        assert {s["spec"]["driver"] for s in slices} == {"gpu.nvidia.com"}
        assert len(slices) == 4
        device = slices[0]["spec"]["devices"][0]
        assert device["name"] == "gpu-0"
        assert device["attributes"]["productName"] == {"string": "NVIDIA H200"}
        assert device["attributes"]["type"] == {"string": "gpu"}
        assert device["attributes"]["cudaComputeCapability"] == {"version": "9.0.0"}
        assert device["capacity"]["memory"] == {"value": "140Gi"}
        assert len(slices[0]["spec"]["devices"]) == 8
        assert kube.get("resource.k8s.io/v1", "DeviceClass", "gpu.nvidia.com") is not None
        gateway = kube.get(
            "gateway.networking.k8s.io/v1", "Gateway", "inference-gateway", "modelfleet-system"
        )
        assert gateway is not None
        # The simulated gateway really listens: loopback, on the port its listener names.
        assert gateway["status"]["addresses"][0]["value"] == "127.0.0.1"
        port = gateway["spec"]["listeners"][0]["port"]
        assert fleet.target.clusters["h200-west"].gateway_address == f"127.0.0.1:{port}"


# ------------------------------------------------------------------------- rollouts


def test_rendered_replica_becomes_ready_after_its_startup_delay(tmp_path: Path) -> None:
    # Real time: the apply, the settle and the reads before "not yet ready" must fit in it on a
    # busy machine too (0.4 s did not, once, in a full run: the replica was already Ready).
    delay = 3.0
    with _start(tmp_path, startup_seconds=delay) as fleet, _kube(fleet, "l4-dev") as kube:
        rendered = _l4_replica()
        started = time.monotonic()
        _apply(kube, rendered)
        _settle(fleet, WAIT, timers=False)
        before = _workload_readiness(kube, rendered)
        assert not before.ready
        assert "ContainerCreating" in before.reason
        _settle(fleet, WAIT)
        assert time.monotonic() - started >= delay
        after = [kube.readiness(rule) for rule in rendered.readiness]
        assert all(r.ready for r in after), after
        assert "is Available" in after[0].reason
        pods = kube.list("v1", "Pod", rendered.namespace)
        engine = [p for p in pods if p["spec"].get("resourceClaims")]
        assert len(engine) == 1
        assert engine[0]["spec"]["nodeName"].startswith("l4-dev-gpu-l4-")
        claims = kube.list("resource.k8s.io/v1", "ResourceClaim", rendered.namespace)
        results = claims[0]["status"]["allocation"]["devices"]["results"]
        assert results == [
            {
                "request": "gpu",
                "driver": "gpu.nvidia.com",
                "pool": engine[0]["spec"]["nodeName"],
                "device": "gpu-0",
            }
        ]


def test_replica_needing_more_nodes_than_the_pool_has_stays_pending(
    fleet: LoopThread[SimulatedFleet],
) -> None:
    with _kube(fleet, "l4-dev") as kube:
        rendered = _l4_replica(copies=3)
        _apply(kube, rendered)
        _settle(fleet, WAIT)
        verdict = _workload_readiness(kube, rendered)
        assert not verdict.ready
        assert "2/3 pods ready" in verdict.reason
        assert (
            "Pending, Unschedulable: 0/3 nodes are available: 2 Insufficient gpu.nvidia.com, "
            "1 node(s) didn't match Pod's node affinity/selector."
        ) in verdict.reason


def test_selector_no_device_satisfies_cannot_allocate(fleet: LoopThread[SimulatedFleet]) -> None:
    with _kube(fleet, "l4-dev") as kube:
        rendered = _l4_replica(requests=[gpus(1, "gpu", H100)])
        _apply(kube, rendered)
        _settle(fleet, WAIT)
        verdict = _workload_readiness(kube, rendered)
        assert not verdict.ready
        assert "2 cannot allocate all claims" in verdict.reason


def test_deleting_a_workload_frees_its_devices_for_pending_pods(
    fleet: LoopThread[SimulatedFleet],
) -> None:
    with _kube(fleet, "l4-dev") as kube:
        first = _l4_replica(copies=2, name="alpha-00001")
        second = _l4_replica(copies=1, name="beta-00002")
        _apply(kube, first)
        _settle(fleet, WAIT)
        _apply(kube, second)
        _settle(fleet, WAIT)
        assert "Insufficient gpu.nvidia.com" in _workload_readiness(kube, second).reason
        workload = first.readiness[0]
        assert kube.delete(workload.api_version, workload.kind, workload.name, workload.namespace)
        _settle(fleet, WAIT)
        assert _workload_readiness(kube, second).ready
        left = kube.list("v1", "Pod", first.namespace)
        assert not [p for p in left if p["metadata"]["name"].startswith(workload.name)]


def test_template_change_rolls_the_pods(fleet: LoopThread[SimulatedFleet]) -> None:
    with _kube(fleet, "l4-dev") as kube:
        _apply(kube, _l4_replica(args=["--model=a"]))
        _settle(fleet, WAIT)
        changed = _l4_replica(args=["--model=b"])
        _apply(kube, changed)
        _settle(fleet, WAIT)
        assert _workload_readiness(kube, changed).ready
        rule = changed.readiness[0]
        pods = [
            p
            for p in kube.list("v1", "Pod", rule.namespace)
            if p["metadata"]["name"].startswith(rule.name)
        ]
        assert len(pods) == 1
        assert pods[0]["spec"]["containers"][0]["args"] == ["--model=b"]


def test_scale_down_frees_a_device_for_the_next_replica(fleet: LoopThread[SimulatedFleet]) -> None:
    with _kube(fleet, "l4-dev") as kube:
        _apply(kube, _l4_replica(copies=2, name="alpha-00001"))
        _settle(fleet, WAIT)
        waiting = _l4_replica(name="beta-00002")
        _apply(kube, waiting)
        _settle(fleet, WAIT)
        assert not _workload_readiness(kube, waiting).ready
        smaller = _l4_replica(copies=1, name="alpha-00001")
        _apply(kube, smaller)
        _settle(fleet, WAIT)
        assert _workload_readiness(kube, smaller).ready
        assert _workload_readiness(kube, waiting).ready
        rule = smaller.readiness[0]
        deployment = kube.get(rule.api_version, rule.kind, rule.name, rule.namespace)
        assert deployment is not None
        assert deployment["status"]["replicas"] == 1


def test_gang_runs_as_a_leader_worker_set_across_nodes(fleet: LoopThread[SimulatedFleet]) -> None:
    pool = {"pool": "gpu-h100"}
    rep = replica(gang("llama", nodes=1, leader=pool, worker=pool), cluster="h100-east")
    rendered = render_replica(rep, ClusterFacts())
    with _kube(fleet, "h100-east") as kube:
        _apply(kube, rendered)
        _settle(fleet, WAIT)
        assert all(kube.readiness(r).ready for r in rendered.readiness)
        rule = rendered.readiness[0]
        assert rule.kind == "LeaderWorkerSet"
        pods = kube.list(
            "v1", "Pod", rule.namespace, labels={"leaderworkerset.sigs.k8s.io/name": rule.name}
        )
        by_index = {
            p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"]: p for p in pods
        }
        assert sorted(by_index) == ["0", "1"]
        assert by_index["0"]["metadata"]["name"] == f"{rule.name}-0"
        assert by_index["1"]["metadata"]["name"] == f"{rule.name}-0-1"
        assert {p["spec"]["nodeName"] for p in pods} == {
            "h100-east-gpu-h100-0",
            "h100-east-gpu-h100-1",
        }
        env = {e["name"]: e.get("value") for e in by_index["1"]["spec"]["containers"][0]["env"]}
        assert env["LWS_LEADER_ADDRESS"] == f"{rule.name}-0.{rule.name}.{rule.namespace}"
        assert env["LWS_WORKER_INDEX"] == "1"
        lws = kube.get(rule.api_version, rule.kind, rule.name, rule.namespace)
        assert lws is not None
        assert lws["status"]["readyReplicas"] == 1
        assert kube.get("v1", "Service", rule.name, rule.namespace) is not None

        bigger = render_replica(
            replica(
                gang("llama", nodes=1, leader=pool, worker=pool, copies=2), cluster="h100-east"
            ),
            ClusterFacts(),
        )
        _apply(kube, bigger)
        _settle(fleet, WAIT)
        verdict = kube.readiness(bigger.readiness[0])
        assert not verdict.ready
        assert "2 Insufficient gpu.nvidia.com" in verdict.reason


def test_inference_pool_and_route_are_accepted(fleet: LoopThread[SimulatedFleet]) -> None:
    with _kube(fleet, "l4-dev") as kube:
        rendered = _l4_replica()
        _apply(kube, rendered)
        _settle(fleet, WAIT)
        pools = kube.list("inference.networking.k8s.io/v1", "InferencePool", rendered.namespace)
        parent = pools[0]["status"]["parents"][0]
        assert parent["parentRef"]["name"] == "inference-gateway"
        assert {c["type"]: c["status"] for c in parent["conditions"]} == {
            "Accepted": "True",
            "ResolvedRefs": "True",
        }
        routes = kube.list("gateway.networking.k8s.io/v1", "HTTPRoute", rendered.namespace)
        accepted = routes[0]["status"]["parents"][0]["conditions"][0]
        assert (accepted["type"], accepted["status"]) == ("Accepted", "True")
        # As Gateway API controllers report it: the route generation the condition describes
        # (a replica's teardown waits until the gateway accepted the route without it).
        assert accepted["observedGeneration"] == routes[0]["metadata"]["generation"]


# ------------------------------------------------------------------------- workload faults


def test_never_ready_workload_is_stuck_pulling_its_image(fleet: LoopThread[SimulatedFleet]) -> None:
    fleet.call(fleet.target.update_faults, "l4-dev", {"never_ready": ["qwen-*-main-*"]})
    with _kube(fleet, "l4-dev") as kube:
        rendered = _l4_replica()
        _apply(kube, rendered)
        _settle(fleet, WAIT)
        verdict = _workload_readiness(kube, rendered)
        assert not verdict.ready
        assert "container engine ImagePullBackOff: Back-off pulling image" in verdict.reason
        # Only the matching workload is affected: the endpoint picker still comes up.
        assert kube.readiness(rendered.readiness[-1]).ready
        rule = rendered.readiness[0]
        pods = [
            p
            for p in kube.list("v1", "Pod", rule.namespace)
            if p["metadata"]["name"].startswith(rule.name)
        ]
        assert pods[0]["spec"]["nodeName"]  # bound: it is the image, not capacity


def test_an_image_that_cannot_be_pulled_alternates_err_image_pull_and_back_off(
    tmp_path: Path,
) -> None:
    # The image back-off is the crash-loop one (2 s here), doubling per failed pull.
    policy = StartupPolicy(default_seconds=0, crash_backoff_seconds=2.0)
    image = "vllm/vllm-openai:v0.23.0-typo"
    faults = {
        "l4-dev": {
            "image_faults": {
                image: {"pull_error": "not-found"},
                "*:v0.23.0-busy": {"pull_error": "rate-limited"},
            }
        }
    }
    with _start(tmp_path, startup=policy, faults=faults) as fleet, _kube(fleet, "l4-dev") as kube:
        rendered = _l4_replica(image=image)
        rule = rendered.readiness[0]
        _apply(kube, rendered)
        seen: list[tuple[str, str]] = []

        def waiting_in(reason: str, after: int) -> Callable[[ClusterStore], Awaitable[bool]]:
            async def check(store: ClusterStore) -> bool:
                for p in await store.list("v1", "Pod", namespace=rule.namespace):
                    if not p["metadata"]["name"].startswith(rule.name):
                        continue
                    for s in p.get("status", {}).get("containerStatuses", []):
                        w = s.get("state", {}).get("waiting") or {}
                        if w and (not seen or seen[-1] != (w.get("reason"), w.get("message"))):
                            seen.append((w.get("reason", ""), w.get("message", "")))
                return sum(r == reason for r, _ in seen) >= after

            return check

        _wait_until(fleet, "l4-dev", waiting_in("ErrImagePull", 2))
        reasons = [r for r, _ in seen if r != "ContainerCreating"]
        assert reasons[:3] == ["ErrImagePull", "ImagePullBackOff", "ErrImagePull"], seen
        ref = "docker.io/vllm/vllm-openai:v0.23.0-typo"
        error = (
            f'rpc error: code = NotFound desc = failed to pull and unpack image "{ref}": '
            f'failed to resolve reference "{ref}": {ref}: not found'
        )
        assert ("ErrImagePull", error) in seen
        assert (
            "ImagePullBackOff",
            f'Back-off pulling image "{image}": ErrImagePull: {error}',
        ) in seen
        verdict = _workload_readiness(kube, rendered)
        assert not verdict.ready
        assert verdict.pull_failure is not None
        assert error in verdict.pull_failure.error
        events = kube.list("v1", "Event", rule.namespace)
        failed = [
            e for e in events if e.get("message") == f'Failed to pull image "{image}": {error}'
        ]
        assert failed, [e.get("message") for e in events]
        # Pushed at last (the fault cleared): the next pull succeeds and the engine starts.
        fleet.call(fleet.target.update_faults, "l4-dev", {"image_faults": {image: None}})

        async def started(store: ClusterStore) -> bool:
            return any(
                p["metadata"]["name"].startswith(rule.name)
                and any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in p.get("status", {}).get("conditions", [])
                )
                for p in await store.list("v1", "Pod", namespace=rule.namespace)
            )

        _wait_until(fleet, "l4-dev", started, timeout=20)
        assert "Successfully pulled image" in str(
            [e.get("message") for e in kube.list("v1", "Event", rule.namespace)]
        )
        fleet.call(
            fleet.target.update_faults,
            "l4-dev",
            {"image_faults": {"*:v0.23.0-busy": {"pull_error": "rate-limited"}}},
        )
        # A rate limit heals by itself: the same cycle, no permanent failure read from it.
        busy = _l4_replica(name="busy-5ab63", image="vllm/vllm-openai:v0.23.0-busy")
        _apply(kube, busy)
        seen.clear()
        rule = busy.readiness[0]
        _wait_until(fleet, "l4-dev", waiting_in("ImagePullBackOff", 1))
        later = _workload_readiness(kube, busy)
        assert "429 Too Many Requests" in later.reason
        assert later.pull_failure is None


def test_crash_after_ready_loses_availability_and_keeps_restarting(tmp_path: Path) -> None:
    # The back-off is what the first look below sees; it must outlast that look on a loaded
    # machine (0.05 s did not), while the second crash still comes within WAIT.
    policy = StartupPolicy(default_seconds=0, crash_backoff_seconds=2.0)
    faults = {"l4-dev": {"crash_after_ready_seconds": 0.1, "crash_after_ready": ["*-main-*"]}}
    with _start(tmp_path, startup=policy, faults=faults) as fleet, _kube(fleet, "l4-dev") as kube:
        rendered = _l4_replica()
        _apply(kube, rendered)
        _settle(fleet, WAIT)
        verdict = _workload_readiness(kube, rendered)
        assert not verdict.ready
        assert "CrashLoopBackOff (restarted 1 time)" in verdict.reason
        assert "last exit Error (exit code 1)" in verdict.reason
        rule = rendered.readiness[0]
        deployment = kube.get(rule.api_version, rule.kind, rule.name, rule.namespace)
        assert deployment is not None
        available = {c["type"]: c["status"] for c in deployment["status"]["conditions"]}
        assert available["Available"] == "False"

        async def restarted_twice(store: ClusterStore) -> bool:
            pods = await store.list("v1", "Pod", namespace=rule.namespace)
            return any(
                s.get("restartCount", 0) >= 2
                for p in pods
                for s in p.get("status", {}).get("containerStatuses", [])
            )

        _wait_until(fleet, "l4-dev", restarted_twice)
        counted = re.search(r"restarted (\d+) times", _workload_readiness(kube, rendered).reason)
        assert counted is not None
        assert int(counted.group(1)) >= 2


# ------------------------------------------------------------------------- async use


async def test_async_fleet_serves_the_adapter_from_a_thread(tmp_path: Path) -> None:
    classes, clusters = _quickstart()
    async with SimulatedFleet.start(
        classes, clusters[:1], state_dir=tmp_path, startup_seconds=0
    ) as fleet:
        assert fleet.cluster_names == ["l4-dev"]
        rendered = _l4_replica()

        def rollout() -> KubeCluster:
            kube = KubeCluster(fleet.kubeconfig("l4-dev"))
            _apply(kube, rendered)
            return kube

        # The adapter is synchronous; the emulator runs on this loop, so it must not block it.
        kube = await asyncio.to_thread(rollout)
        await fleet.settle(WAIT)
        verdict = await asyncio.to_thread(_workload_readiness, kube, rendered)
        assert verdict.ready, verdict.reason
    # Leaving the block stopped the emulator it started: nothing answers any more.
    with pytest.raises(RetryableKubeError) as err:
        await asyncio.to_thread(kube.server_version)
    assert err.value.reason == "ConnectionError"
    kube.close()


# ------------------------------------------------------------------------- pure pieces


def test_startup_policy_precedence() -> None:
    policy = StartupPolicy(per_workload=(("special-*", 7.0),), fallback_seconds=4.0)
    images = ["vllm/vllm-openai:v0.11.0"]
    common = {"namespace": "ns", "images": images}
    assert policy.seconds_for(workload="w", annotations=[], **common) == 30.0
    assert policy.seconds_for(workload="w", annotations=[], namespace="ns", images=["x"]) == 4.0
    assert policy.seconds_for(workload="special-1", annotations=[], **common) == 7.0
    notes = [{STARTUP_ANNOTATION: "1.5"}]
    assert policy.seconds_for(workload="special-1", annotations=notes, **common) == 1.5
    everything_zero = StartupPolicy(default_seconds=0)
    assert everything_zero.seconds_for(workload="w", annotations=[], **common) == 0


def test_unschedulable_message_reads_like_kube_scheduler() -> None:
    reasons = {
        "Insufficient gpu.nvidia.com": 2,
        "node(s) didn't match Pod's node affinity/selector": 2,
    }
    assert unschedulable_message(4, reasons) == (
        "0/4 nodes are available: 2 Insufficient gpu.nvidia.com, "
        "2 node(s) didn't match Pod's node affinity/selector."
    )
