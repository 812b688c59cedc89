"""Worker processes share the server's in-flight Update limit (issue 22 item 7): each process
counts the worker processes the real dev server sees polling the Fleet's queue, and its share
follows that count."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from modelfleet.adapters.temporal_updates import (
    ProcessCount,
    UpdateShare,
    polling_processes,
    share_of_limit,
)

QUEUE = "share-test-fleet"


@activity.defn(name="noop")
async def noop() -> None:
    return None


@contextlib.asynccontextmanager
async def process(client: Client, identity: str) -> AsyncIterator[None]:
    """A worker process as the server sees it: a connection and a worker of its own."""
    own = await Client.connect(
        client.service_client.config.target_host, namespace=client.namespace, identity=identity
    )
    async with Worker(own, task_queue=QUEUE, activities=[noop]):
        yield


async def counted(client: Client, wanted: int) -> int:
    """The count, once the server has seen ``wanted`` pollers (bounded: 60 s)."""

    async def poll() -> int:
        for _ in range(300):  # the server records a poller when its first poll arrives
            found = await polling_processes(client, QUEUE)
            if found == wanted:
                return found
            await asyncio.sleep(0.2)
        return found

    return await asyncio.wait_for(poll(), 60)


async def test_each_of_four_worker_processes_takes_its_share(dev_client: Client) -> None:
    assert await polling_processes(dev_client, QUEUE) == 0
    async with contextlib.AsyncExitStack() as stack:
        for n in range(4):
            await stack.enter_async_context(process(dev_client, f"worker-{n}@host"))
        assert await counted(dev_client, 4) == 4
        share = UpdateShare(
            count=ProcessCount(lambda: polling_processes(dev_client, QUEUE), every=0)
        )
        async with share.slot():
            assert share.limit == share_of_limit(4) == 2
        assert 4 * share.limit < 10
