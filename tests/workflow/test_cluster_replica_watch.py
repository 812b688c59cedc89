"""The per-cluster replica watch on the time-skipping server: a real InferenceCluster workflow
(activity doubles for its probe and the Fleet) watches real ModelReplica workflows (doubles for
the Kubernetes calls over one in-memory object store, scanned with the real
``adapters.kube_scan`` over the kinds the scan lists). A Ready replica runs nothing while idle
for hours; a scan that finds one replica unhealthy or missing an object tells that replica only,
which repairs; a replica whose workflow is gone is dropped without harming the cluster."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from test_cluster_orphan_sweep import SPEC
from test_cluster_orphan_sweep import FakeCluster as FakeProbe
from test_replica_saga import REPLICA, ProgressSink

from modelfleet.adapters.kube_scan import changed_scans
from modelfleet.api.deployments import ModelReplica
from modelfleet.cluster.state import ClusterInput
from modelfleet.cluster.workflow import ClusterWorkflow
from modelfleet.contracts.activity_names import (
    KUBE_APPLY,
    KUBE_CHECK_READY,
    KUBE_DELETE,
    KUBE_DRIFT,
    KUBE_POLL_READY,
    KUBE_SCAN_REPLICAS,
)
from modelfleet.contracts.ids import cluster_id, replica_id
from modelfleet.contracts.kube_payloads import (
    ApplyRequest,
    ApplyResult,
    DeleteRequest,
    DeleteResult,
    DriftFound,
    DriftRequest,
    DriftResult,
    ObjectRef,
    ReadyResult,
    WaitReadyRequest,
)
from modelfleet.contracts.serving_payloads import (
    ENDPOINTS_PUBLISH_REPLICA,
    ENDPOINTS_WITHDRAW,
    SERVING_CHECK_MODELS,
    SERVING_ROUTES_CARRYING,
    EndpointKey,
    ModelCheck,
    ModelCheckRequest,
    ReplicaEndpointRequest,
    RoutesCarrying,
    RoutesRequest,
)
from modelfleet.contracts.status import ClusterStatus, ReplicaPhase
from modelfleet.contracts.watch_payloads import ScanRequest, ScanResult
from modelfleet.contracts.workflow_inputs import ReplicaResult
from modelfleet.replica.state import ReplicaInput
from modelfleet.replica.workflow import ReplicaWorkflow

PROBE_SECONDS = 120


def _key(ref: ObjectRef) -> tuple[str, str, str, str]:
    return (ref.api_version, ref.kind, ref.namespace or "", ref.name)


@dataclass
class Kube:
    """The cluster's objects, as the replicas' activities write them and the scan lists them."""

    store: dict[tuple[str, str, str, str], dict[str, Any]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    scans: list[list[str]] = field(default_factory=list)
    # Objects edited outside modelfleet in a way the scan cannot see (no generation moved);
    # only the field-by-field comparison finds them.
    edited: set[tuple[str, str, str, str]] = field(default_factory=set)
    # The first apply of this kind is edited so right after it (before any scan).
    edit_after_apply: str | None = None

    @activity.defn(name=KUBE_APPLY)
    async def apply(self, request: ApplyRequest) -> ApplyResult:
        refs = [ObjectRef.of(m) for m in request.manifests]
        for ref, manifest in zip(refs, request.manifests, strict=True):
            if ref.kind == "Namespace":
                continue
            obj: dict[str, Any] = {**manifest, "metadata": {**manifest["metadata"]}}
            obj["metadata"]["generation"] = 1
            if ref.kind == "Deployment":
                obj["status"] = {
                    "observedGeneration": 1,
                    "conditions": [{"type": "Available", "status": "True"}],
                }
            self.store[_key(ref)] = obj
            self.edited.discard(_key(ref))
            if ref.kind == self.edit_after_apply:
                self.edited.add(_key(ref))
                self.edit_after_apply = None
        self.calls.append("apply:" + ",".join(r.kind for r in refs))
        return ApplyResult(applied=refs)

    @activity.defn(name=KUBE_POLL_READY)
    async def poll_ready(self, request: WaitReadyRequest) -> ReadyResult:
        return ReadyResult(ready=True, reason="all ready")

    @activity.defn(name=KUBE_CHECK_READY)
    async def check_ready(self, request: WaitReadyRequest) -> ReadyResult:
        self.calls.append("check")
        return ReadyResult(ready=True, reason="all ready")

    @activity.defn(name=KUBE_DRIFT)
    async def drift(self, request: DriftRequest) -> DriftResult:
        self.calls.append("drift")
        found = []
        for index, manifest in enumerate(request.manifests):
            ref = ObjectRef.of(manifest)
            if ref.kind != "Namespace" and _key(ref) not in self.store:
                reason = f"{ref} was deleted outside modelfleet: re-created"
                found.append(DriftFound(index=index, ref=ref, kind="missing", reason=reason))
            elif _key(ref) in self.edited:
                reason = f"{ref} was changed outside modelfleet (metadata.labels): re-applied"
                found.append(DriftFound(index=index, ref=ref, kind="changed", reason=reason))
        return DriftResult(drifted=found)

    @activity.defn(name=KUBE_DELETE)
    async def delete(self, request: DeleteRequest) -> DeleteResult:
        for ref in request.objects:
            self.store.pop(_key(ref), None)
        self.calls.append("delete")
        return DeleteResult(deleted=len(request.objects), absent=0)

    @activity.defn(name=KUBE_SCAN_REPLICAS)
    async def scan(self, request: ScanRequest) -> ScanResult:
        self.scans.append(sorted(r.key for r in request.replicas))
        kinds = {tuple(k) for k in request.kinds}
        listed = [(k[0], k[1], obj) for k, obj in self.store.items() if (k[0], k[1]) in kinds]
        return ScanResult(changed=changed_scans(request.replicas, listed))

    @activity.defn(name=ENDPOINTS_PUBLISH_REPLICA)
    async def publish(self, request: ReplicaEndpointRequest) -> None:
        self.calls.append("publish")

    @activity.defn(name=ENDPOINTS_WITHDRAW)
    async def withdraw(self, key: EndpointKey) -> bool:
        self.calls.append("withdraw")
        return True

    @activity.defn(name=SERVING_CHECK_MODELS)
    async def check_models(self, request: ModelCheckRequest) -> ModelCheck:
        """No service expects anything of it."""
        return ModelCheck()

    @activity.defn(name=SERVING_ROUTES_CARRYING)
    async def routes_carrying(self, request: RoutesRequest) -> RoutesCarrying:
        """No front-door route carries it."""
        return RoutesCarrying()

    def activities(self) -> list[Callable[..., object]]:
        return [
            self.apply,
            self.poll_ready,
            self.check_ready,
            self.drift,
            self.delete,
            self.scan,
            self.publish,
            self.withdraw,
            self.check_models,
            self.routes_carrying,
        ]

    def engine(self, replica: str) -> tuple[str, str, str, str]:
        """The key of a replica's engine Deployment."""
        (key,) = [
            k for k in self.store if k[1] == "Deployment" and k[3].startswith(f"{replica}-vllm")
        ]
        return key


