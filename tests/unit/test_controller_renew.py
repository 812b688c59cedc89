"""The leader's renew loop: a leader that cannot renew stops acting before its Lease could be
claimed by another controller, even when its renewal attempt never returns (a partitioned or
starved management API). No management cluster: the Lease call is replaced."""

from __future__ import annotations

import asyncio
import time

from modelfleet.controller.runner import Controller
from modelfleet.controller.support import ControllerSettings

LEASE = 4


def _controller(
    attempts: list[float], hang_after: int, past_a_lease: asyncio.Event | None = None
) -> Controller:
    settings = ControllerSettings(lease_seconds=LEASE, renew_seconds=0.2)
    controller = Controller(None, None, settings)  # type: ignore[arg-type]

    async def try_lead() -> bool:
        attempts.append(time.monotonic())
        if past_a_lease is not None and attempts[-1] - attempts[0] > LEASE:
            past_a_lease.set()
        if len(attempts) > hang_after:
            await asyncio.Event().wait()  # the request never comes back
        return True

    controller._try_lead = try_lead  # type: ignore[method-assign]
    return controller


async def _lost_within(controller: Controller, bound: float) -> float:
    stop, lost = asyncio.Event(), asyncio.Event()
    renewing = asyncio.create_task(controller._renew(stop, lost))
    try:
        await asyncio.wait_for(lost.wait(), bound)
        return time.monotonic()
    finally:
        stop.set()
        renewing.cancel()
        await asyncio.gather(renewing, return_exceptions=True)


async def test_a_hanging_renewal_gives_the_lease_up_before_it_expires() -> None:
    attempts: list[float] = []
    lost_at = await _lost_within(_controller(attempts, hang_after=3), 3 * LEASE)
    last_sent = attempts[2]  # the last renewal that succeeded was sent then
    # Another controller may claim the Lease LEASE seconds after its renewTime, which is
    # written after the renewal was sent: the leader must have stopped before that.
    assert lost_at - last_sent < LEASE
    assert len(attempts) == 4  # it did not stop before its renewal hung


async def test_a_leader_that_renews_keeps_leading() -> None:
    attempts: list[float] = []
    past_a_lease = asyncio.Event()
    controller = _controller(attempts, hang_after=10**9, past_a_lease=past_a_lease)
    stop, lost = asyncio.Event(), asyncio.Event()
    renewing = asyncio.create_task(controller._renew(stop, lost))
    await asyncio.wait_for(past_a_lease.wait(), 4 * LEASE)
    assert not lost.is_set()
    stop.set()
    await asyncio.wait_for(renewing, LEASE)
