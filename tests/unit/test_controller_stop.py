"""A stopping controller's workers end even when a call inside a reconcile catches their
cancellation and returns (a client that reports a cancelled request as an ordinary result):
otherwise the leader's clean-up waits for that worker for ever, and the controller neither
stops nor campaigns again. No management cluster: reconcile is replaced."""

from __future__ import annotations

import asyncio
import contextlib

from modelfleet.controller.runner import Controller
from modelfleet.controller.support import ControllerSettings


async def test_a_worker_whose_reconcile_swallowed_its_cancellation_ends() -> None:
    controller = Controller(None, None, ControllerSettings())  # type: ignore[arg-type]
    entered = asyncio.Event()

    async def reconcile(key: object) -> float | None:
        entered.set()
        with contextlib.suppress(asyncio.CancelledError):  # swallowed, as a client might
            await asyncio.Event().wait()
        return None

    controller.reconcile = reconcile  # type: ignore[method-assign, assignment]
    controller.queue.add("a")  # type: ignore[arg-type]
    worker = asyncio.create_task(controller._work())
    await asyncio.wait_for(entered.wait(), 10)
    worker.cancel()
    done, _ = await asyncio.wait([worker], timeout=10)
    assert worker in done, "the worker went back to its queue after its cancellation"
    assert worker.cancelled()
    assert controller.reconciles == 1
