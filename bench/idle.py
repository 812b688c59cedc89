"""Idle cost of a Ready fleet (issue 11, item 4): N Ready replicas, then an idle window in which
nothing is applied, measured as history events/s and activities/s across every workflow.

Set-up as ``bench/rollout.py`` (whose helpers it uses): a real ``temporal server start-dev``
(headless, SQLite in a temporary directory), the simulated fleet over real HTTP, the modelfleet
worker in this process, a synthetic fleet of ``--clusters`` clusters. ``--deployments`` x
``--replicas`` are rolled out to Ready; after ``--settle`` seconds (every replica registered
with its cluster and baselined by a scan) the idle window of ``--idle`` seconds starts. Every
workflow's events inside the window are counted, per workflow type and per activity type.

The figure the design before this one implies is printed beside it: every Ready replica ran a
``kube.check_ready`` every ``health_interval_seconds`` (30 s) and a ``kube.drift`` every
``drift_resync_seconds`` (300 s), each on a timer (timer 2 events, two workflow tasks 6, the
activity 3: ~11 events per check), on top of the clusters' probes, which both designs run. The
machine's load average is printed at the start and the end of the window: this 2-core machine
is shared, so read the figures with it.

``--services N`` applies an InferenceGateway (front door on the first cluster) and N
ModelServices, the i-th over the i-th deployment's replicas (``--services 0``: none), and reports
what the services wrote in the window: events per service per minute, and the health watches
(``serving.watch_health``) that answered in it. Before issue 22 item 5 a service probed in its
own workflow every probe interval (a probe, a timer, two workflow tasks: ~80 events a minute
measured); ``--probe-seconds`` sets the services' probe interval (default 10 s, as applied).

``--worker-processes N`` runs N more ``modelfleet worker`` processes beside the in-process one,
polling the same task queues, as a real deployment runs its workers: at 1,000 replicas one
process holding the simulated fleet, the bench and every worker slot starves its own workflow
tasks past the SDK's 2 s deadlock detector. With more than one process the Updates the server
refused for its in-flight limit on one workflow (10) are counted in every process's log (issue
22 item 7: each process keeps to its share, so none should be), with the shares the processes
took.

    .venv/bin/python bench/idle.py [--clusters 50] [--deployments 500] [--replicas 2]
        [--idle 60] [--settle 45] [--concurrency 10] [--timeout 1800] [--worker-processes 0]
        [--services 0] [--probe-seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

import rollout as rb
from modelfleet.api.kinds import parse_resource
from modelfleet.applying.serving import apply_serving
from modelfleet.cli.apply import apply_resource
from modelfleet.cli.devenv import DevEnvironment, dev_environment
from modelfleet.cluster.state import ClusterInput
from modelfleet.contracts.serving_payloads import ServiceStatus
from modelfleet.replica.state import ReplicaInput

HEALTH_INTERVAL = ReplicaInput.model_fields["health_interval_seconds"].default
DRIFT_RESYNC = ReplicaInput.model_fields["drift_resync_seconds"].default
PROBE_INTERVAL = ClusterInput.model_fields["probe_interval_seconds"].default
HEALTH_ACTIVITIES = ("kube.scan_replicas", "kube.check_ready", "kube.drift")
EVENTS_PER_POLL = 11  # timer started/fired, two workflow tasks (3 each), the activity (3)


async def ready_replicas(client: Client) -> list[str]:
    query = "ModelfleetKind='ModelReplica' AND ModelfleetPhase='Ready'"
    return [wf.id async for wf in client.list_workflows(query)]


async def events_within(
    client: Client, ids: list[str], t0: datetime, t1: datetime, concurrency: int
) -> Counter[str]:
    """Events with ``t0 <= time <= t1`` in the histories of ``ids``, by event type."""
    out: Counter[str] = Counter()

    async def one(wid: str) -> None:
        history = await client.get_workflow_handle(wid).fetch_history()
        for event in history.events:
            at = event.event_time.ToDatetime(tzinfo=UTC)
            if t0 <= at <= t1:
                out[EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")] += 1

    await rb.bounded(ids, concurrency, one)
    return out


@contextlib.contextmanager
def worker_processes(env: DevEnvironment, count: int, logs: Path) -> Iterator[None]:
    """``count`` ``modelfleet worker`` processes on the same server and credentials, stopped
    (SIGTERM, then SIGKILL) on the way out. The simulated clouds' settings reach them through
    the environment, as they reach the in-process worker."""
    procs = []
    try:
        for i in range(count):
            with (logs / f"worker-{i}.log").open("wb") as log:
                procs.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "modelfleet.cli",
                            "worker",
                            "--address",
                            env.settings.address,
                            "--credentials-dir",
                            str(env.kubeconfig_dir),
                        ],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env={**os.environ},
                    )
                )
        if procs:
            print(f"worker processes: {count} more, logs in {logs}")
        yield
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


REFUSED = "refused by the server (in-flight limit)"
SHARE = "worker process(es) poll"


class Refusals(logging.Handler):
    """The in-process worker's refused Updates and share changes (its log records)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.refused = 0
        self.shares: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith(REFUSED):
            self.refused += 1
        elif SHARE in message:
            self.shares.append(message)


