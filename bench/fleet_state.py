"""Decoding the Fleet's carried state (issue 22 item 2): what the first workflow task of every new
Fleet run, and every replay, does before anything else.

Builds the state the Fleet carries across continue-as-new at ``--replicas`` one-GPU replicas on
``--clusters`` x 8 pools, as ``bench/fleet.py --task-times`` leaves it (the clusters in their
carried form with shared pool layouts, the replicas as compact rows of 50-replica deployments
with the shape a real placement gives them, the 50 carried decisions, 32 remembered answers),
serialises it with the project's data converter (``worker.client.data_converter``) and times,
``--repeat`` times each: encoding, decoding (``from_payloads``, as the SDK's
``_make_workflow_input``) with the garbage collector on and off, decoding plus the Fleet
workflow's ``__init__``, and the whole first workflow task of a run with that input as the
SDK's Replayer runs it (sandbox, activation, decoding, ``__init__``, ``run`` to its first wait;
a worker replaying a new run does the same), beside the same task with an empty state.

Same-run comparison: ``--base-src DIR`` (another checkout's ``src``, e.g. main's) measures that
code too, in a child process of its own per round, alternating with this checkout's, and prints
base/this ratios of the medians.

    .venv/bin/python bench/fleet_state.py [--clusters 1000] [--replicas 10000]
        [--repeat 15] [--rounds 3] [--base-src /tmp/wt-base/src]

The child (``--child``) imports ``modelfleet`` from its ``PYTHONPATH``; it only uses what both
checkouts have.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def carried_state(clusters: int, replicas: int, batch: int) -> Any:
    """The Fleet's continue-as-new input at this size (a FleetInput)."""
    sys.path.insert(0, str(ROOT / "tests" / "workflow"))
    from fleet_scale_support import classes, cluster_entries, one_gpu_deployment

    from modelfleet.cel.evaluator import SelectorEvaluator
    from modelfleet.contracts.fleet_state import (
        CompactAnswer,
        CompactLedger,
        DeploymentRows,
        cluster_entry,
        cluster_record,
        replica_shape,
        shape_key,
    )
    from modelfleet.contracts.status import Decision
    from modelfleet.contracts.workflow_inputs import FleetInput, FleetLimits, FleetState
    from modelfleet.scheduling.fleet_placement import ObservedCluster, live_snapshot
    from modelfleet.scheduling.placement import place

    entries = cluster_entries(clusters)
    compact = {name: cluster_entry(cluster_record(e, {})) for name, e in entries.items()}
    # One real placement gives the replicas' shape (all of them share it, as in the bench).
    first = next(iter(entries))
    record = cluster_record(entries[first], {})
    snapshot = live_snapshot(
        classes(),
        {
            first: ObservedCluster(
                spec=record.spec, ready=True, gateway_address=record.gateway_address, ready_nodes={}
            )
        },
    )
    dep = one_gpu_deployment("fill-00000", "team-0")
    replica = place(dep, snapshot, [], evaluator=SelectorEvaluator(), desired=1).placed[0]
    shape = replica_shape(replica)
    key = shape_key(shape)
    names = sorted(entries)
    groups = []
    for d in range(-(-replicas // batch)):
        rows = [
            (names[(d * batch + i) % clusters], i, key, (f"gpu-{(d + i) % 8}",), "")
            for i in range(min(batch, replicas - d * batch))
        ]
        groups.append(DeploymentRows(namespace=f"team-{d % 7}", name=f"fill-{d:05d}", rows=rows))
    at = datetime(2026, 11, 28, tzinfo=UTC)
    decisions = [
        Decision(
            at=at,
            namespace=g.namespace,
            deployment=g.name,
            desired=len(g.rows),
            placed=[f"{g.name}-{i}" for i in range(20)] + [f"... and {len(g.rows) - 20} more"],
            summary=f"placed {len(g.rows)}",
        )
        for g in groups[-50:]
    ]
    remembered = {
        f"fill-{g.name}": CompactAnswer(
            at=at,
            namespace=g.namespace,
            deployment=g.name,
            shapes={key: shape},
            placed=g.rows,
            summary=f"placed {len(g.rows)}",
        )
        for g in groups[-32:]
    }
    state = FleetState(
        classes=classes(),
        cluster_entries={name: entry for name, (entry, _, _) in compact.items()},
        layouts={k: layout for _, k, layout in compact.values()},
        ledger=CompactLedger(shapes={key: shape}, deployments=groups),
        decisions=decisions,
        remembered=remembered,
        version=2 * len(groups),
    )
    return FleetInput(state=state, limits=FleetLimits())


def timed(fn: Any, repeat: int) -> tuple[list[float], float]:
    """``fn``'s times (ms), and the garbage collector's time within them (ms, all runs)."""
    gc_ms = 0.0
    began = 0.0

    def watch(phase: str, info: dict[str, Any]) -> None:
        nonlocal gc_ms, began
        if phase == "start":
            began = time.perf_counter()
        else:
            gc_ms += (time.perf_counter() - began) * 1000

    gc.callbacks.append(watch)
    times = []
    try:
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1000)
    finally:
        gc.callbacks.remove(watch)
    return times, gc_ms


def first_task_history(payload: Any, run: int) -> Any:
    """A Fleet run's history up to its first workflow task, with ``payload`` as its input: what a
    new run after a continue-as-new (or a worker replaying it) starts from."""
    from google.protobuf.duration_pb2 import Duration
    from google.protobuf.timestamp_pb2 import Timestamp
    from temporalio.api.common.v1 import Payloads, WorkflowType
    from temporalio.api.enums.v1 import EventType
    from temporalio.api.history.v1 import (
        HistoryEvent,
        WorkflowExecutionStartedEventAttributes,
        WorkflowTaskScheduledEventAttributes,
        WorkflowTaskStartedEventAttributes,
    )
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.client import WorkflowHistory

    at = Timestamp()
    at.FromDatetime(datetime(2026, 11, 28, 12, tzinfo=UTC))
    queue = TaskQueue(name="fleet")
    ten = Duration(seconds=10)
    started = WorkflowExecutionStartedEventAttributes(
        workflow_type=WorkflowType(name="Fleet"),
        task_queue=queue,
        input=Payloads(payloads=[payload]),
        workflow_task_timeout=ten,
        attempt=1,
        original_execution_run_id=f"run-{run}",
        first_execution_run_id=f"run-{run}",
    )
    events = [
        HistoryEvent(
            event_id=1,
            event_time=at,
            event_type=EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
            workflow_execution_started_event_attributes=started,
        ),
        HistoryEvent(
            event_id=2,
            event_time=at,
            event_type=EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
            workflow_task_scheduled_event_attributes=WorkflowTaskScheduledEventAttributes(
                task_queue=queue, start_to_close_timeout=ten, attempt=1
            ),
        ),
        HistoryEvent(
            event_id=3,
            event_time=at,
            event_type=EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
            workflow_task_started_event_attributes=WorkflowTaskStartedEventAttributes(
                scheduled_event_id=2
            ),
        ),
    ]
    return WorkflowHistory(f"fleet-{run}", events)


def replay_times(converter: Any, payload: Any, repeat: int) -> list[float]:
    """The Fleet's first workflow task replayed by the SDK's Replayer (sandbox, activation,
    decoding, ``__init__``, ``run`` to its first wait), ``repeat`` times (ms)."""
    import asyncio

    from temporalio.worker import Replayer

    from modelfleet.fleet.workflow import FleetWorkflow

    async def go() -> list[float]:
        replayer = Replayer(workflows=[FleetWorkflow], data_converter=converter)
        times = []
        for run in range(repeat):
            history = first_task_history(payload, run)
            t0 = time.perf_counter()
            result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
            times.append((time.perf_counter() - t0) * 1000)
            assert result.replay_failure is None, result.replay_failure
        return times

    return asyncio.run(go())


def child(args: argparse.Namespace) -> None:
    import modelfleet
    from modelfleet.contracts.workflow_inputs import FleetInput, FleetState
    from modelfleet.fleet.workflow import FleetWorkflow
    from modelfleet.worker.client import data_converter

    data = data_converter()
    converter = data.payload_converter
    value = carried_state(args.clusters, args.replicas, args.batch)
    (payload,) = converter.to_payloads([value])
    # The decoded state is equal to what was sent.
    (back,) = converter.from_payloads([payload], [FleetInput])
    assert back == value

    def decode() -> None:
        converter.from_payloads([payload], [FleetInput])

    def start() -> None:
        (arg,) = converter.from_payloads([payload], [FleetInput])
        FleetWorkflow(arg)

    out: dict[str, Any] = {"src": str(Path(modelfleet.__file__).parents[1])}
    out["bytes"] = len(payload.data)
    out["encode"], _ = timed(lambda: converter.to_payloads([value]), args.repeat)
    out["decode"], out["decode_gc"] = timed(decode, args.repeat)
    out["start"], out["start_gc"] = timed(start, args.repeat)
    gc.disable()
    out["decode_nogc"], _ = timed(decode, args.repeat)
    gc.enable()
    out["replay"] = replay_times(data, payload, args.repeat)
    # The floor: the same first task with an empty state.
    (empty,) = converter.to_payloads([FleetInput(state=FleetState())])
    out["replay_empty"] = replay_times(data, empty, args.repeat)
    print(json.dumps(out))


def run_child(src: Path, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child"]
    for name in ("clusters", "replicas", "batch", "repeat"):
        command += [f"--{name}", str(getattr(args, name))]
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"child for {src} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def summary(r: dict[str, Any]) -> str:
    med = {
        k: statistics.median(r[k])
        for k in ("encode", "decode", "decode_nogc", "start", "replay", "replay_empty")
    }
    return (
        f"decode median {med['decode']:.1f} ms (max {max(r['decode']):.1f}, GC "
        f"{r['decode_gc'] / len(r['decode']):.1f} ms/run), without GC {med['decode_nogc']:.1f}"
        f" ms; decode + Fleet __init__ {med['start']:.1f} ms (max {max(r['start']):.1f}); "
        f"encode {med['encode']:.1f} ms; first workflow task replayed {med['replay']:.0f} ms "
        f"(max {max(r['replay']):.0f}; with an empty state {med['replay_empty']:.0f} ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--replicas", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base-src", type=Path, help="another checkout's src to compare with")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    this = ROOT / "src"
    print(
        f"bench/fleet_state.py {' '.join(sys.argv[1:])}; {args.clusters} clusters, "
        f"{args.replicas} replicas, {args.repeat} times each; {load()}"
    )
    sides = [("this", this)] + ([("base", args.base_src.resolve())] if args.base_src else [])
    results: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in sides}
    for n in range(args.rounds):
        # Alternate which goes first, so a change in load falls on both.
        for name, src in sides if n % 2 == 0 else sides[::-1]:
            r = run_child(src, args)
            results[name].append(r)
            print(f"round {n + 1} {name:4} ({src}): {r['bytes'] / 1024:.0f} KiB; {summary(r)}")
            print(f"  {load()}")
    if args.base_src:
        for key, what in (
            ("decode", "decode"),
            ("decode_nogc", "decode without GC"),
            ("start", "decode + Fleet __init__"),
            ("replay", "first workflow task replayed"),
            ("encode", "encode"),
        ):
            base = statistics.median(x for r in results["base"] for x in r[key])
            mine = statistics.median(x for r in results["this"] for x in r[key])
            print(
                f"{what}: base {base:.1f} ms, this {mine:.1f} ms, base/this {base / mine:.2f}x "
                f"(medians over all rounds)"
            )
    print(f"after: {load()}")


if __name__ == "__main__":
    main()
