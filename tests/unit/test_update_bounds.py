"""Each worker keeps its Updates to the one-workflow fan-in points (the Fleet, the endpoint
directory) under the server's per-workflow cap of in-flight Updates: a burst of activities
queues in the worker instead of being aborted by the server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from modelfleet.activities.fleet_updates import MAX_FLEET_UPDATES_IN_FLIGHT, FleetActivities
from modelfleet.activities.serving import MAX_DIRECTORY_UPDATES_IN_FLIGHT, ServingActivities
from modelfleet.contracts.serving_payloads import EndpointKey

SERVER_CAP = 10  # history.maxInFlightUpdates, the server's default


class CountingClient:
    """Stands in for the Temporal client: every Update blocks until released and the most
    held at once is recorded."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.most = 0
        self.release = asyncio.Event()

    async def _hold(self) -> None:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        await self.release.wait()
        self.in_flight -= 1

    async def execute_update_with_start_workflow(self, *_: Any, **__: Any) -> bool:
        await self._hold()
        return True

    def get_workflow_handle(self, _: str) -> CountingClient:
        return self

    async def execute_update(self, *_: Any, **__: Any) -> int:
        await self._hold()
        return 0


async def burst(client: CountingClient, calls: list[Any]) -> None:
    """Start every call at once; once the loop has run every task as far as it can go (all
    either holding an Update or waiting for a slot), release them."""
    tasks = [asyncio.create_task(call) for call in calls]
    for _ in range(len(calls) + 10):  # single-threaded loop: each pass lets every task advance
        await asyncio.sleep(0)
    client.release.set()
    await asyncio.gather(*tasks)


def test_the_bounds_are_under_the_server_cap() -> None:
    assert MAX_DIRECTORY_UPDATES_IN_FLIGHT < SERVER_CAP
    assert MAX_FLEET_UPDATES_IN_FLIGHT < SERVER_CAP


async def test_endpoint_directory_updates_queue_in_the_worker(tmp_path: Path) -> None:
    client = CountingClient()
    serving = ServingActivities(client, tmp_path)  # type: ignore[arg-type]
    await burst(
        client, [serving.withdraw(EndpointKey(namespace="ns", name=f"r{i}")) for i in range(40)]
    )
    assert client.most == MAX_DIRECTORY_UPDATES_IN_FLIGHT


async def test_fleet_updates_queue_in_the_worker() -> None:
    client = CountingClient()
    fleet = FleetActivities(client)  # type: ignore[arg-type]
    await burst(client, [fleet._update("release", i) for i in range(40)])
    assert client.most == MAX_FLEET_UPDATES_IN_FLIGHT
