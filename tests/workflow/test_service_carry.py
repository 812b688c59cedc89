"""The ModelService workflow carries its whole state (``service.state.ServiceState``) across
continue-as-new: a run continued from another neither watches the directory again nor re-applies
a door whose route is unchanged, reports the same address and creation time, and its delete still
removes the route the first run applied (the doors are carried).

On the real dev server (the time-skipping one never answers an Update that arrives while a run
continues-as-new), with ``reconciles_per_run`` set so that a run continues-as-new every second
reconcile, and health watches bounded at two rounds so that an idle service reconciles."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from test_service import (
    Doubles,
    _endpoint,
    _gateway,
    _service,
    _stop,
    _weights,
    serving_worker,
)

from modelfleet.contracts.serving_payloads import (
    ENDPOINTS_WATCH,
    SERVING_GATEWAY_ADDRESS,
    GatewayAddressRequest,
    ServiceStatus,
    WatchRequest,
    WatchResult,
)
from modelfleet.endpoints.state import EndpointsInput
from modelfleet.endpoints.workflow import EndpointDirectoryWorkflow
from modelfleet.service.state import ServiceInput
from modelfleet.service.workflow import ServiceWorkflow

# Runs the test waits for: the state must survive more than one hand-over.
RUNS = 3
DEADLINE = 60.0


async def _until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Wait (bounded) until ``check`` holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while not await check():
        assert loop.time() < deadline, f"never: {what}"
        await asyncio.sleep(0.1)


@dataclass
class Counting(Doubles):
    """The doubles, counting the directory watches and the door-address reads."""

    watches: list[str] = field(default_factory=list)
    addresses: list[str] = field(default_factory=list)

    @activity.defn(name=ENDPOINTS_WATCH)
    async def watch(self, request: WatchRequest) -> WatchResult:
        self.watches.append(request.watcher)
        return await super().watch(request)

    @activity.defn(name=SERVING_GATEWAY_ADDRESS)
    async def gateway_address(self, request: GatewayAddressRequest) -> str:
        self.addresses.append(request.cluster)
        return await super().gateway_address(request)


async def test_a_continued_service_keeps_its_doors_and_does_not_apply_them_again(
    dev_client: Client,
) -> None:
    client = dev_client
    queue = f"tq-{uuid.uuid4()}"
    directory_id = f"endpoints-{uuid.uuid4()}"
    doubles = Counting(client, directory_id)
    async with serving_worker(doubles, queue):
        directory = await client.start_workflow(
            EndpointDirectoryWorkflow.run, EndpointsInput(), id=directory_id, task_queue=queue
        )
        await directory.execute_update(EndpointDirectoryWorkflow.put_gateway, _gateway())
        await directory.execute_update(EndpointDirectoryWorkflow.put, _endpoint("a-1", dep="a"))
        wid = f"service/ml/svc-{uuid.uuid4()}"
        first = await client.start_workflow(
            ServiceWorkflow.run,
            ServiceInput.of(
                _service([{"selector": {"matchLabels": {"dep": "a"}}}]),
                probe_interval_seconds=0.5,
                # A health watch answers unchanged after two rounds: the service reconciles
                # (and so continues-as-new) without a change.
                watch_bound_seconds=1.0,
                reconciles_per_run=2,
            ),
            id=wid,
            task_queue=queue,
        )
        service = client.get_workflow_handle(wid)

        async def status() -> ServiceStatus:
            result: ServiceStatus = await service.query(ServiceWorkflow.status)
            return result

        async def ready() -> bool:
            return (await status()).phase == "Ready"

        await _until(ready, "routing")
        before = await status()
        assert before.address == "http://gw.front:8080/ml/svc"
        assert len(doubles.routes) == 1

        runs = {first.first_execution_run_id}
        want = RUNS

        async def continued() -> bool:
            runs.add((await service.describe()).run_id)
            return len(runs) >= want

        await _until(continued, f"{RUNS} runs")
        described = await client.get_workflow_handle(wid, run_id=first.result_run_id).describe()
        assert described.status is WorkflowExecutionStatus.CONTINUED_AS_NEW

        # The later runs knew the directory's answer, the door and its address: nothing was
        # watched, applied or read again, and the status is the first run's.
        after = await status()
        assert doubles.watches == [wid]
        assert len(doubles.routes) == 1
        assert doubles.addresses == ["front"]
        assert (after.phase, after.address, after.created) == (
            "Ready",
            before.address,
            before.created,
        )
        assert [(e.name, e.weight) for e in after.endpoints] == [("a-1", 1)]
        assert [(d.cluster, d.address) for d in after.front_doors] == [
            (d.cluster, d.address) for d in before.front_doors
        ]

        # A change still reaches the continued run, and it applies the route once.
        await directory.execute_update(EndpointDirectoryWorkflow.put, _endpoint("a-2", dep="a"))

        async def both() -> bool:
            return len(doubles.routes) == 2 and len(_weights(doubles.routes[-1])) == 2

        await _until(both, "a-2 in the route")
        assert _weights(doubles.routes[-1]) == {"/ml/a-1/": 1, "/ml/a-2/": 1}

        # Delete in a later run still removes what the first run applied.
        want = len(runs) + 1
        await _until(continued, "one more continue-as-new")
        await service.execute_update(ServiceWorkflow.delete)
        ending: WorkflowHandle[Any, ServiceStatus] = client.get_workflow_handle(
            wid, result_type=ServiceStatus
        )
        final = await ending.result()
        assert final.phase == "Deleted"
        assert doubles.deleted[0].kind == "HTTPRoute"
        assert {r.kind for r in doubles.deleted} >= {"HTTPRoute", "Service", "EndpointSlice"}
        await _stop(client, directory_id)
