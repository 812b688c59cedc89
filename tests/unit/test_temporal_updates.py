"""Updates to the fleet's shared workflows survive the server's in-flight limit, and
update-with-start never leaves an unretrieved future behind (``adapters.temporal_updates``)."""

from __future__ import annotations

import asyncio
import gc
import random
from typing import Any

import pytest
from temporalio.client import WithStartWorkflowOperation
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from modelfleet.adapters.temporal_updates import (
    LONGEST_PAUSE_SECONDS,
    REFUSED_ATTEMPTS,
    asked_again_when_refused,
    pauses,
    refused_for_load,
    update_with_start,
)

LIMIT = RPCError(
    "limit on number of concurrent in-flight updates has been reached (10)",
    RPCStatusCode.RESOURCE_EXHAUSTED,
    b"",
)
ABORTED = RPCError("workflow update was aborted", RPCStatusCode.UNAVAILABLE, b"")
QUERY_BUFFER = RPCError(
    "consistent query buffer is full, this may be caused by too many queries and workflow not"
    " able to process query fast enough",
    RPCStatusCode.RESOURCE_EXHAUSTED,
    b"",
)
NOT_FOUND = RPCError("workflow not found", RPCStatusCode.NOT_FOUND, b"")
OTHER_EXHAUSTED = RPCError("namespace rate limit exceeded", RPCStatusCode.RESOURCE_EXHAUSTED, b"")


def test_only_refusals_that_applied_nothing_count() -> None:
    assert refused_for_load(LIMIT)
    assert refused_for_load(ABORTED)
    assert refused_for_load(QUERY_BUFFER)
    assert not refused_for_load(NOT_FOUND)
    assert not refused_for_load(OTHER_EXHAUSTED)
    assert not refused_for_load(ValueError("limit on number of concurrent in-flight updates"))


def test_pauses_double_up_to_the_longest_and_are_jittered() -> None:
    first = pauses(rng=random.Random(1))
    second = pauses(rng=random.Random(2))
    assert len(first) == REFUSED_ATTEMPTS - 1
    assert first != second  # jittered: workers refused together come back apart
    assert all(0 < p <= LONGEST_PAUSE_SECONDS for p in first)
    ceilings = [min(0.2 * 2**i, LONGEST_PAUSE_SECONDS) for i in range(len(first))]
    assert all(c / 2 <= p <= c for p, c in zip(first, ceilings, strict=True))


class Flaky:
    """Refuses the first ``refusals`` calls with ``error``, then answers."""

    def __init__(self, refusals: int, error: RPCError = LIMIT) -> None:
        self.refusals = refusals
        self.error = error
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.refusals:
            raise self.error
        return "answer"


async def no_sleep(_: float) -> None:
    return None


async def test_a_refused_update_is_asked_again_until_answered() -> None:
    call = Flaky(3)
    seen: list[BaseException] = []
    assert await asked_again_when_refused(call, on_refused=seen.append, sleep=no_sleep) == "answer"
    assert call.calls == 4
    assert seen == [LIMIT] * 3


async def test_other_errors_go_to_the_caller_at_once() -> None:
    call = Flaky(1, NOT_FOUND)
    with pytest.raises(RPCError, match="not found"):
        await asked_again_when_refused(call, sleep=no_sleep)
    assert call.calls == 1


async def test_refusals_past_the_attempts_go_to_the_caller() -> None:
    call = Flaky(REFUSED_ATTEMPTS + 5, ABORTED)
    with pytest.raises(RPCError, match="aborted"):
        await asked_again_when_refused(call, sleep=no_sleep)
    assert call.calls == REFUSED_ATTEMPTS


class StartingClient:
    """Settles the start operation as the SDK does, then fails or answers the Update."""

    def __init__(self, refuse: bool) -> None:
        self.refuse = refuse

    async def execute_update_with_start_workflow(
        self, *_: Any, start_workflow_operation: Any, **__: Any
    ) -> str:
        if self.refuse:
            # A fresh error each time: a shared one's traceback would keep the future alive.
            error = RPCError(str(LIMIT), LIMIT.status, b"")
            start_workflow_operation._workflow_handle.set_exception(error)
            raise error
        start_workflow_operation._workflow_handle.set_result("handle")
        return "answer"


@pytest.mark.parametrize("refuse", [False, True])
async def test_update_with_start_leaves_no_unretrieved_future(refuse: bool) -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: reported.append(context))
    try:

        async def one() -> None:
            start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
                "Some",
                id="some",
                task_queue="q",
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            )
            client: Any = StartingClient(refuse)
            try:
                assert await update_with_start(client, "put", None, start) == "answer"
            except RPCError:
                assert refuse

        await one()
        gc.collect()  # an unretrieved future reports itself when collected
    finally:
        loop.set_exception_handler(previous)
    assert [c.get("message") for c in reported] == []
