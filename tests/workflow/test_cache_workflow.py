"""The ModelCache workflow on the real dev server, with activity doubles standing in for the
Fleet and the clusters: hydration on every matching cluster with progress, a failed download
retried after its back-off, the Job and the token Secret cleaned once Ready, readiness reported
to the Fleet, a revision change re-hydrating, a selector change leaving a cluster, and deletion
that keeps a mounted volume until forced. (The integration test runs it on the simulated fleet.)

Not on the time-skipping server: there the test's 5 s polling sleeps landed on the workflow's
5 s poll timer, and an Update sent right after woke the run just as that timer fired; the
server refuses the cancel of a fired timer and never gives the run another task (sdk-java
#2606, #3088), which hung this module on CI twice. On the dev server, polls of a second keep
real time cheap.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest_asyncio
from carry_support import carried_input, continued
from temporalio import activity
from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from modelfleet.api.caches import ModelCache
from modelfleet.api.kinds import parse_resource
from modelfleet.cache.state import CacheInput
from modelfleet.cache.workflow import CacheWorkflow
from modelfleet.contracts.cache_payloads import (
    CACHE_CLEAN,
    CACHE_OBSERVE,
    CACHE_REPORT,
    CACHE_STAGE,
    CACHE_TARGETS,
    CacheObservation,
    CacheReport,
    CacheStatus,
    CacheTarget,
    CleanRequest,
    DeleteCache,
    ObserveRequest,
    StageRequest,
    cache_id,
)

# Observations a download stays Active for before it ends.
DOWNLOAD_LOOKS = 3
# The workflow's own pace, in real seconds: each progress step and a failure's back-off stay
# on show for a second or more, many times the status poll below.
BUSY_POLL = 1.0
RETRY = 2.0
STATUS_POLL = 0.05
# Far above the few seconds any of these waits takes; only turns a hang into a failure.
WAIT_SECONDS = 90.0


@dataclass
class FakeCluster:
    claim: str = "Absent"
    jobs: dict[str, str] = field(default_factory=dict)  # name -> Active/Succeeded/Failed
    looks: dict[str, int] = field(default_factory=dict)
    secret: bool = False
    created_jobs: list[str] = field(default_factory=list)
    mounted_by: list[str] = field(default_factory=list)
    fail_next: int = 0


@dataclass
class FakeFleet:
    """The Fleet's clusters and the clusters' objects, in memory."""

    labels: dict[str, dict[str, str]]
    clusters: dict[str, FakeCluster] = field(default_factory=dict)
    reports: list[CacheReport] = field(default_factory=list)

    def cluster(self, name: str) -> FakeCluster:
        return self.clusters.setdefault(name, FakeCluster())

    @activity.defn(name=CACHE_TARGETS)
    async def targets(self, namespace: str) -> list[CacheTarget]:
        return [
            CacheTarget(cluster=n, labels=lab, ready=True, namespace=f"mf-{namespace}")
            for n, lab in self.labels.items()
        ]

    @activity.defn(name=CACHE_OBSERVE)
    async def observe(self, request: ObserveRequest) -> CacheObservation:
        c = self.cluster(request.objects.cluster)
        job = request.objects.job
        state = c.jobs.get(job, "Absent")
        done = 0
        if state == "Active":
            c.looks[job] = c.looks.get(job, 0) + 1
            done = c.looks[job] * 100 // DOWNLOAD_LOOKS
            if c.looks[job] >= DOWNLOAD_LOOKS:
                state = c.jobs[job] = "Failed" if c.fail_next else "Succeeded"
                if c.fail_next:
                    c.fail_next -= 1
        return CacheObservation.model_validate(
            {
                "claim": c.claim,
                "job": state,
                "job_message": "Connection reset by peer" if state == "Failed" else "",
                "bytes_done": min(done, 99) if state == "Active" else 0,
                "bytes_total": 100,
                "secret": c.secret,
                "mounted_by": c.mounted_by,
            }
        )

    @activity.defn(name=CACHE_STAGE)
    async def stage(self, request: StageRequest) -> int:
        c = self.cluster(request.objects.cluster)
        if request.auth_secret is not None:
            if request.auth_secret != "ml/hf-token":
                raise ApplicationError("no such secret", type="MissingSecret", non_retryable=True)
            c.secret = True
        for manifest in request.manifests:
            if manifest["kind"] == "PersistentVolumeClaim":
                c.claim = "Bound"
            elif manifest["kind"] == "Job":
                name = manifest["metadata"]["name"]
                c.jobs[name] = "Active"
                c.looks[name] = 0
                c.created_jobs.append(name)
        return len(request.manifests)

    @activity.defn(name=CACHE_CLEAN)
    async def clean(self, request: CleanRequest) -> int:
        c = self.cluster(request.objects.cluster)
        if request.jobs:
            c.jobs.clear()
        if request.secret:
            c.secret = False
        if request.claim:
            c.claim = "Absent"
        return 1

    @activity.defn(name=CACHE_REPORT)
    async def report(self, report: CacheReport) -> None:
        self.reports.append(report)


def cache(
    revision: str = "r1", selector: dict[str, str] | None = None, auth: bool = True
) -> ModelCache:
    hf: dict[str, Any] = {"repo": "Qwen/Qwen3-8B", "revision": revision, "sizeGiB": 16}
    if auth:
        hf["authSecret"] = {"name": "hf-token"}
    spec: dict[str, Any] = {"source": "HuggingFace", "huggingFace": hf}
    if selector:
        spec["clusterSelector"] = {"matchLabels": selector}
    resource = parse_resource(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "ModelCache",
            "metadata": {"name": f"c{uuid.uuid4().hex[:6]}", "namespace": "ml"},
            "spec": spec,
        }
    )
    assert isinstance(resource, ModelCache)
    return resource


@dataclass
class Harness:
    client: Client
    fleet: FakeFleet
    queue: str

    async def start(self, spec: ModelCache) -> WorkflowHandle[Any, Any]:
        return await self.client.start_workflow(
            CacheWorkflow.run,
            CacheInput.of(
                spec, busy_poll_seconds=BUSY_POLL, idle_poll_seconds=30, retry_seconds=RETRY
            ),
            id=cache_id(spec.namespace, spec.name),
            task_queue=self.queue,
        )

    async def until(
        self,
        handle: WorkflowHandle[Any, Any],
        check: Callable[[CacheStatus], bool],
        what: str,
    ) -> CacheStatus:
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            status: CacheStatus = await handle.query(CacheWorkflow.status)
            if check(status):
                return status
            if time.monotonic() > deadline:
                raise AssertionError(f"never: {what}; last status {status}")
            await asyncio.sleep(STATUS_POLL)

    async def told(self, clusters: dict[str, str]) -> CacheReport:
        """The Fleet's last report once it says ``clusters``: the report is the pass's last
        activity, so a status query can see the pass's outcome before the Fleet is told."""
        deadline = time.monotonic() + WAIT_SECONDS
        while not (self.fleet.reports and self.fleet.reports[-1].clusters == clusters):
            if time.monotonic() > deadline:
                last = self.fleet.reports[-1] if self.fleet.reports else None
                raise AssertionError(f"the Fleet never told {clusters}; last report {last}")
            await asyncio.sleep(STATUS_POLL)
        return self.fleet.reports[-1]

    async def finished(self, handle: WorkflowHandle[Any, Any]) -> CacheStatus:
        result: CacheStatus = await asyncio.wait_for(handle.result(), WAIT_SECONDS)
        return result