def _replica(name: str) -> ModelReplica:
    return REPLICA.model_copy(
        update={"metadata": REPLICA.metadata.model_copy(update={"name": name})}
    )


Handle = WorkflowHandle[Any, ReplicaResult]


@dataclass
class Fleet:
    env: WorkflowEnvironment
    kube: Kube
    probe: FakeProbe
    cluster: WorkflowHandle[ClusterWorkflow, ClusterStatus]
    queue: str
    sink: str

    async def start(self, name: str) -> Handle:
        arg = ReplicaInput(
            replica=_replica(name), parent_id=self.sink, progress_deadline_seconds=3600
        )
        handle: Handle = await self.env.client.start_workflow(
            ReplicaWorkflow.run,
            arg,
            id=replica_id(REPLICA.namespace, name),
            task_queue=self.queue,
            result_type=ReplicaResult,
        )
        await self.until(handle, ReplicaPhase.READY)
        return handle

    async def until(self, handle: Handle, phase: ReplicaPhase) -> None:
        for _ in range(60):
            progress = await handle.query(ReplicaWorkflow.progress)
            if progress.phase is phase:
                return
            await self.env.sleep(timedelta(seconds=PROBE_SECONDS / 2))
        raise AssertionError(f"{handle.id} never {phase.value}: {progress}")

    async def scans_after(self, count: int) -> None:
        """Let time pass until the cluster has scanned ``count`` more times."""
        want = len(self.kube.scans) + count
        for _ in range(60):
            if len(self.kube.scans) >= want:
                return
            await self.env.sleep(timedelta(seconds=PROBE_SECONDS / 2))
        raise AssertionError("the cluster stopped scanning")


@asynccontextmanager
async def fleet(env: WorkflowEnvironment, *, up: bool = True) -> AsyncIterator[Fleet]:
    queue = f"tq-{uuid.uuid4()}"
    kube, probe = Kube(), FakeProbe(up=up)
    async with Worker(
        env.client,
        task_queue=queue,
        workflows=[ClusterWorkflow, ReplicaWorkflow, ProgressSink],
        activities=[*probe.activities(), *kube.activities()],
    ):
        sink = f"sink-{uuid.uuid4()}"
        await env.client.start_workflow(ProgressSink.run, id=sink, task_queue=queue)
        cluster = await env.client.start_workflow(
            ClusterWorkflow.run,
            ClusterInput.of(SPEC, probe_interval_seconds=PROBE_SECONDS),
            id=cluster_id(REPLICA.spec.cluster_name),
            task_queue=queue,
            result_type=ClusterStatus,
        )
        yield Fleet(env, kube, probe, cluster, queue, sink)


