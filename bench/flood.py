"""A flood of deployments (issue 22, items 3 and 4): N one-GPU ModelDeployments applied at once
with the real CLI (``modelfleet apply -f DIR``) to the quickstart fleet (3 clusters, 50 GPUs:
most of them cannot fit and end Pending), while ``modelfleet get clusters`` and ``modelfleet
get deployments -A`` run again and again as a user would. Prints how long each read took (wall
clock of the CLI process, its ~1 s start-up included), which failed, how fast apply handed the
documents over, how the deployments' phases evolved, and, at the end, the failed or timed-out
workflow tasks of the Fleet, the RolloutSlots workflow and every deployment.

Set-up as ``bench/rollout.py``: ``dev_environment`` (a real ``temporal server start-dev``,
SQLite in a temporary directory, the simulated quickstart fleet over real HTTP, the worker in
this process), with ``MODELFLEET_ROLLOUT_SLOTS`` = ``--slots``. The apply and the reads are
subprocesses (separate Python processes, as users run them). The load average is printed at the
start and the end: this 2-core machine is shared, so read the figures with it.

    .venv/bin/python bench/flood.py [--deployments 1000] [--slots 20] [--rate 20] [--every 5]
        [--timeout 1800] [--startup 0.3] [--hold 0] [--compare] [--delete]

``--hold S`` keeps reading for S seconds once every deployment is Ready or Pending: the Pending
ones keep trying to be placed (a pass a minute each), which is load too. Once settled, every
Pending deployment's status is asked for (16 at a time, 8 s each) and its summary must carry the
scheduler's reason (``0/3 clusters fit: ...``): the reasons are counted and printed, and a Pending
deployment without one fails the run. ``--delete`` then runs ``modelfleet delete -f DIR`` (as a
user cleans up) and times it until no deployment workflow of the flood is left running.
``--compare`` also times ``get deployments -A -o wide`` each round: the same list asking every
deployment's workflow (the plain table reads visibility alone), a same-run comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from modelfleet.api.kinds import parse_resource
from modelfleet.cli.devenv import dev_environment
from modelfleet.contracts import search
from modelfleet.contracts.ids import FLEET_ID, ROLLOUT_SLOTS_ID, deployment_id
from modelfleet.contracts.status import DeploymentStatus
from modelfleet.deployment.workflow import DeploymentWorkflow
from modelfleet.worker.tuning import Tuning

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "examples" / "quickstart"
NS = "flood"
FAILED_TASKS = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
}


def deployment_doc(index: int) -> dict[str, Any]:
    """The quickstart's one-GPU deployment, named for ``index``."""
    doc: dict[str, Any] = yaml.safe_load((QUICKSTART / "qwen3-8b.yaml").read_text().split("---")[0])
    doc["metadata"] = {"name": f"f{index:04d}", "namespace": NS}
    doc["spec"]["replicas"] = 1
    parse_resource(doc)  # valid, or the bench stops here
    return doc


@dataclass
class Read:
    at: float  # seconds since the apply started
    verb: str
    seconds: float
    code: int
    tail: str = ""


@dataclass
class Run:
    reads: list[Read] = field(default_factory=list)
    phases: list[tuple[float, Counter[str]]] = field(default_factory=list)


