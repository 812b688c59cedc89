"""Admission control end to end (issue 22): 30 one-GPU deployments applied from a directory
with the real CLI against the simulated fleet (4 clusters of one H100x8 node: room for 32),
the rollout bound set to 5.

- ``apply -f DIR`` interrupted (SIGINT, as Ctrl-C sends) says how far it got, exits 130 and
  prints no traceback;
- the same apply again hands over the rest, with a progress bar and a summary (created for the
  rest, unchanged for what the first one handed over);
- while they roll out, never more than 5 hold a slot, ``get deployments`` shows the waiting ones
  as ``Waiting`` and ``describe`` says how many rollouts are ahead; all 30 end Ready;
- a third apply of the same directory changes nothing (30 unchanged)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio
import yaml
from integration_support import Stack, cli, clusters_stack, deployment, wait_for

from modelfleet.admission.state import SlotsView
from modelfleet.admission.workflow import RolloutSlotsWorkflow
from modelfleet.contracts.ids import ROLLOUT_SLOTS_ID
from modelfleet.worker.tuning import Tuning

BOUND = 5
COUNT = 30
NS = "flood"
CLUSTERS = ["a1", "a2", "a3", "a4"]


@pytest_asyncio.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    tuning = Tuning(probe_interval_seconds=5, rollout_slots=BOUND)
    # Pods take 3 s to start, so the queue lasts long enough for `get` to be seen showing it.
    async with clusters_stack(tmp_path, CLUSTERS, tuning, startup_seconds=3) as s:
        yield s


def write_directory(where: Path) -> Path:
    where.mkdir()
    for i in range(COUNT):
        md = deployment(f"m{i:02d}", NS, memory="40Gi")
        (where / f"m{i:02d}.yaml").write_text(yaml.safe_dump(md.to_wire(), sort_keys=False))
    return where


async def interrupted_apply(address: str, folder: Path) -> tuple[int, str, str]:
    """``apply -f folder`` slowed to 2 documents a second, sent SIGINT once it has handed one
    over."""
    env = {**os.environ, "MODELFLEET_TEMPORAL_ADDRESS": address, "COLUMNS": "400"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "modelfleet.cli",
        "apply",
        "-f",
        str(folder),
        "--rate",
        "2",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    seen = []
    while True:
        line = (await asyncio.wait_for(proc.stdout.readline(), 120)).decode()
        assert line, f"apply ended before handing anything over: {seen}"
        seen.append(line)
        if " created" in line:
            break
    proc.send_signal(signal.SIGINT)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, "".join(seen) + out.decode(), err.decode()


async def test_a_flood_is_paced_queued_behind_the_bound_and_applied_again_unchanged(
    stack: Stack, tmp_path: Path
) -> None:
    address = stack.env.settings.address
    folder = write_directory(tmp_path / "flood")

    code, out, err = await interrupted_apply(address, folder)
    assert code == 130, (code, out, err)
    assert "Traceback" not in out + err
    first = re.search(r"interrupted: (\d+) of 30 documents handed over", err)
    assert first, err
    assert "run the same apply again" in err

    out = await cli(address, "apply", "-f", str(folder))
    assert re.search(r"applying .*30/30", out), out
    summary = re.search(r"30 of 30 documents in [\d.]+s \([\d.]+/s\): (.*)", out)
    assert summary, out
    counts = dict((what, int(n)) for n, what in re.findall(r"(\d+) (\w+)", summary.group(1)))
    assert counts.get("unchanged", 0) >= int(first.group(1)) >= 1, (first.group(0), counts)
    assert counts.get("created", 0) + counts.get("unchanged", 0) == COUNT, counts

    gate = stack.client.get_workflow_handle(ROLLOUT_SLOTS_ID)
    most = 0
    shown: dict[str, str] = {}

    async def waiting_shown() -> bool | None:
        nonlocal most
        view: SlotsView = await gate.query(RolloutSlotsWorkflow.view)
        most = max(most, len(view.holders))
        if "get" not in shown:
            listed = await cli(address, "get", "deployments", "-n", NS)
            rows = [line for line in listed.splitlines() if " Waiting " in line]
            if rows:
                shown["get"] = listed
                shown["name"] = rows[0].split()[0]
        if "get" in shown and "describe" not in shown:
            described = await cli(address, "describe", "deployment", shown["name"], "-n", NS)
            if "WaitingForRolloutSlot" in described:
                shown["describe"] = described
            else:
                # Granted its slot between the two reads (a loaded machine widens the gap):
                # list again for one still waiting.
                shown.clear()
        return True if "describe" in shown else None

    await wait_for(waiting_shown, 120, "a deployment shown Waiting by get and describe")
    assert "waiting for a rollout slot: " in shown["describe"], shown["describe"]
    assert re.search(r"rollouts? ahead", shown["describe"]), shown["describe"]

    async def all_ready() -> bool | None:
        nonlocal most
        view: SlotsView = await gate.query(RolloutSlotsWorkflow.view)
        most = max(most, len(view.holders))
        phases = [(await stack.status(NS, f"m{i:02d}")).phase for i in range(COUNT)]
        return True if all(p == "Ready" for p in phases) else None

    await wait_for(all_ready, 600, "all 30 deployments Ready")
    assert most <= BOUND, most

    out = await cli(address, "apply", "-f", str(folder))
    assert re.search(r"30 of 30 documents in [\d.]+s \([\d.]+/s\): 30 unchanged$", out, re.M), out
