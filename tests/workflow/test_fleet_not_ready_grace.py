"""A cluster that stays NotReady past ``NOT_READY_GRACE`` loses its replicas to re-placement
(issue 16, item 7), through the real Fleet workflow on the time-skipping server: inside the
grace a deployment's placement stays current and a placement keeps its replica where it is;
past it the placement is no longer current (the Fleet's end-of-grace timer marks the cluster
changed, so the deployment's next resync asks again) and the same request places the replica
on another cluster. The Fleet runs no activity, so the server skips the grace freely; the
clock is still advanced in steps with a query between."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from fleet_placing import placer
from fleet_scale_support import classes, cluster_entries, one_gpu_deployment
from temporalio import workflow
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from modelfleet.api.deployments import ModelDeployment
from modelfleet.contracts.fleet_payloads import ClusterReport, PlacementCheck, PlaceRequest
from modelfleet.contracts.ids import deployment_id
from modelfleet.contracts.workflow_inputs import FleetInput, FleetLimits, FleetState
from modelfleet.fleet.workflow import NOT_READY_GRACE, FleetWorkflow
from modelfleet.scheduling.explain import UNREACHABLE

STEP = timedelta(seconds=60)


async def test_replicas_on_a_cluster_not_ready_past_its_grace_are_re_placed(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    env = time_skipping_env
    queue = f"fleet-grace-{uuid.uuid4()}"
    state = FleetState(classes=classes(), cluster_entries=cluster_entries(2))
    md = one_gpu_deployment("m", "ns")
    async with Worker(env.client, task_queue=queue, workflows=[FleetWorkflow]):
        handle = await env.client.start_workflow(
            FleetWorkflow.run,
            FleetInput(state=state),
            id=f"fleet-{uuid.uuid4()}",
            task_queue=queue,
        )

        async def place(request_id: str) -> tuple[list[str], list[str], int]:
            answer = await placer(handle).place(
                PlaceRequest(request_id=request_id, deployment=md, desired=1)
            )
            placed = [f"{r.name}@{r.spec.cluster_name}" for r in answer.placed]
            victims = [f"{v.replica.name}@{v.replica.spec.cluster_name}" for v in answer.victims]
            return placed, victims, answer.version

        async def current(version: int) -> bool:
            check = PlacementCheck(namespace="ns", deployment="m", version=version)
            result: bool = await handle.query(FleetWorkflow.placement_current, check)
            return result

        first, _, _ = await place("first")
        assert len(first) == 1
        home = first[0].split("@")[1]
        other = next(c for c in state.cluster_entries if c != home)

        await handle.execute_update(
            FleetWorkflow.report_cluster, ClusterReport(name=home, ready=False, reason="dark")
        )
        went_dark = await env.get_current_time()
        # Inside the grace: the replica stays where it is (a blip moves nothing).
        placed, victims, version = await place("inside")
        assert (placed, victims) == ([], [])
        assert await handle.query(FleetWorkflow.replicas_on, home) != []

        # Inside the grace the placement stays current (nothing to ask again); one step past
        # it, it is no longer current, so the deployment's next resync asks again. (Before the
        # Fleet's end-of-grace timer, nothing marked the change and it stayed current.)
        while await env.get_current_time() - went_dark < NOT_READY_GRACE:
            assert await current(version)
            await env.sleep(STEP)
        await env.sleep(STEP)
        assert not await current(version)
        assert (await handle.query(FleetWorkflow.replicas_on, other)) == []
        # Asking again moves the replica to the other cluster.
        placed, victims, _ = await place("past")
        assert [p.split("@")[1] for p in placed] == [other]
        assert await handle.query(FleetWorkflow.replicas_on, other) != []
        await handle.terminate()


# Not sandboxed: a test stand-in (see tests/workflow/test_replica_saga.py on why).
@workflow.defn(name="DeploymentResyncs", sandboxed=False)
class DeploymentResyncs:
    """Stands in for the ModelDeployment workflow: counts the Fleet's ``resync`` nudges."""

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


@dataclass
class Placed:
    """A Fleet of two Ready clusters with its own grace, one replica of ``md`` placed on
    ``home``, and a stand-in for the deployment that counts its resync signals."""

    env: WorkflowEnvironment
    fleet: WorkflowHandle[Any, Any]
    stand_in: WorkflowHandle[Any, Any]
    md: ModelDeployment
    home: str
    other: str


