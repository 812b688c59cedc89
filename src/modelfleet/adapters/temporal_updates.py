"""Updates (and queries) sent through the Temporal client to the fleet's shared workflows (the
Fleet, the endpoint directory) and, with start, to any entity workflow.

Two things the SDK leaves to its caller:

- **The server's in-flight limit.** The server admits a bounded number of in-flight Updates per
  workflow (10 by default) and refuses the rest: ``RESOURCE_EXHAUSTED`` "limit on number of
  concurrent in-flight updates", or the Update is aborted (``UNAVAILABLE`` "workflow update was
  aborted") when the run continues-as-new or its workflow task fails under it. Neither was
  applied, so asking again is safe. A per-process bound keeps one worker under the limit, but
  several workers together are not (two workers at 6 each already refuse some), so a refused
  Update is asked again here after a short, jittered, growing pause, as many times as
  ``REFUSED_ATTEMPTS``; after that the error goes to the caller (an activity's retry policy).
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
import random
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio.client import Client, WithStartWorkflowOperation
from temporalio.service import RPCError, RPCStatusCode

T = TypeVar("T")

REFUSED_ATTEMPTS = 8
FIRST_PAUSE_SECONDS = 0.2
LONGEST_PAUSE_SECONDS = 5.0

_LIMIT = "limit on number of concurrent in-flight updates"
_ABORTED = "workflow update was aborted"
_QUERY_BUFFER = "consistent query buffer is full"


def refused_for_load(err: BaseException) -> bool:
    """Whether the server refused the call without doing it: an Update over the in-flight
    limit or aborted, a query over the workflow's query buffer."""
    if not isinstance(err, RPCError):
        return False
    message = str(err)
    if err.status == RPCStatusCode.RESOURCE_EXHAUSTED and (
        _LIMIT in message or _QUERY_BUFFER in message
    ):
        return True
    return _ABORTED in message


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
            if pause is None or not refused_for_load(err):
                raise
            if on_refused is not None:
                on_refused(err)
        await sleep(pause)
    raise AssertionError("unreachable: the last attempt returns or raises")


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
