"""Updates (and queries) sent through the Temporal client to the fleet's shared workflows (the
Fleet, the endpoint directory) and, with start, to any entity workflow.

Two things the SDK leaves to its caller:

- **The server's in-flight limit.** The server admits a bounded number of in-flight Updates per
  workflow (10 by default) and refuses the rest: ``RESOURCE_EXHAUSTED`` "limit on number of
  concurrent in-flight updates", or the Update is aborted (``UNAVAILABLE`` "workflow update was
  aborted") when the run continues-as-new or its workflow task fails under it. Neither was
  applied, so asking again is safe. Each worker process keeps its Updates to such a workflow
  under its share of the limit (``UpdateShare``: the limit divided among the worker processes
  the server sees polling, so that N processes together stay under it); a refused Update is
  still asked again here after a short, jittered, growing pause (processes joining at once, a
  caller outside the workers), as many times as ``REFUSED_ATTEMPTS``; after that the error goes
  to the caller (an activity's retry policy).
  Queries of those workflows meet the same kind of limit (RESOURCE_EXHAUSTED "consistent query
  buffer is full" while a workflow task is running) and are asked again the same way.
- **The start operation's own outcome.** Update-with-start settles a future of the start
  operation that nobody awaits when the Update fails; asyncio then prints "Future exception
  was never retrieved" with a traceback into the log at garbage collection. It is retrieved
  here, whatever happened.

Side effects: Temporal client calls only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WithStartWorkflowOperation
from temporalio.service import RPCError, RPCStatusCode

T = TypeVar("T")

log = logging.getLogger("modelfleet.worker")

REFUSED_ATTEMPTS = 8
# history.maxInFlightUpdates, the server's default per workflow.
SERVER_UPDATE_LIMIT = 10
# One process alone keeps this many in flight: room under the limit for a process joining and
# for Updates sent from outside the workers.
MOST_PER_PROCESS = 6
# How long a count of the worker processes is used before the server is asked again.
COUNT_SECONDS = 5.0
FIRST_PAUSE_SECONDS = 0.2
LONGEST_PAUSE_SECONDS = 5.0

_LIMIT = "limit on number of concurrent in-flight updates"
_ABORTED = "workflow update was aborted"
_QUERY_BUFFER = "consistent query buffer is full"


def refusal(err: BaseException) -> str | None:
    """Why the server refused the call without doing it, or None if it did not: an Update over
    the in-flight limit (``in-flight limit``) or aborted (``aborted``), a query over the
    workflow's query buffer (``query buffer``)."""
    if not isinstance(err, RPCError):
        return None
    message = str(err)
    if err.status == RPCStatusCode.RESOURCE_EXHAUSTED:
        if _LIMIT in message:
            return "in-flight limit"
        if _QUERY_BUFFER in message:
            return "query buffer"
    return "aborted" if _ABORTED in message else None


def refused_for_load(err: BaseException) -> bool:
    """Whether the server refused the call without doing it (``refusal``)."""
    return refusal(err) is not None


def pauses(attempts: int = REFUSED_ATTEMPTS, rng: random.Random | None = None) -> list[float]:
    """The pauses between ``attempts`` tries: doubling from ``FIRST_PAUSE_SECONDS`` up to
    ``LONGEST_PAUSE_SECONDS``, each jittered to 50-100% so that workers refused together do
    not come back together."""
    rng = rng or random.Random()
    out = []
    pause = FIRST_PAUSE_SECONDS
    for _ in range(attempts - 1):
        out.append(pause * rng.uniform(0.5, 1.0))
        pause = min(pause * 2, LONGEST_PAUSE_SECONDS)
    return out


