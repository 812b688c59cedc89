"""The RolloutSlots workflow across continue-as-new (on a dev server that suggests it after a
few dozen events, ``carrying_client``): with a bound of 1, ten stand-in deployments queue for
the slot, then each gives it back when the test says so; the slot passes from one to the next
in the order they asked, each is granted exactly once, although the queue outlived several
runs, and the last run holds nothing."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

from temporalio import workflow
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.worker import Worker

from modelfleet.admission.state import SlotNotice, SlotSettings, SlotsState, SlotsView
from modelfleet.admission.workflow import RolloutSlotsWorkflow
from modelfleet.contracts.ids import ROLLOUT_SLOTS_ID

COUNT = 10


@workflow.defn(name="SlotTaker")
class SlotTaker:
    """Stands in for a deployment: asks once, records the notices, gives the slot back when
    told to (``done``)."""

    def __init__(self) -> None:
        self.notices: list[SlotNotice] = []
        self.finished = False

    @workflow.signal
    def rollout_slot(self, notice: SlotNotice) -> None:
        self.notices.append(notice)

    @workflow.signal
    def done(self) -> None:
        self.finished = True

    @workflow.query
    def heard(self) -> list[SlotNotice]:
        return self.notices

    @workflow.run
    async def run(self) -> None:
        gate = workflow.get_external_workflow_handle(ROLLOUT_SLOTS_ID)
        await gate.signal("request", workflow.info().workflow_id)
        await workflow.wait_condition(
            lambda: self.finished and any(n.granted for n in self.notices)
        )
        await gate.signal("release", workflow.info().workflow_id)


async def until(
    gate: WorkflowHandle[RolloutSlotsWorkflow, None], check: Callable[[SlotsView], bool]
) -> SlotsView:
    deadline = time.monotonic() + 30
    while True:
        view: SlotsView = await gate.query(RolloutSlotsWorkflow.view)
        if check(view):
            return view
        assert time.monotonic() < deadline, view
        await asyncio.sleep(0.1)


def asked(name: str) -> Callable[[SlotsView], bool]:
    return lambda v: name in v.holders + v.queue


def holds(name: str) -> Callable[[SlotsView], bool]:
    return lambda v: v.holders == [name]


async def test_the_queue_is_carried_across_continue_as_new(carrying_client: Client) -> None:
    client = carrying_client
    queue = f"tq-{uuid.uuid4()}"
    names = [f"taker-{i}" for i in range(COUNT)]
    async with Worker(client, task_queue=queue, workflows=[RolloutSlotsWorkflow, SlotTaker]):
        gate = await client.start_workflow(
            RolloutSlotsWorkflow.run,
            SlotsState(settings=SlotSettings(slots=1)),
            id=ROLLOUT_SLOTS_ID,
            task_queue=queue,
        )
        takers: list[WorkflowHandle[SlotTaker, None]] = []
        for name in names:
            takers.append(await client.start_workflow(SlotTaker.run, id=name, task_queue=queue))
            await until(gate, asked(name))
        view = await until(gate, lambda v: len(v.queue) == COUNT - 1)
        assert view.holders == [names[0]]
        assert view.queue == names[1:]

        order = []
        for i, taker in enumerate(takers):
            view = await until(gate, holds(names[i]))
            order.append(view.holders[0])
            await taker.signal(SlotTaker.done)
            await asyncio.wait_for(taker.result(), 30)
        assert order == names
        await until(gate, lambda v: not v.holders and not v.queue)

        heard = [await t.query(SlotTaker.heard) for t in takers]
        assert [sum(n.granted for n in h) for h in heard] == [1] * COUNT
        # Those that queued were told how many were ahead: 0, 1, ... in order.
        assert [h[0].ahead for h in heard[1:]] == list(range(COUNT - 1))

        statuses = [
            w.status async for w in client.list_workflows(f"WorkflowId='{ROLLOUT_SLOTS_ID}'")
        ]
        assert WorkflowExecutionStatus.CONTINUED_AS_NEW in statuses, statuses
        await gate.terminate()