async def cli(address: str, *args: str) -> tuple[int, str]:
    env = {**os.environ, "MODELFLEET_TEMPORAL_ADDRESS": address, "COLUMNS": "200"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "modelfleet.cli",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def phases(client: Client) -> Counter[str]:
    """Deployments by phase, from visibility (the ModelfleetPhase search attribute)."""
    found: Counter[str] = Counter()
    async for w in client.list_workflows(
        f"ModelfleetKind='ModelDeployment' AND ModelfleetNamespace='{NS}' "
        "AND ExecutionStatus='Running'"
    ):
        phase = w.typed_search_attributes.get(search.PHASE)
        found[str(phase or "-")] += 1
    return found


async def pending_reasons(client: Client) -> tuple[Counter[str], list[str]]:
    """Each Pending deployment's reason, as its status summary gives it: the reasons by their
    text up to the first ';' (the most common cause, e.g. ``0/3 clusters fit: 3 no pool has 1
    free device``), and the deployments whose summary does not start with a scheduler's
    verdict (``N/M clusters fit``) or whose workflow did not answer."""
    names = []
    async for w in client.list_workflows(
        f"ModelfleetKind='ModelDeployment' AND ModelfleetNamespace='{NS}' "
        "AND ExecutionStatus='Running' AND ModelfleetPhase='Pending'"
    ):
        names.append(w.id)
    reasons: Counter[str] = Counter()
    without: list[str] = []
    gate = asyncio.Semaphore(16)

    async def one(wid: str) -> None:
        async with gate:
            try:
                handle = client.get_workflow_handle(wid)
                status: DeploymentStatus = await asyncio.wait_for(
                    handle.query(DeploymentWorkflow.status), 8
                )
            except Exception as exc:
                without.append(f"{wid}: no answer ({type(exc).__name__})")
                return
        head = status.summary.split(";", 1)[0].strip()
        if status.phase != "Pending":
            return  # placed since the list was read
        if " clusters fit" not in head.split(":", 1)[0]:
            without.append(f"{wid}: {status.summary[:120]!r}")
            return
        reasons[head] += 1

    await asyncio.gather(*(one(w) for w in names))
    return reasons, without


async def running_deployments(client: Client) -> int:
    count = await client.count_workflows(
        f"ModelfleetKind='ModelDeployment' AND ModelfleetNamespace='{NS}' "
        "AND ExecutionStatus='Running'"
    )
    return count.count


async def failed_tasks(client: Client, workflow_ids: list[str]) -> Counter[str]:
    out: Counter[str] = Counter()
    gate = asyncio.Semaphore(16)

    async def one(wid: str) -> None:
        async with gate:
            history = await client.get_workflow_handle(wid).fetch_history()
        kind = wid.split("/", 1)[0]
        out[kind] += sum(1 for e in history.events if e.event_type in FAILED_TASKS)

    await asyncio.gather(*(one(w) for w in workflow_ids))
    return out


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min)"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def bench(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="modelfleet-flood-") as tmp:
        folder = Path(tmp) / "flood"
        folder.mkdir()
        for i in range(args.deployments):
            (folder / f"f{i:04d}.yaml").write_text(yaml.safe_dump(deployment_doc(i)))
        async with dev_environment(
            Path(tmp) / "state",
            [str(QUICKSTART / "classes.yaml"), str(QUICKSTART / "clusters.yaml")],
            ui=False,
            startup_seconds=args.startup,
            tuning=Tuning(rollout_slots=args.slots),
        ) as env:
            return await measure(args, env.client, env.settings.address, folder)