async def _events(handle: WorkflowHandle[Any, Any]) -> list[EventType.ValueType]:
    return [e.event_type async for e in handle.fetch_history_events()]


async def test_an_idle_ready_replica_runs_nothing_for_hours_while_its_cluster_scans(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    async with fleet(time_skipping_env) as f:
        replica = await f.start("qwen-idle1")
        await f.scans_after(2)  # registered, acknowledged and baselined
        # One comparison when the cluster acknowledged (the baseline it took is checked
        # against what was applied), and none after.
        assert f.kube.calls.count("drift") == 1
        before = await _events(replica)
        scans = len(f.kube.scans)
        await time_skipping_env.sleep(timedelta(hours=3))
        # Not one event in three hours: no timer, no activity, no signal.
        assert await _events(replica) == before
        assert "check" not in f.kube.calls
        assert f.kube.calls.count("drift") == 1
        # The cluster scanned on every probe meanwhile, the replica among those watched.
        assert len(f.kube.scans) - scans >= 3 * 3600 // PROBE_SECONDS - 2
        assert f.kube.scans[-1] == ["ml/qwen-idle1"]
        await replica.signal(ReplicaWorkflow.teardown)
        assert (await replica.result()).phase is ReplicaPhase.TERMINATED
        # Unregistered: with nobody to watch, the cluster's probes scan nothing at all.
        scans, probes = len(f.kube.scans), f.probe.probes
        await time_skipping_env.sleep(timedelta(seconds=PROBE_SECONDS * 4))
        assert f.probe.probes >= probes + 3
        assert len(f.kube.scans) == scans


async def test_an_edit_made_before_the_clusters_first_scan_is_found_and_put_back(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    # The edit is in the baseline the first scan takes, so no scan would ever report it: the
    # comparison the replica makes when the cluster acknowledges it finds it.
    async with fleet(time_skipping_env) as f:
        f.kube.edit_after_apply = "Deployment"
        replica = await f.start("qwen-edit1")
        assert f.kube.edited == {f.kube.engine("qwen-edit1")}
        await f.scans_after(2)
        assert f.kube.edited == set()
        drift = f.kube.calls.index("drift")
        assert f.kube.calls[drift + 1] == "apply:Deployment"
        assert (await replica.query(ReplicaWorkflow.progress)).phase is ReplicaPhase.READY
        await replica.signal(ReplicaWorkflow.teardown)
        assert (await replica.result()).phase is ReplicaPhase.TERMINATED


async def test_a_cluster_workflow_started_afresh_asks_its_replicas_to_register_again(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    # A watched, healthy replica has no timer of its own: without being asked, it would never
    # learn that the cluster's new run does not know it, and would go unwatched for good.
    env = time_skipping_env
    async with fleet(env) as f:
        replica = await f.start("qwen-again")
        await f.scans_after(2)
        assert f.kube.scans[-1] == ["ml/qwen-again"]
        f.probe.ledger = {"ml/qwen-again", "ml/long-gone"}  # what the Fleet has placed here
        # The first run asked too, once, when it was first Ready (nothing was placed then).
        assert f.probe.calls == ["rewatch"]
        await f.cluster.terminate("terminated by hand")
        await env.client.start_workflow(
            ClusterWorkflow.run,
            ClusterInput.of(SPEC, probe_interval_seconds=PROBE_SECONDS),
            id=cluster_id(REPLICA.spec.cluster_name),
            task_queue=f.queue,
        )
        await f.scans_after(2)
        assert f.kube.scans[-1] == ["ml/qwen-again"]
        assert f.probe.calls == ["rewatch", "rewatch"]  # once a run, not at every probe
        # Watched again for real: a Deployment deleted now is found and put back.
        del f.kube.store[f.kube.engine("qwen-again")]
        await f.scans_after(2)
        assert f.kube.engine("qwen-again") in f.kube.store
        assert (await replica.query(ReplicaWorkflow.progress)).phase is ReplicaPhase.READY
        await replica.signal(ReplicaWorkflow.teardown)
        assert (await replica.result()).phase is ReplicaPhase.TERMINATED


async def test_a_scan_tells_only_the_replica_that_changed_and_a_missing_object_comes_back(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    async with fleet(time_skipping_env) as f:
        a = await f.start("qwen-aaaaa")
        b = await f.start("qwen-bbbbb")
        await f.scans_after(2)
        quiet_b = await _events(b)

        # A's engine reports Available False: A is Degraded at the next scan, B hears nothing.
        engine = f.kube.engine("qwen-aaaaa")
        broken = dict(f.kube.store[engine])
        broken["status"] = {
            "observedGeneration": 1,
            "conditions": [{"type": "Available", "status": "False", "reason": "CrashLoop"}],
        }
        f.kube.store[engine] = broken
        await f.until(a, ReplicaPhase.DEGRADED)
        progress = await a.query(ReplicaWorkflow.progress)
        assert "not Available" in progress.reason
        assert await _events(b) == quiet_b
        broken["status"]["conditions"][0]["status"] = "True"
        await f.until(a, ReplicaPhase.READY)
        assert await _events(b) == quiet_b

        # A's InferencePool is deleted outside modelfleet: the next scan asks A to repair,
        # and only the pool is re-applied.
        (pool,) = [k for k in f.kube.store if k[1] == "InferencePool" and "aaaaa" in k[3]]
        del f.kube.store[pool]
        applies = [c for c in f.kube.calls if c.startswith("apply:")]
        await f.scans_after(1)
        await f.until(a, ReplicaPhase.READY)
        assert pool in f.kube.store
        assert [c for c in f.kube.calls if c.startswith("apply:")] == [
            *applies,
            "apply:InferencePool",
        ]
        assert await _events(b) == quiet_b
        # Watched, a replica never polls: its one health check of its own explained, in its
        # pods' words (restarts included), the verdict that took it out of Ready.
        assert f.kube.calls.count("check") == 1

        # B's workflow ends without unregistering (terminated), then its objects vanish: the
        # cluster's signal cannot reach it, so it stops watching B and carries on.
        await b.terminate("gone without a goodbye")
        for key in [k for k in f.kube.store if "bbbbb" in k[3]]:
            del f.kube.store[key]
        await f.scans_after(3)
        assert f.kube.scans[-1] == ["ml/qwen-aaaaa"]
        status = await f.cluster.query(ClusterWorkflow.status)
        assert status.ready
        desc = await f.cluster.describe()
        assert desc.status is not None
        assert desc.status.name == "RUNNING"
        await a.signal(ReplicaWorkflow.teardown)
        assert (await a.result()).phase is ReplicaPhase.TERMINATED


async def test_a_replica_whose_cluster_does_not_scan_it_polls_instead(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    # The cluster never answers its probe, so it is never Ready and never scans: the replica
    # hears nothing after registering and, rather than go unwatched, checks its own health.
    async with fleet(time_skipping_env, up=False) as f:
        replica = await f.start("qwen-alone")
        assert "check" not in f.kube.calls
        # 10 min for the acknowledgement, then 30 s checks; ending 15 s off that grid, so the
        # teardown does not cancel a check's timer as it fires (sdk-java #2606, #3088).
        await time_skipping_env.sleep(timedelta(seconds=885))
        assert f.kube.calls.count("check") >= 3
        assert f.kube.scans == []
        status = await f.cluster.query(ClusterWorkflow.status)
        assert not status.ready
        await replica.signal(ReplicaWorkflow.teardown)
        assert (await replica.result()).phase is ReplicaPhase.TERMINATED


async def test_a_silent_cluster_turns_its_replicas_unknown_at_the_first_failed_probe(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    """Issue 29 item 2: no green status for what nobody can reach. The first failed probe
    (long before the threshold makes the cluster NotReady) turns the watched replica Unknown,
    told to its deployment with the probe's reason, routing left alone; the first scan after
    the API answers again turns it Ready."""
    async with fleet(time_skipping_env) as f:
        replica = await f.start("qwen-dark1")
        await f.scans_after(2)
        probes = f.probe.probes
        f.probe.up = False
        await f.until(replica, ReplicaPhase.UNKNOWN)
        # One probe failed, not the three that make the cluster NotReady.
        assert f.probe.probes - probes <= 2
        assert (await f.cluster.query(ClusterWorkflow.status)).phase == "Ready"
        progress = await replica.query(ReplicaWorkflow.progress)
        assert "connection refused" in progress.reason, progress
        assert f"cluster {SPEC.metadata.name} unreachable" in progress.reason, progress
        sink = time_skipping_env.client.get_workflow_handle(f.sink)
        told = await sink.query(ProgressSink.progress)
        assert told[-1].phase is ReplicaPhase.UNKNOWN, told
        # No health check or drift comparison against a silent API, no withdrawal of routes.
        assert "withdraw" not in f.kube.calls
        assert "check" not in f.kube.calls
        scans = len(f.kube.scans)
        f.probe.up = True
        await f.until(replica, ReplicaPhase.READY)
        assert len(f.kube.scans) > scans
        told = await sink.query(ProgressSink.progress)
        assert told[-1].phase is ReplicaPhase.READY, told
        await replica.signal(ReplicaWorkflow.teardown)
        assert (await replica.result()).phase is ReplicaPhase.TERMINATED