async def asked_again_when_refused(
    call: Callable[[], Awaitable[T]],
    *,
    on_refused: Callable[[BaseException], None] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """``await call()``, asked again after a pause while the server refuses it for load."""
    for pause in [*pauses(), None]:
        try:
            return await call()
        except RPCError as err:
            reason = refusal(err)
            if pause is None or reason is None:
                raise
            # Counted by bench/idle.py --worker-processes: no "in-flight limit" while the
            # processes keep to their shares.
            log.info("refused by the server (%s), asked again in %.1f s", reason, pause)
            if on_refused is not None:
                on_refused(err)
        await sleep(pause)
    raise AssertionError("unreachable: the last attempt returns or raises")


def share_of_limit(
    processes: int, *, limit: int = SERVER_UPDATE_LIMIT, most: int = MOST_PER_PROCESS
) -> int:
    """One process's share of a workflow's in-flight Update limit when ``processes`` worker
    processes send them: together under the limit with one to spare (a process that joins
    starts at one slot before it has counted), never below one and never above ``most``."""
    return max(1, min(most, (limit - 1) // max(1, processes)))


async def polling_processes(client: Client, task_queue: str) -> int:
    """How many worker processes the server has seen polling ``task_queue`` for activities
    recently (distinct identities; one process's workers share its client's identity)."""
    found = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
        )
    )
    return len({poller.identity for poller in found.pollers})


class ProcessCount:
    """The number of worker processes, asked of the server at most every ``COUNT_SECONDS``
    (shared by every ``UpdateShare`` of a process). Until it is first known a process counts
    the most there could be for a share of one; if asking fails, the last count stands."""

    def __init__(
        self,
        count: Callable[[], Awaitable[int]],
        *,
        every: float = COUNT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._count = count
        self._every = every
        self._clock = clock
        self._asked_at: float | None = None
        self._lock = asyncio.Lock()
        self.processes: int | None = None

    async def current(self) -> int | None:
        async with self._lock:
            now = self._clock()
            if self._asked_at is None or now - self._asked_at >= self._every:
                self._asked_at = now
                try:
                    self.processes = await self._count()
                except (RPCError, OSError) as err:
                    log.info("could not count the worker processes: %s", err)
        return self.processes


class UpdateShare:
    """A bound on this process's in-flight Updates to one workflow that follows the number of
    worker processes (``share_of_limit``); a fixed bound when ``count`` is None."""

    def __init__(self, fixed: int = MOST_PER_PROCESS, count: ProcessCount | None = None) -> None:
        self._count = count
        self.limit = fixed if count is None else 1
        self.in_flight = 0
        self._changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        processes = None if self._count is None else await self._count.current()
        async with self._changed:
            if processes is not None and share_of_limit(processes) != self.limit:
                self.limit = share_of_limit(processes)
                log.info(
                    "%d worker process(es) poll: this one sends at most %d Updates at once to"
                    " each shared workflow",
                    processes,
                    self.limit,
                )
                self._changed.notify_all()  # a larger share lets waiters in now
            await self._changed.wait_for(lambda: self.in_flight < self.limit)
            self.in_flight += 1
        try:
            yield
        finally:
            async with self._changed:
                self.in_flight -= 1
                self._changed.notify_all()


async def update_with_start(
    client: Client,
    update: Any,
    arg: Any,
    start: WithStartWorkflowOperation[Any, Any],
    *,
    result_type: type | None = None,
    rpc_timeout: timedelta | None = None,
) -> Any:
    """One Update-with-Start; the start operation's outcome is always retrieved."""
    try:
        return await client.execute_update_with_start_workflow(
            update,
            arg,
            start_workflow_operation=start,
            result_type=result_type,
            rpc_timeout=rpc_timeout,
        )
    finally:
        await _retrieve_start(start)


async def _retrieve_start(start: WithStartWorkflowOperation[Any, Any]) -> None:
    # Settled before the call returns or raises in every path seen; if it ever is not, a
    # moment's wait and a cancel, rather than an Update call held open on it.
    with contextlib.suppress(Exception):
        await asyncio.wait_for(start.workflow_handle(), 0.05)