def logged_refusals(logs: Path) -> tuple[int, list[str]]:
    """Refused Updates and share changes in the extra worker processes' logs."""
    refused, shares = 0, []
    for path in sorted(logs.glob("worker-*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if REFUSED in line:
                refused += 1
            elif SHARE in line:
                shares.append(f"{path.name}: {line[line.index(SHARE) - 2 :][:100]}")
    return refused, shares


def gateway() -> dict[str, object]:
    return {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "InferenceGateway",
        "metadata": {"name": "default"},
        "spec": {"cluster": "sim-000"},
    }


def service(index: int) -> dict[str, object]:
    """A ModelService over the ``index``-th deployment's replicas."""
    return {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "ModelService",
        "metadata": {"name": f"svc-{index:04d}", "namespace": rb.NAMESPACE},
        "spec": {
            "endpoints": [{"selector": {"matchLabels": {"model": rb.deployment_name(index)}}}]
        },
    }


async def services_ready(client: Client, count: int, deadline: float) -> None:
    """Until ``count`` services say Ready (each routes its deployment's replicas)."""
    query = "ModelfleetKind='ModelService'"
    while True:
        ready = 0
        async for wf in client.list_workflows(query):
            status = await client.get_workflow_handle(wf.id).query(
                "status", result_type=ServiceStatus
            )
            ready += status.phase == "Ready"
        if ready >= count:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{ready} of {count} services Ready")
        await asyncio.sleep(2)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f} (1/5/15 min, {os.cpu_count()} CPUs)"


async def run(args: argparse.Namespace) -> int:
    total = args.deployments * args.replicas
    nodes = rb.nodes_per_cluster(args.clusters, total)
    deployments = [rb.deployment(i, args.replicas) for i in range(args.deployments)]
    names = [rb.deployment_name(i) for i in range(args.deployments)]
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    print(f"machine: {rb.machine()}")
    refusals = Refusals()
    worker_log = logging.getLogger("modelfleet.worker")
    worker_log.addHandler(refusals)
    worker_log.setLevel(logging.INFO)
    with tempfile.TemporaryDirectory(prefix="modelfleet-bench-idle-") as tmp:
        state = Path(tmp)
        paths = rb.write_fleet(state / "manifests", args.clusters, nodes)
        async with dev_environment(state, paths, ui=False, startup_seconds=0) as env:
            with worker_processes(env, args.worker_processes, state):
                client = env.client
                print(f"code: modelfleet {rb.code_revision()}")
                print(
                    f"fleet: {args.clusters} clusters; {args.deployments} deployments x"
                    f" {args.replicas} replicas = {total} replicas"
                )
                await rb.wait_clusters(env, args.clusters, time.monotonic() + 300)
                began = time.monotonic()
                deadline = began + args.timeout
                await rb.bounded(
                    deployments, args.concurrency, lambda md: apply_resource(client, md)
                )
                try:
                    await rb.wait_ready(client, names, total, deadline, args.concurrency)
                    print(f"{total} replicas Ready in {time.monotonic() - began:.1f} s")
                except TimeoutError as exc:
                    # A loaded machine may not place the last few in time: measure the Ready ones
                    # (their own histories below) and say how many were not.
                    print(f"not all Ready after {args.timeout:g} s ({exc}); measuring anyway")
                if args.services:
                    await apply_serving(client, parse_resource(gateway()))
                    for i in range(args.services):
                        await apply_serving(
                            client,
                            parse_resource(service(i)),
                            probe_interval_seconds=args.probe_seconds,
                        )
                    await services_ready(client, args.services, time.monotonic() + 300)
                    print(f"{args.services} services Ready")
                print(f"settling {args.settle:g} s (registrations, first scans)")
                await asyncio.sleep(args.settle)

                ready = await ready_replicas(client)
                print(f"{len(ready)} of {total} replicas Ready at the start of the window")
                print(f"idle window: {args.idle:g} s; load average at start: {load()}")
                t0 = datetime.now(UTC)
                await asyncio.sleep(args.idle)
                t1 = datetime.now(UTC)
                print(f"load average at end: {load()}")
                window = (t1 - t0).total_seconds()
                stats = await rb.gather_histories(client, t0, t1, lambda _: True, args.concurrency)
                still = set(await ready_replicas(client))
                steady = [w for w in ready if w in still]
                own = await events_within(client, steady, t0, t1, args.concurrency)
            logged, shares = logged_refusals(state)

    print()
    print(f"== idle fleet: {total} Ready replicas on {args.clusters} clusters, {window:.1f} s ==")
    events, activities = stats.total_events, stats.total_activities
    print(
        f"  events: {events} ({events / window:.2f}/s); activities: {activities}"
        f" ({activities / window:.2f}/s)"
    )
    for kind, count in sorted(stats.events.items()):
        print(f"    {kind}: {count} events in {stats.runs[kind]} workflow(s)")
    for name, a in sorted(stats.activities.items()):
        print(f"    {name}: {a.count} ({a.count / window:.2f}/s)")
    print(
        f"  the {len(steady)} replicas Ready throughout the window wrote {sum(own.values())}"
        f" events in their own histories ({sum(own.values()) / max(1, len(steady)):.3f} per"
        f" replica; by type: {dict(own)})"
    )
    if args.services:
        events_of = stats.events.get("ModelService", 0)
        per_minute = events_of / args.services / (window / 60)
        watches = stats.activities.get("serving.watch_health")
        print(
            f"  the {args.services} ModelService(s) wrote {events_of} events:"
            f" {per_minute:.2f} per service per minute (target <= 1; before: ~80 measured,"
            f" {(3 + 2 + 6) * 60 / args.probe_seconds:.0f} implied by a probe, a timer and two"
            f" workflow tasks every {args.probe_seconds:g} s); health watches answered in the"
            f" window: {watches.count if watches else 0}"
        )
    print()
    print(f"== Updates refused for the in-flight limit, {1 + args.worker_processes} process(es) ==")
    print(f"  in-process worker: {refusals.refused}; other processes: {logged}")
    for line in [*refusals.shares, *shares]:
        print(f"    {line}")
    print()
    print("== the per-replica polling it replaces (implied by its intervals) ==")
    old_activities = total / HEALTH_INTERVAL + total / DRIFT_RESYNC
    print(
        f"  {total} x (1/{HEALTH_INTERVAL} s check + 1/{DRIFT_RESYNC} s drift) ="
        f" {old_activities:.2f} activities/s, ~{old_activities * EVENTS_PER_POLL:.0f} events/s"
        " in replica histories, besides the cluster probes"
        f" ({args.clusters}/{PROBE_INTERVAL} s = {args.clusters / PROBE_INTERVAL:.2f}/s)"
    )
    # Replica health either way: the scans now; a replica's own checks and comparisons (the
    # fallback, or what the design before ran). The deployments' resync and the probes are
    # the same in both designs and left out.
    health = {n: stats.activities[n].count for n in HEALTH_ACTIVITIES if n in stats.activities}
    now = sum(health.values()) / window
    print(
        f"  measured now: replica-health activities {health or 0} = {now:.2f}/s"
        f" vs {old_activities:.2f}/s ({old_activities / max(now, 1e-9):.1f}x fewer)"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--clusters", type=int, default=50)
    parser.add_argument("--deployments", type=int, default=500)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of idle measured")
    parser.add_argument("--settle", type=float, default=45.0, help="seconds before the window")
    parser.add_argument("--concurrency", type=int, default=10, help="applies in flight")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds to all Ready")
    parser.add_argument(
        "--worker-processes", type=int, default=0, help="more worker processes beside this one"
    )
    parser.add_argument("--services", type=int, default=0, help="ModelServices, one a deployment")
    parser.add_argument(
        "--probe-seconds", type=float, default=10.0, help="services' probe interval"
    )
    args = parser.parse_args(argv)
    for name in ("clusters", "deployments", "replicas", "concurrency"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if not 0 <= args.services <= args.deployments:
        parser.error("--services must be between 0 and --deployments")
    if args.worker_processes < 0:
        parser.error("--worker-processes must be 0 or more")
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    rb.tally_sdk_logs()
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