async def measure(args: argparse.Namespace, client: Client, address: str, folder: Path) -> int:
    print(f"{args.deployments} deployments, {args.slots} rollout slots, apply --rate {args.rate}")
    print(f"start: {load()}", flush=True)
    run = Run()
    t0 = time.monotonic()
    apply = asyncio.create_task(cli(address, "apply", "-f", str(folder), "--rate", str(args.rate)))
    applied_at: float | None = None
    deadline = t0 + args.timeout
    settled_at: float | None = None
    verbs: list[tuple[str, ...]] = [("get", "clusters"), ("get", "deployments", "-A")]
    if args.compare:
        verbs.append(("get", "deployments", "-A", "-o", "wide"))
    while time.monotonic() < deadline:
        for verb in verbs:
            start = time.monotonic()
            code, out = await cli(address, *verb)
            seconds = time.monotonic() - start
            tail = "" if code == 0 else out.strip().splitlines()[-1][:160]
            run.reads.append(Read(start - t0, " ".join(verb), seconds, code, tail))
            print(
                f"  {start - t0:7.1f}s  {' '.join(verb):22} {seconds:5.1f}s  exit {code}"
                + (f"  {tail}" if tail else ""),
                flush=True,
            )
        if apply.done() and applied_at is None:
            applied_at = time.monotonic() - t0
            code, out = apply.result()
            summary = [line for line in out.splitlines() if " documents in " in line]
            said = summary[-1] if summary else out[-300:]
            print(f"  apply exited {code} after {applied_at:.1f}s: {said}")
        found = await phases(client)
        run.phases.append((time.monotonic() - t0, found))
        print(f"  {time.monotonic() - t0:7.1f}s  phases {dict(sorted(found.items()))}", flush=True)
        now = time.monotonic() - t0
        if applied_at is not None and found["Ready"] + found["Pending"] >= args.deployments:
            settled_at = settled_at if settled_at is not None else now
        if settled_at is not None and now - settled_at >= args.hold:
            break
        await asyncio.sleep(args.every)
    end = time.monotonic() - t0
    print(f"end: {load()}")
    ids = [deployment_id(NS, f"f{i:04d}") for i in range(args.deployments)]
    failed = await failed_tasks(client, [FLEET_ID, ROLLOUT_SLOTS_ID, *ids])
    final = run.phases[-1][1] if run.phases else Counter()
    print()
    settled = settled_at is not None
    when = f"after {settled_at:.0f}s" if settled_at is not None else f"in {end:.0f}s"
    print(f"settled (every deployment Ready or Pending): {settled} {when}; ended at {end:.0f}s")
    print(f"final phases: {dict(sorted(final.items()))}")
    print(f"failed or timed-out workflow tasks: {dict(failed) or 'none'}")
    for verb in (" ".join(v) for v in verbs):
        times = [r.seconds for r in run.reads if r.verb == verb]
        failures = [r for r in run.reads if r.verb == verb and r.code != 0]
        over = sum(1 for t in times if t >= 10)
        print(
            f"{verb:20} n={len(times)}  p50 {pct(times, 0.5):.1f}s  p95 {pct(times, 0.95):.1f}s"
            f"  max {max(times, default=float('nan')):.1f}s  >=10s: {over}  failed: {len(failures)}"
        )
    ok = settled
    if settled:
        reasons, without = await pending_reasons(client)
        print(f"Pending with the scheduler's reason: {sum(reasons.values())}")
        for reason, count in reasons.most_common(5):
            print(f"  {count:5}  {reason[:150]}")
        print(f"Pending without one: {len(without)}")
        for line in without[:10]:
            print(f"  {line}")
        ok = ok and not without
    if args.delete:
        ok = await delete_all(args, client, address, folder) and ok
    return 0 if ok else 1


async def delete_all(args: argparse.Namespace, client: Client, address: str, folder: Path) -> bool:
    """``modelfleet delete -f DIR``, then wait until no deployment of the flood runs."""
    print(f"\ndelete -f of the same directory: {load()}", flush=True)
    t0 = time.monotonic()
    code, out = await cli(address, "delete", "-f", str(folder))
    took = time.monotonic() - t0
    last = out.strip().splitlines()[-1][:160] if out.strip() else ""
    print(f"  delete exited {code} after {took:.1f}s: {last}", flush=True)
    deadline = t0 + args.timeout
    left = await running_deployments(client)
    while left and time.monotonic() < deadline:
        print(f"  {time.monotonic() - t0:7.1f}s  {left} deployment workflows still running")
        await asyncio.sleep(args.every)
        left = await running_deployments(client)
    gone = time.monotonic() - t0
    print(f"every deployment gone: {left == 0} after {gone:.0f}s; {load()}")
    return code == 0 and left == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deployments", type=int, default=1000)
    parser.add_argument("--slots", type=int, default=20)
    parser.add_argument("--rate", type=float, default=20)
    parser.add_argument("--every", type=float, default=5, help="seconds between read rounds")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument(
        "--hold", type=float, default=0, help="seconds to keep reading once settled"
    )
    parser.add_argument("--startup", type=float, default=0.3, help="pod start-up seconds")
    parser.add_argument(
        "--compare", action="store_true", help="also time get deployments -A -o wide (queries)"
    )
    parser.add_argument(
        "--delete", action="store_true", help="then delete -f the directory and time it"
    )
    raise SystemExit(asyncio.run(bench(parser.parse_args())))


if __name__ == "__main__":
    main()
