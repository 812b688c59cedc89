"""The Fleet's ModelCache facts on the time-skipping server: a cache's per-cluster report (the
``report_cache`` Update) gates placement of deployments referencing it, with the cache's state
as each cluster's reason; a change asks the short deployments of its namespace to place again;
the facts survive continue-as-new (the compact cluster entry carries them)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest_asyncio
from conftest import start_time_skipping_env
from fleet_placing import placer
from fleet_scale_support import classes, cluster_entries, one_gpu_deployment
from temporalio import workflow
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from modelfleet.api.deployments import ModelDeployment
from modelfleet.contracts.cache_payloads import CacheReport
from modelfleet.contracts.fleet_payloads import DryPlaceRequest, PlaceRequest
from modelfleet.contracts.fleet_state import cluster_entry, cluster_record
from modelfleet.contracts.ids import deployment_id
from modelfleet.contracts.status import ClusterRecord
from modelfleet.contracts.workflow_inputs import FleetInput, FleetState
from modelfleet.fleet.workflow import FleetWorkflow


@pytest_asyncio.fixture(scope="module")
async def time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    """A server of its own: after a test sends many Updates, the shared session server has been
    seen to stop skipping time for a later test's ``env.sleep`` (see test_deployment_guard)."""
    env = await start_time_skipping_env()
    try:
        yield env
    finally:
        await env.shutdown()


# Not sandboxed: the sandbox re-imports this test module, and CPython 3.11 can fail compiling a
# pytest-rewritten module again ("SystemError: AST constructor recursion depth mismatch", seen in
# CI). A test stand-in has nothing the sandbox needs to guard.
@workflow.defn(name="ResyncSink", sandboxed=False)
class ResyncSink:
    """Stands in for a deployment: counts the resync signals it gets."""

    def __init__(self) -> None:
        self.resyncs = 0

    @workflow.signal
    def resync(self) -> None:
        self.resyncs += 1

    @workflow.query
    def count(self) -> int:
        return self.resyncs

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)


def cached(name: str, namespace: str) -> ModelDeployment:
    doc = one_gpu_deployment(name, namespace).to_wire()
    doc["spec"]["template"]["spec"]["modelCacheRef"] = {"name": "weights"}
    return ModelDeployment.model_validate(doc)


async def test_cache_reports_gate_placement_and_wake_short_deployments(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    client = time_skipping_env.client
    queue = f"fleet-cache-{uuid.uuid4()}"
    ns = f"ns{uuid.uuid4().hex[:6]}"
    state = FleetState(classes=classes(), cluster_entries=cluster_entries(2))
    async with Worker(client, task_queue=queue, workflows=[FleetWorkflow, ResyncSink]):
        fleet = await client.start_workflow(
            FleetWorkflow.run, FleetInput(state=state), id=f"fleet-{uuid.uuid4()}", task_queue=queue
        )
        sink = await client.start_workflow(
            ResyncSink.run, id=deployment_id(ns, "m"), task_queue=queue
        )

        async def place(request_id: str) -> tuple[list[str], dict[str, str]]:
            answer = await placer(fleet).place(
                PlaceRequest(request_id=request_id, deployment=cached("m", ns), desired=1),
            )
            return [r.spec.cluster_name for r in answer.placed], answer.rejections

        placed, why = await place("1")
        assert placed == []
        assert all("model cache weights not staged" in r for r in why.values())

        report = CacheReport(namespace=ns, name="weights", clusters={"c-0001": "Hydrating 40%"})
        await fleet.execute_update(FleetWorkflow.report_cache, report)
        # Being staged is eligible (the replica waits for Ready on its cluster); c-0000, first by
        # name but not staging the cache, is not. Checked dry, so nothing is reserved.
        dry = await placer(fleet).dry_place(
            DryPlaceRequest(request_id="2", deployment=cached("m", ns), desired=1),
        )
        assert [r.spec.cluster_name for r in dry.placed] == ["c-0001"]
        records: list[ClusterRecord] = await fleet.query(FleetWorkflow.clusters)
        assert {r.spec.name: r.caches for r in records} == {
            "c-0000": {},
            "c-0001": {f"{ns}/weights": "Hydrating 40%"},
        }
        # The short deployment of that namespace is asked to place again on every change.
        assert await sink.query(ResyncSink.count) == 1
        await fleet.execute_update(FleetWorkflow.report_cache, report)  # no change: no nudge
        assert await sink.query(ResyncSink.count) == 1

        report.clusters = {"c-0000": "Hydrating 90%", "c-0001": "Ready"}  # two changes
        await fleet.execute_update(FleetWorkflow.report_cache, report)
        assert await sink.query(ResyncSink.count) == 2
        # Both eligible: the cluster where the cache is Ready wins over the one still hydrating.
        placed, _ = await place("3")
        assert placed == ["c-0001"]

        # Deleted (or withdrawn): no cluster holds it any more.
        await fleet.execute_update(
            FleetWorkflow.report_cache, CacheReport(namespace=ns, name="weights")
        )
        records = await fleet.query(FleetWorkflow.clusters)
        assert all(r.caches == {} for r in records)
        await sink.terminate()
        await fleet.terminate()


def test_the_compact_cluster_entry_carries_cache_facts() -> None:
    (entry,) = cluster_entries(1).values()
    record = cluster_record(entry, {})
    record.caches = {"ml/weights": "Ready"}
    compact, key, layout = cluster_entry(record)
    assert cluster_record(compact, {key: layout}).caches == {"ml/weights": "Ready"}