@asynccontextmanager
async def placed_fleet(env: WorkflowEnvironment, grace: timedelta) -> AsyncIterator[Placed]:
    queue = f"fleet-grace-{uuid.uuid4()}"
    state = FleetState(classes=classes(), cluster_entries=cluster_entries(2))
    limits = FleetLimits(not_ready_grace_seconds=int(grace.total_seconds()))
    async with Worker(env.client, task_queue=queue, workflows=[FleetWorkflow, DeploymentResyncs]):
        stand_in = await env.client.start_workflow(
            DeploymentResyncs.run, id=deployment_id("ns", "m"), task_queue=queue
        )
        handle = await env.client.start_workflow(
            FleetWorkflow.run,
            FleetInput(state=state, limits=limits),
            id=f"fleet-{uuid.uuid4()}",
            task_queue=queue,
        )
        md = one_gpu_deployment("m", "ns")
        answer = await placer(handle).place(
            PlaceRequest(request_id="first", deployment=md, desired=1)
        )
        home = answer.placed[0].spec.cluster_name
        other = next(c for c in state.cluster_entries if c != home)
        yield Placed(env, handle, stand_in, md, home, other)
        await handle.terminate()
        await stand_in.terminate()


async def test_a_fleet_with_a_short_grace_nudges_the_deployments_at_its_end(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    """The grace is the Fleet's own limit (``FleetLimits.not_ready_grace_seconds``), and at its
    end every deployment with a replica on the cluster is asked to reconcile at once, rather
    than finding out at its next periodic resync."""
    env = time_skipping_env
    grace = timedelta(seconds=30)
    async with placed_fleet(env, grace) as f:
        handle, stand_in, md = f.fleet, f.stand_in, f.md
        await handle.execute_update(
            FleetWorkflow.report_cluster, ClusterReport(name=f.home, ready=False, reason="dark")
        )
        went_dark = await env.get_current_time()
        inside = await placer(handle).place(
            PlaceRequest(request_id="inside", deployment=md, desired=1)
        )
        assert (inside.placed, inside.victims) == ([], [])
        check = PlacementCheck(namespace="ns", deployment="m", version=inside.version)
        while await env.get_current_time() - went_dark < grace:
            assert await stand_in.query(DeploymentResyncs.count) == 0
            assert await handle.query(FleetWorkflow.placement_current, check)
            await env.sleep(timedelta(seconds=5))
        await env.sleep(timedelta(seconds=5))
        assert await stand_in.query(DeploymentResyncs.count) == 1
        assert not await handle.query(FleetWorkflow.placement_current, check)
        moved = await placer(handle).place(
            PlaceRequest(request_id="past", deployment=md, desired=1)
        )
        assert [r.spec.cluster_name for r in moved.placed] == [f.other]


async def test_an_unreachable_clusters_grace_counts_from_its_first_failed_probe(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    """Issue 29 item 2: failover has a bound from when the cluster went silent. A cluster whose
    probes started failing 100 s before the NotReady report (the threshold's probes) is given
    the rest of its 120 s grace, not 120 s more."""
    env = time_skipping_env
    async with placed_fleet(env, timedelta(seconds=120)) as f:
        silent_since = await env.get_current_time() - timedelta(seconds=100)
        await f.fleet.execute_update(
            FleetWorkflow.report_cluster,
            ClusterReport(
                name=f.home, ready=False, reason="unreachable", unreachable_since=silent_since
            ),
        )
        await env.sleep(timedelta(seconds=15))
        assert await f.stand_in.query(DeploymentResyncs.count) == 0
        # 100 + 15 + 10 s > 120 s since the silence, though only 25 s since NotReady.
        await env.sleep(timedelta(seconds=10))
        assert await f.stand_in.query(DeploymentResyncs.count) == 1


async def test_a_cluster_whose_last_probe_failed_gets_no_new_replica_before_not_ready(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    """Issue 29 item 3: a report that the cluster's probes fail, while it still counts as Ready
    (NotReady waits for the failure threshold), keeps new replicas off it at once and says why;
    the replica already there stays; once a probe answers it takes new replicas again."""
    env = time_skipping_env
    async with placed_fleet(env, timedelta(seconds=120)) as f:
        failing = ClusterReport(
            name=f.home,
            ready=True,
            reason="unreachable (1 probe failed): connection reset",
            gateway_address=f"gateway.{f.home}.invalid",
            unreachable_since=await env.get_current_time(),
        )
        await f.fleet.execute_update(FleetWorkflow.report_cluster, failing)
        # Both clusters have room for two; without the report the spread would put one on each.
        two = await placer(f.fleet).place(
            PlaceRequest(request_id="two", deployment=f.md, desired=3)
        )
        assert sorted(r.spec.cluster_name for r in two.placed) == [f.other, f.other]
        assert two.victims == []
        assert two.rejections == {f.home: UNREACHABLE}
        assert await f.fleet.query(FleetWorkflow.replicas_on, f.home) != []
        answered = failing.model_copy(update={"reason": "probe ok", "unreachable_since": None})
        await f.fleet.execute_update(FleetWorkflow.report_cluster, answered)
        four = await placer(f.fleet).place(
            PlaceRequest(request_id="four", deployment=f.md, desired=4)
        )
        assert [r.spec.cluster_name for r in four.placed] == [f.home]
        assert four.rejections == {}
