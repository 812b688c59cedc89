"""What the controller's parts share: its settings, running a blocking management-cluster call
off the event loop, and small helpers for waits, queries and error text.

May touch: asyncio, threading, the Temporal client's errors. No decisions live here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from temporalio.service import RPCError, RPCStatusCode

T = TypeVar("T")


@dataclass(frozen=True)
class ControllerSettings:
    # Every object is reconciled again at least this often, whatever the watch says.
    resync_seconds: float = 60.0
    # At most one status write per object in this window (coalesced; the last state wins).
    status_interval_seconds: float = 2.0
    # How often a deployment that is not yet Ready has its status read again.
    status_poll_seconds: float = 3.0
    # How long the server keeps one watch open (it is reopened from the last version).
    watch_seconds: int = 30
    workers: int = 8
    lease_name: str = "modelfleet-controller"
    lease_namespace: str = "kube-system"
    lease_seconds: int = 15
    renew_seconds: float = 2.0
    retry_seconds: float = 2.0
    # How long one reconcile waits on a teardown before it lets the key come back later.
    teardown_wait_seconds: float = 60.0
    identity: str = field(
        default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}-{random.randrange(1 << 30)}"
    )


def raise_if_cancelling() -> None:
    """Raise ``CancelledError`` if the running task's cancellation was asked for but caught on
    the way (a loop calls this before it waits again, so that a swallowed cancellation still
    ends it)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def in_thread(fn: Callable[[], T]) -> T:
    """Run a blocking call on a daemon thread (a watch can outlive a stopping controller by up
    to its timeout; a daemon thread never holds the process open)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():
            return  # the awaiting task was cancelled
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        result: T | None = None
        error: BaseException | None = None
        try:
            result = fn()
        except BaseException as exc:  # handed to the awaiting task
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, daemon=True, name="modelfleet-controller-io").start()
    return await future


def newer(a: dict[str, Any], b: dict[str, Any]) -> bool:
    try:
        return int(a["metadata"]["resourceVersion"]) >= int(b["metadata"]["resourceVersion"])
    except (KeyError, ValueError, TypeError):
        return True


async def query_or_none(handle: Any, query: Any) -> Any:
    """The workflow's answer, or None when no such workflow runs (not applied yet)."""
    try:
        return await handle.query(query)
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            return None
        raise


async def wait(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


def short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) < 300 else text[:297] + "..."


__all__ = ["ControllerSettings", "in_thread", "newer", "query_or_none", "short", "wait"]
