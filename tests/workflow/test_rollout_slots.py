"""Admission control on the dev server (issue 22): the RolloutSlots workflow bounds how many
ModelDeployments roll out at once. Eight one-replica deployments against a bound of three, with
their readiness held: three roll out, five say they wait (phase, condition, how many ahead); once
readiness is let go all eight end Ready, never more than three replicas in their readiness wait
at once, and every slot is back. A holder deleted while others wait gives its slot to the next.

Real time (``dev_client``), not the time-skipping server: nothing here waits for a timer, and
the deployments' waits on a signal with a timeout are what that server strands (conftest)."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import pytest_asyncio
from deployment_fakes import FakeClusters, FakeFleet, deployment, replica_of
from temporalio import activity
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateStage
from temporalio.service import RPCError
from temporalio.worker import Worker

from modelfleet.admission.state import SlotSettings, SlotsState, SlotsView
from modelfleet.admission.workflow import RolloutSlotsWorkflow
from modelfleet.contracts.activity_names import FLEET_PLACE, KUBE_POLL_READY
from modelfleet.contracts.fleet_payloads import PlaceRequest, PlaceResponse
from modelfleet.contracts.ids import ROLLOUT_SLOTS_ID, deployment_id
from modelfleet.contracts.kube_payloads import ReadyResult, WaitReadyRequest
from modelfleet.contracts.status import DeploymentStatus
from modelfleet.deployment.workflow import DeploymentInput, DeploymentWorkflow
from modelfleet.replica.workflow import ReplicaWorkflow

BOUND = 3
COUNT = 8
T = TypeVar("T")


@dataclass
class ManyFleet(FakeFleet):
    """``FakeFleet`` for many deployments: each has its own replicas (the base counts every
    replica in the ledger as the requester's)."""

    @activity.defn(name=FLEET_PLACE)
    async def place(self, request: PlaceRequest) -> PlaceResponse:
        md = request.deployment
        assert md is not None
        self.requests.append(request)
        mine = [n for n in self.ledger if n.startswith(f"{md.name}-")]
        placed = []
        for _ in range(request.desired - len(mine)):
            free = [c for c in self.clusters if c not in set(self.ledger.values())]
            self.made += 1
            name = f"{md.name}-{self.made}"
            self.ledger[name] = free[0]
            placed.append(replica_of(md, name, free[0], self.made))
        self.version += 1
        return PlaceResponse(placed=placed, version=self.version)


@dataclass
class HeldClusters(FakeClusters):
    """``FakeClusters`` whose readiness waits do not answer until ``open`` is set; counts the
    waits in flight and the most ever at once."""

    open: asyncio.Event = field(default_factory=asyncio.Event)
    waiting: int = 0
    most: int = 0

    @activity.defn(name=KUBE_POLL_READY)
    async def poll_ready(self, request: WaitReadyRequest) -> ReadyResult:
        self.waiting += 1
        self.most = max(self.most, self.waiting)
        try:
            await self.open.wait()
        finally:
            self.waiting -= 1
        return await super().poll_ready(request)


@dataclass
class Setup:
    client: Client
    queue: str
    clusters: HeldClusters
    gate: WorkflowHandle[RolloutSlotsWorkflow, None]

    async def start(self, name: str) -> WorkflowHandle[DeploymentWorkflow, DeploymentStatus]:
        return await self.client.start_workflow(
            DeploymentWorkflow.run,
            DeploymentInput(spec=deployment(name, replicas=1)),
            id=deployment_id("ml", name),
            task_queue=self.queue,
        )

    async def view(self) -> SlotsView:
        return await self.gate.query(RolloutSlotsWorkflow.view)


async def until(probe: Callable[[], Awaitable[T | None]], limit: float, what: str) -> T:
    deadline = time.monotonic() + limit
    last: object = None
    while time.monotonic() < deadline:
        last = await probe()
        if last is not None:
            return last
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out after {limit:.0f} s waiting for {what}")


@pytest_asyncio.fixture
async def setup(dev_client: Client) -> AsyncIterator[Setup]:
    fleet = ManyFleet(clusters=[f"c{i}" for i in range(COUNT)])
    clusters = HeldClusters()
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(
        dev_client,
        task_queue=queue,
        workflows=[DeploymentWorkflow, ReplicaWorkflow, RolloutSlotsWorkflow],
        activities=[
            fleet.place,
            fleet.dry_place,
            fleet.release,
            fleet.placement_current,
            clusters.apply,
            clusters.poll_ready,
            clusters.check_ready,
            clusters.drift,
            clusters.publish,
            clusters.withdraw,
            clusters.check_models,
            clusters.routes_carrying,
            clusters.delete,
        ],
    ):
        gate = await dev_client.start_workflow(
            RolloutSlotsWorkflow.run,
            SlotsState(settings=SlotSettings(slots=BOUND)),
            id=ROLLOUT_SLOTS_ID,
            task_queue=queue,
        )
        yield Setup(dev_client, queue, clusters, gate)
        clusters.open.set()  # nothing may be left hanging in an activity at shutdown
        with contextlib.suppress(RPCError):
            await gate.terminate()


async def statuses(setup: Setup, names: list[str]) -> list[DeploymentStatus]:
    return [
        await setup.client.get_workflow_handle(deployment_id("ml", n)).query(
            DeploymentWorkflow.status
        )
        for n in names
    ]


async def test_a_flood_queues_behind_the_bound_and_every_deployment_ends_ready(
    setup: Setup,
) -> None:
    names = [f"flood-{i}" for i in range(COUNT)]
    for name in names:
        await setup.start(name)

    async def bound_reached() -> list[DeploymentStatus] | None:
        found = await statuses(setup, names)
        waiting = [s for s in found if s.phase == "Waiting"]
        told = all(
            any(
                c.reason == "WaitingForRolloutSlot" and c.message.endswith("ahead")
                for c in s.conditions
            )
            for s in waiting
        )
        full = setup.clusters.waiting == BOUND and len(waiting) == COUNT - BOUND
        return found if full and told else None

    found = await until(bound_reached, 90, f"{BOUND} rolling out and the rest waiting")
    view = await setup.view()
    assert len(view.holders) == BOUND
    assert len(view.queue) == COUNT - BOUND
    # The waiting ones were told how many were ahead when they queued: 0, 1, ... in order.
    aheads = sorted(
        next(c.message for c in s.conditions if c.reason == "WaitingForRolloutSlot")
        for s in found
        if s.phase == "Waiting"
    )
    assert aheads[0] == "waiting for a rollout slot: 0 rollouts ahead"
    assert {deployment_id("ml", s.name) for s in found if s.phase == "Waiting"} == set(view.queue)

    setup.clusters.open.set()

    async def all_ready() -> list[DeploymentStatus] | None:
        found = await statuses(setup, names)
        return found if all(s.phase == "Ready" for s in found) else None

    await until(all_ready, 180, "all deployments Ready")
    assert setup.clusters.most == BOUND

    async def all_given_back() -> SlotsView | None:
        view = await setup.view()
        return view if not view.holders and not view.queue else None

    await until(all_given_back, 30, "every slot given back")


async def test_a_deleted_holder_gives_its_slot_to_the_next(setup: Setup) -> None:
    names = [f"del-{i}" for i in range(BOUND + 1)]
    for name in names:
        await setup.start(name)

    async def one_waits() -> SlotsView | None:
        view = await setup.view()
        return view if len(view.holders) == BOUND and len(view.queue) == 1 else None

    view = await until(one_waits, 60, "one deployment waiting")
    victim = view.holders[0]
    # Accepted is enough: its replica's teardown waits on the held readiness wait.
    await setup.client.get_workflow_handle(victim).start_update(
        DeploymentWorkflow.delete, wait_for_stage=WorkflowUpdateStage.ACCEPTED
    )

    async def next_holds() -> SlotsView | None:
        now = await setup.view()
        return now if victim not in now.holders and view.queue[0] in now.holders else None

    await until(next_holds, 60, "the waiting deployment to get the deleted one's slot")