@pytest_asyncio.fixture
async def harness(dev_client: Client) -> AsyncIterator[Harness]:
    fleet = FakeFleet(labels={"a": {"region": "us"}, "b": {"region": "eu"}})
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(
        dev_client,
        task_queue=queue,
        workflows=[CacheWorkflow],
        activities=[fleet.targets, fleet.observe, fleet.stage, fleet.clean, fleet.report],
    ):
        yield Harness(dev_client, fleet, queue)


def phases(status: CacheStatus) -> dict[str, str]:
    return {c.cluster: c.summary() for c in status.clusters}


async def test_hydrates_everywhere_retries_a_failure_cleans_up_and_reports(
    harness: Harness,
) -> None:
    harness.fleet.cluster("b").fail_next = 1
    spec = cache()
    handle = await harness.start(spec)
    seen: set[str] = set()

    def progressing(status: CacheStatus) -> bool:
        seen.update(phases(status).values())
        return status.phase == "Staged"

    status = await harness.until(handle, progressing, "both clusters Ready")
    assert phases(status) == {"a": "Ready", "b": "Ready"}
    assert any(p.startswith("Hydrating ") and p != "Hydrating 0%" for p in seen), seen
    assert any("attempt 1 failed: Connection reset by peer" in p for p in seen), seen
    # b needed a second Job after the failure; a one.
    assert len(harness.fleet.cluster("a").created_jobs) == 1
    assert len(harness.fleet.cluster("b").created_jobs) == 2
    # Once Ready, no Job and no token stay behind.
    for name in "ab":
        assert harness.fleet.cluster(name).jobs == {}
        assert harness.fleet.cluster(name).secret is False
    last = await harness.told({"a": "Ready", "b": "Ready"})
    assert (last.namespace, last.name) == ("ml", spec.name)
    await handle.execute_update(CacheWorkflow.delete, DeleteCache())
    final = await harness.finished(handle)
    assert final.clusters == []
    assert harness.fleet.reports[-1].clusters == {}


