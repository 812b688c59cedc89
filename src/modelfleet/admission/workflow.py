"""The RolloutSlots workflow (ID ``rollout-slots``, on the Fleet's task queue): the fleet-wide
bound on concurrent rollouts (issue 22, admission control).

A ModelDeployment with a rollout to do signals ``request`` with its workflow ID and waits for
the ``rollout_slot`` signal this workflow sends back (granted, or queued with how many are
ahead); it signals ``release`` when its replicas are no longer starting. ``configure`` (signal)
takes new settings; ``view`` (query) lists holders and the queue. What is decided is in
``admission.state``; this workflow only delivers the notices (a notice that cannot be delivered
means the deployment's workflow has ended: its slot is taken back), wakes for the lease and the
liveness pings, and continues as new when the history grows.

It runs on the Fleet's queue so that a flood of deployment workflow tasks on the main queue does
not delay the grants that let the flood drain.
"""

from __future__ import annotations

import asyncio
import contextlib

from temporalio import workflow
from temporalio.common import VersioningBehavior
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from modelfleet.admission import state as slots
    from modelfleet.admission.state import Outgoing, SlotSettings, SlotsState, SlotsView
    from modelfleet.contracts.versioning import declared

# The deployment workflow's signal that carries a notice.
NOTICE_SIGNAL = "rollout_slot"
# Notices sent in one workflow task (each is a command and, later, an event).
BATCH = 100


@workflow.defn(name="RolloutSlots", versioning_behavior=declared(VersioningBehavior.AUTO_UPGRADE))
class RolloutSlotsWorkflow:
    @workflow.init
    def __init__(self, arg: SlotsState) -> None:
        self._s = arg

    @workflow.signal
    def request(self, who: str) -> None:
        slots.requested(self._s, who, workflow.now())

    @workflow.signal
    def release(self, who: str) -> None:
        slots.released(self._s, who, workflow.now())

    @workflow.signal
    def configure(self, settings: SlotSettings) -> None:
        slots.configured(self._s, settings, workflow.now())

    @workflow.query
    def view(self) -> SlotsView:
        return slots.view(self._s)

    @workflow.run
    async def run(self, arg: SlotsState) -> None:
        while True:
            slots.expired(self._s, workflow.now())
            batch = slots.taken(self._s, BATCH)
            if batch:
                await asyncio.gather(*(self._send(o) for o in batch))
                continue
            if workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                if not self._s.outbox:
                    workflow.continue_as_new(self._s)
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: bool(self._s.outbox),
                    timeout=slots.next_due(self._s, workflow.now()),
                    timeout_summary="slot lease or liveness ping",
                )

    async def _send(self, o: Outgoing) -> None:
        try:
            await workflow.get_external_workflow_handle(o.to).signal(NOTICE_SIGNAL, o.notice)
        except ApplicationError:
            # Its workflow has ended (deleted, terminated): it holds and waits for nothing.
            slots.undeliverable(self._s, o.to, workflow.now())
