"""``modelfleet rollout restart cluster/NAME`` provisions a Failed cluster again.

``modelfleet rollout status cluster/NAME``: follow a cluster being brought up, step by step
(cloud creates, kubeconfig, serving stack, each with its duration, failures with the cloud's
words), until it is Ready (exit 0) or provisioning failed and was rolled back (exit 1, the
reason printed), with the cluster workflow's Temporal UI link.

Reads the cluster workflow's status query only; the verdict is the pure :func:`judge`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import datetime

from rich.markup import escape
from temporalio.client import Client, WorkflowUpdateFailedError

from modelfleet.cli.cluster_view import duration
from modelfleet.cli.errors import CliError, NotFoundError
from modelfleet.cli.output import console, rejection_reason
from modelfleet.cli.resources import cluster_status, connect_with_worker, is_running
from modelfleet.cli.targets import single_target
from modelfleet.cluster.workflow import ClusterWorkflow
from modelfleet.contracts.cloud_payloads import ClusterStep
from modelfleet.contracts.ids import cluster_id
from modelfleet.contracts.status import ClusterStatus
from modelfleet.worker.settings import TemporalSettings

POLL_SECONDS = 0.5
# A cluster waiting for classes it names waits for a person: after this long following it, say
# so instead of watching on (the workflow keeps waiting and continues once they are applied).
WAITING_GRACE_SECONDS = 10.0


def cluster_target(args: list[str]) -> str | None:
    """The cluster ``rollout status`` names (``cluster/NAME`` or ``cluster NAME``), or None
    when the arguments name a deployment."""
    if len(args) == 1 and "/" not in args[0]:
        return None
    target = single_target(args, "rollout")
    return target.name if target.kind == "InferenceCluster" else None


@dataclass(frozen=True)
class Verdict:
    ok: bool
    message: str


def judge(status: ClusterStatus, running_now: bool, elapsed: float = 0.0) -> Verdict | None:
    """Whether following the cluster is over, and how; None while it is still coming up."""
    if not running_now:
        return Verdict(False, "the cluster's workflow is no longer running (was it deleted?)")
    if status.phase == "Ready":
        return Verdict(True, f"cluster {status.name} is Ready: {status.reason}")
    if status.phase == "Failed":
        return Verdict(False, f"provisioning failed and was rolled back: {status.reason}")
    if status.phase in ("Deleting", "Draining"):
        return Verdict(False, f"the cluster is being deleted: {status.reason}")
    if status.reason.startswith("WaitingForClasses") and elapsed > WAITING_GRACE_SECONDS:
        return Verdict(
            False,
            f"provisioning cannot start: {status.reason}; apply the classes (the cluster "
            "continues by itself once they are in the fleet)",
        )
    return None


class StepPrinter:
    """Prints each step once when it starts and once when it ends (a line per change)."""

    def __init__(self) -> None:
        self._started: set[tuple[str, datetime]] = set()
        self._ended: set[tuple[str, datetime]] = set()

    def show(self, steps: list[ClusterStep], now: datetime) -> None:
        for step in steps:
            key = (step.name, step.started)
            if key not in self._started:
                self._started.add(key)
                if step.finished is None:
                    console.print(f"  [cyan]started[/] {escape(step.name)}")
            if step.finished is not None and key not in self._ended:
                self._ended.add(key)
                took = duration(step.started, step.finished, now)
                if step.error:
                    console.print(
                        f"  [red]failed[/]  {escape(step.name)} ({took}): {escape(step.error)}",
                        soft_wrap=True,
                    )
                else:
                    console.print(f"  [green]done[/]    {escape(step.name)} ({took})")


async def follow_cluster(client: Client, name: str, limit_seconds: float) -> bool:
    """Follow cluster ``name`` until Ready (True) or it cannot get there (False), printing
    each step and each new reason; then print the verdict."""
    started = time.monotonic()
    printer = StepPrinter()
    last_line = ""
    verdict: Verdict | None = None
    while verdict is None:
        running_now = await is_running(client, cluster_id(name)) is not None
        try:
            status = await cluster_status(client, name)
        except NotFoundError:
            verdict = Verdict(False, f"cluster {name}'s workflow is gone (was it deleted?)")
            break
        line = f"{name} {status.phase}: {status.reason}"
        if line != last_line:
            console.print(escape(line), soft_wrap=True)
            last_line = line
        printer.show(status.steps, datetime.now().astimezone())
        verdict = judge(status, running_now, time.monotonic() - started)
        if verdict is None and time.monotonic() - started > limit_seconds:
            verdict = Verdict(False, f"gave up after {limit_seconds:g}s (--timeout): {line}")
        if verdict is None:
            await asyncio.sleep(POLL_SECONDS)
    colour = "green" if verdict.ok else "red"
    console.print(f"[{colour}]{escape(verdict.message)}[/]", soft_wrap=True)
    return verdict.ok


async def restart_cluster(s: TemporalSettings, name: str) -> ClusterStatus:
    """``rollout restart cluster/NAME``: provision a Failed cluster again (its workflow's
    ``retry`` Update; refused, with the phase, when the cluster has not failed)."""
    client = await connect_with_worker(s)
    if await is_running(client, cluster_id(name)) is None:
        raise NotFoundError(f"inferencecluster.modelfleet.dev/{name} not found")
    handle = client.get_workflow_handle(cluster_id(name))
    try:
        status: ClusterStatus = await handle.execute_update(ClusterWorkflow.retry)
    except WorkflowUpdateFailedError as exc:
        raise CliError(f"cannot restart cluster/{name}: {rejection_reason(exc)}") from None
    return status


async def cluster_rollout(s: TemporalSettings, name: str, limit_seconds: float) -> bool:
    client = await connect_with_worker(s)
    if await is_running(client, cluster_id(name)) is None:
        raise NotFoundError(f"inferencecluster.modelfleet.dev/{name} not found")
    console.print(f"Workflow: {s.workflow_url(cluster_id(name))}", soft_wrap=True)
    return await follow_cluster(client, name, limit_seconds)
