"""Each worker keeps its Updates to the one-workflow fan-in points (the Fleet, the endpoint
directory) under the server's per-workflow cap of in-flight Updates: a burst of activities
queues in the worker instead of being aborted by the server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from temporalio.service import RPCError, RPCStatusCode

from modelfleet.activities.fleet_updates import MAX_FLEET_UPDATES_IN_FLIGHT, FleetActivities
from modelfleet.activities.serving import MAX_DIRECTORY_UPDATES_IN_FLIGHT, ServingActivities
from modelfleet.adapters.temporal_updates import ProcessCount, UpdateShare, share_of_limit
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


@pytest.mark.parametrize("processes", range(1, 10))
def test_processes_together_stay_under_the_server_cap_with_one_to_spare(processes: int) -> None:
    share = share_of_limit(processes)
    assert 1 <= share <= MAX_FLEET_UPDATES_IN_FLIGHT
    assert processes * share + 1 <= SERVER_CAP  # + a process that joined and has not counted
    assert share_of_limit(processes + 1) <= share


def test_a_process_alone_keeps_the_bound_it_had() -> None:
    assert share_of_limit(1) == MAX_FLEET_UPDATES_IN_FLIGHT
    assert share_of_limit(4) == 2
    assert share_of_limit(0) == MAX_FLEET_UPDATES_IN_FLIGHT  # nobody polls yet: this one


class Counter:
    """The server's answer to "how many worker processes poll", set by the test."""

    def __init__(self, processes: int) -> None:
        self.processes = processes
        self.asked = 0
        self.fail = False

    async def __call__(self) -> int:
        self.asked += 1
        if self.fail:
            raise RPCError("unavailable", RPCStatusCode.UNAVAILABLE, b"")
        return self.processes


async def test_four_processes_hold_two_each_and_one_alone_six() -> None:
    now = [0.0]
    counter = Counter(4)
    share = UpdateShare(count=ProcessCount(counter, every=15, clock=lambda: now[0]))
    client = CountingClient()
    fleet = FleetActivities(client, share=share)  # type: ignore[arg-type]
    await burst(client, [fleet._update("release", i) for i in range(20)])
    assert client.most == 2
    # The others went away; the next count, once the last one is old enough, says so.
    counter.processes = 1
    now[0] = 10.0
    client = CountingClient()
    fleet._client = client  # type: ignore[assignment]
    await burst(client, [fleet._update("release", i) for i in range(20)])
    assert client.most == 2
    assert counter.asked == 1  # not asked again within 15 s
    now[0] = 16.0
    client = CountingClient()
    fleet._client = client  # type: ignore[assignment]
    await burst(client, [fleet._update("release", i) for i in range(20)])
    assert client.most == MAX_FLEET_UPDATES_IN_FLIGHT
    assert counter.asked == 2


async def test_until_the_processes_are_counted_a_process_sends_one_at_a_time() -> None:
    counter = Counter(1)
    counter.fail = True
    now = [0.0]
    share = UpdateShare(count=ProcessCount(counter, every=15, clock=lambda: now[0]))
    client = CountingClient()
    fleet = FleetActivities(client, share=share)  # type: ignore[arg-type]
    await burst(client, [fleet._update("release", i) for i in range(10)])
    assert client.most == 1
    # The count comes back: the share grows and the waiting Updates go in together.
    counter.fail = False
    now[0] = 15.0
    client = CountingClient()
    fleet._client = client  # type: ignore[assignment]
    await burst(client, [fleet._update("release", i) for i in range(10)])
    assert client.most == MAX_FLEET_UPDATES_IN_FLIGHT