async def test_a_new_revision_rehydrates_and_a_selector_change_leaves_a_cluster(
    harness: Harness,
) -> None:
    spec = cache(auth=False)
    handle = await harness.start(spec)
    await harness.until(handle, lambda s: s.phase == "Staged", "first revision staged")
    first = list(harness.fleet.cluster("a").created_jobs)
    doc = spec.to_wire()
    doc["spec"]["huggingFace"]["revision"] = "r2"
    doc["spec"]["clusterSelector"] = {"matchLabels": {"region": "us"}}
    await handle.execute_update(CacheWorkflow.apply, parse_resource(doc))
    status = await harness.until(
        handle,
        lambda s: phases(s) == {"a": "Ready"} and len(harness.fleet.cluster("a").created_jobs) == 2,
        "r2 staged on a only",
    )
    assert status.revision == "r2"
    assert harness.fleet.cluster("a").created_jobs[0] == first[0]
    assert harness.fleet.cluster("a").created_jobs[1] != first[0]
    assert harness.fleet.cluster("b").claim == "Absent"  # b's volume removed
    await harness.told({"a": "Ready"})
    await handle.execute_update(CacheWorkflow.delete, DeleteCache())
    await harness.finished(handle)


async def test_delete_keeps_a_mounted_volume_until_forced(harness: Harness) -> None:
    spec = cache(auth=False, selector={"region": "us"})
    handle = await harness.start(spec)
    await harness.until(handle, lambda s: s.phase == "Staged", "staged on a")
    harness.fleet.cluster("a").mounted_by = ["Deployment qwen-abc"]
    await handle.execute_update(CacheWorkflow.delete, DeleteCache())
    status = await harness.until(
        handle,
        lambda s: any("mounted by Deployment qwen-abc" in c.message for c in s.clusters),
        "the volume kept while mounted",
    )
    assert status.deleting
    assert harness.fleet.cluster("a").claim == "Bound"
    # Nothing new may be placed against a cache being deleted.
    await harness.told({})
    await handle.execute_update(CacheWorkflow.delete, DeleteCache(force=True))
    final = await harness.finished(handle)
    assert final.deleting
    assert final.clusters == []
    assert harness.fleet.cluster("a").claim == "Absent"


async def test_a_missing_auth_secret_is_a_failure_with_the_reason_retried_later(
    harness: Harness,
) -> None:
    doc = cache(selector={"region": "eu"}).to_wire()
    doc["spec"]["huggingFace"]["authSecret"] = {"name": "nope"}
    spec = parse_resource(doc)
    assert isinstance(spec, ModelCache)
    handle = await harness.start(spec)
    status = await harness.until(
        handle, lambda s: any("no such secret" in c.message for c in s.clusters), "failed"
    )
    (b,) = status.clusters
    assert b.phase.value == "Failed"
    assert b.retry_at is not None
    assert harness.fleet.cluster("b").created_jobs == []
    await handle.execute_update(CacheWorkflow.delete, DeleteCache())
    await harness.finished(handle)


async def test_the_state_rides_continue_as_new_whole(carrying_client: Client) -> None:
    """On a server that suggests continue-as-new after a few dozen events: the input the first
    run hands on is its settings and its whole state, and the next run goes on from there."""
    fleet = FakeFleet(labels={"a": {"region": "us"}, "b": {"region": "eu"}})
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(
        carrying_client,
        task_queue=queue,
        workflows=[CacheWorkflow],
        activities=[fleet.targets, fleet.observe, fleet.stage, fleet.clean, fleet.report],
    ):
        run = Harness(carrying_client, fleet, queue)
        spec = cache(auth=False)
        handle = await run.start(spec)
        assert handle.result_run_id is not None
        first = await continued(carrying_client, handle.id, handle.result_run_id)
        held: CacheStatus = await first.query(CacheWorkflow.status)
        carried = CacheInput.model_validate(await carried_input(first))
        assert (carried.busy_poll_seconds, carried.retry_seconds) == (BUSY_POLL, RETRY)
        assert carried.state.spec == spec
        assert not carried.state.deleting
        assert sorted(carried.state.clusters) == ["a", "b"]
        assert [carried.state.clusters[k] for k in sorted(carried.state.clusters)] == held.clusters
        # The next run finishes what the first started: one Job per cluster, never a second.
        latest = carrying_client.get_workflow_handle(handle.id)
        await run.until(latest, lambda s: s.phase == "Staged", "staged after the new run")
        assert [len(fleet.cluster(n).created_jobs) for n in "ab"] == [1, 1]
        await latest.execute_update(CacheWorkflow.delete, DeleteCache())
        await run.finished(latest)
