"""``modelfleet rollout status|history|undo|restart|pause|resume|promote|abort`` for
ModelDeployments.

``status`` follows a rollout and ends honestly: 0 desired replicas is success, and a deployment
the scheduler cannot place (or a paused one) ends with the reasons rather than a bare exit code.
``restart cluster/NAME`` provisions a Failed cluster again. ``history`` reads the revisions
the workflow keeps (across continue-as-new). ``undo`` and
``restart`` are ``apply`` updates with an older template or a restart annotation, which the
workflow rolls replica by replica; as kubectl, both refuse a paused deployment. ``pause`` and
``resume``, and a canary roll's ``promote`` and ``abort``, are the workflow's Updates of the same
names (refused with the workflow's reason when no canary roll is under way).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.common import TypedSearchAttributes
from temporalio.service import RPCError

from modelfleet.api.deployments import ModelDeployment
from modelfleet.cli import resources
from modelfleet.cli.cluster_rollout import cluster_rollout, cluster_target, restart_cluster
from modelfleet.cli.connection import AddressOption, NamespaceOption, run_async, settings
from modelfleet.cli.errors import CliError, NotFoundError, UsageError
from modelfleet.cli.output import (
    EXIT_FAILED,
    EXIT_OK,
    console,
    print_table,
    stdout_is_terminal,
)
from modelfleet.cli.resources import (
    connect_with_worker,
    deployment_spec,
    deployment_status,
    is_running,
    query,
)
from modelfleet.cli.revisions import restart_spec, undo_spec
from modelfleet.cli.targets import Namespace, NsOption, resolve_namespace, single_target
from modelfleet.contracts import search
from modelfleet.contracts.ids import deployment_id
from modelfleet.contracts.status import DeploymentStatus, ReplicaPhase
from modelfleet.deployment.decisions import Revision
from modelfleet.deployment.workflow import DeploymentWorkflow
from modelfleet.worker.settings import TemporalSettings

# A rollout the scheduler cannot complete (nothing left in flight, placement False) this long
# after we started watching is reported with the scheduler's reasons instead of watched on.
UNSCHEDULABLE_GRACE_SECONDS = 10.0

rollout_app = typer.Typer(help="Follow and manage deployment rollouts.", no_args_is_help=True)

DeploymentArgument = Annotated[
    list[str],
    typer.Argument(help="NAME, or deployment NAME, or deployment/NAME.", metavar="DEPLOYMENT"),
]


def deployment_name(args: list[str]) -> str:
    """``NAME``, ``deployment NAME`` or ``deployment/NAME`` (kubectl accepts the latter two)."""
    if len(args) == 1 and "/" not in args[0]:
        return args[0]
    target = single_target(args, "rollout")
    if target.kind != "ModelDeployment":
        raise UsageError(f"rollouts are of deployments, not {target.kind}")
    assert target.name is not None
    return target.name


@dataclass(frozen=True)
class Verdict:
    ok: bool
    message: str


def judge(status: DeploymentStatus, running_now: bool, elapsed: float) -> Verdict | None:
    """Whether a followed rollout is over, and how; None while it is still moving."""
    if not running_now:
        return Verdict(False, "the deployment's workflow is no longer running (was it deleted?)")
    if status.desired == 0 and not status.replicas:
        return Verdict(True, "scaled to 0 replicas: nothing to run")
    if status.paused:
        # Nothing more rolls until it is resumed: waiting would only run into --timeout.
        return _paused(status.namespace, status.name, status.ready, status.desired)
    if status.phase == "Ready":
        return _all_ready(status.ready, status.desired)
    in_flight = any(
        r.phase in (ReplicaPhase.PENDING, ReplicaPhase.PROGRESSING, ReplicaPhase.TERMINATING)
        for r in status.replicas
    )
    failed = [r for r in status.replicas if r.phase is ReplicaPhase.FAILED]
    if failed and not in_flight:
        reasons = "; ".join(f"{r.name} on {r.cluster}: {r.reason or 'failed'}" for r in failed)
        return Verdict(False, f"rollout failed: {reasons}")
    unplaced = any(c.type == "ReplicasScheduled" and c.status == "False" for c in status.conditions)
    # The scheduler's answer is for this generation: no need to give it a moment.
    current = status.observed_generation >= status.generation
    if unplaced and not in_flight and (current or elapsed > UNSCHEDULABLE_GRACE_SECONDS):
        placed = f"{status.scheduled} of {status.desired} replicas placed"
        why = scheduler_reasons(status)
        return Verdict(False, f"cannot place the deployment ({placed}):\n{why}")
    return None


def scheduler_reasons(status: DeploymentStatus) -> str:
    """The scheduler's own words: summary, False conditions and per-cluster rejections."""
    lines = []
    if status.summary:
        lines.append(f"  {status.summary}")
    for c in status.conditions:
        if c.status == "False" and c.message and c.message != status.summary:
            lines.append(f"  {c.type}=False ({c.reason}): {c.message}")
    for cluster, reason in sorted(status.rejections.items()):
        lines.append(f"    {cluster}: {reason}")
    return "\n".join(lines) or "  (the scheduler gave no reason)"


def replica_rows(status: DeploymentStatus) -> list[list[str]]:
    colours = {ReplicaPhase.READY: "green", ReplicaPhase.FAILED: "red"}
    return [
        [
            r.name,
            r.cluster,
            ", ".join(f"{e}:{p}" for e, p in r.pools.items()),
            f"[{colours.get(r.phase, 'cyan')}]{r.phase.value}[/]",
            r.step.value,
            escape(r.reason),
        ]
        for r in status.replicas
    ]


REPLICA_HEADER = ["REPLICA", "CLUSTER", "POOLS", "PHASE", "STEP", "REASON"]


def _paused(namespace: str, name: str, ready: int | None, desired: int | None) -> Verdict:
    return Verdict(
        False,
        f"rollout paused ({ready}/{desired} ready): resume it with "
        f"`modelfleet rollout resume deployment/{name} -n {namespace}`",
    )


def _all_ready(ready: int | None, desired: int | None) -> Verdict:
    return Verdict(True, f"every replica is Ready ({ready}/{desired})")


def _headline(
    namespace: str,
    name: str,
    phase: str,
    ready: int | None,
    desired: int | None,
    updated: int | None,
) -> str:
    return f"{namespace}/{name} {phase}: {ready}/{desired} ready, {updated} up to date"


@dataclass(frozen=True)
class Published:
    """What a deployment publishes as search attributes (``deployment.report.search_values``),
    read by describing its workflow: needs no workflow task, so a busy worker cannot stall it.
    Counts are None from a worker older than this CLI (it published its phase only)."""

    phase: str
    ready: int | None
    desired: int | None
    updated: int | None
    clusters: tuple[str, ...]

    @property
    def counted(self) -> bool:
        return self.ready is not None and self.desired is not None and self.updated is not None


def published(attrs: TypedSearchAttributes) -> Published:
    return Published(
        phase=attrs.get(search.PHASE) or "",
        ready=attrs.get(search.READY),
        desired=attrs.get(search.DESIRED),
        updated=attrs.get(search.UPDATED),
        clusters=tuple(attrs.get(search.CLUSTERS) or ()),
    )


def judge_published(namespace: str, name: str, pub: Published, running_now: bool) -> Verdict | None:
    """``judge``'s verdicts that what the deployment publishes is enough for (gone, scaled to
    0, paused, Ready), in its words; None for the rest, which need the workflow's own status
    (which replica failed and why, what the scheduler said)."""
    if not running_now:
        return Verdict(False, "the deployment's workflow is no longer running (was it deleted?)")
    if not pub.counted:
        return None
    if pub.desired == 0 and not pub.clusters:  # a placed replica is on some cluster
        return Verdict(True, "scaled to 0 replicas: nothing to run")
    if pub.phase == "Paused":
        return _paused(namespace, name, pub.ready, pub.desired)
    if pub.phase == "Ready":
        return _all_ready(pub.ready, pub.desired)
    return None


# How often ``rollout status`` asks the workflow for its status while what it publishes stays
# the same (a change asks at once): the verdicts only its status holds (a failed replica, an
# unplaceable one) come within this, and a busy worker gets one query at a time, not two a second.
ASK_EVERY_SECONDS = 2.0


def should_ask(pub: Published, asked_for: Published | None, since_asked: float) -> bool:
    """Whether to ask the workflow now (no question being in flight)."""
    return asked_for != pub or since_asked >= ASK_EVERY_SECONDS


class _Asker:
    """The workflow's status, asked in the background (one question at a time, each bounded):
    ``rollout status`` never waits on it to follow what the deployment publishes."""

    def __init__(self, client: Client, namespace: str, name: str) -> None:
        self._client, self._namespace, self._name = client, namespace, name
        self._task: asyncio.Task[DeploymentStatus] | None = None
        self._asked_for: Published | None = None
        self._asked_at = -float("inf")
        self.status: DeploymentStatus | None = None  # the last answer
        self.answered_for: Published | None = None  # what was published when it was asked

    def collect(self) -> None:
        task = self._task
        if task is None or not task.done():
            return
        self._task = None
        with contextlib.suppress(CliError, RPCError, WorkflowQueryFailedError):
            self.status = task.result()
            self.answered_for = self._asked_for

    def maybe_ask(self, pub: Published) -> None:
        self.collect()
        if self._task is None and should_ask(
            pub, self._asked_for, time.monotonic() - self._asked_at
        ):
            self._asked_for, self._asked_at = pub, time.monotonic()
            self._task = asyncio.create_task(
                deployment_status(self._client, self._namespace, self._name)
            )

    async def answer_for(self, pub: Published) -> DeploymentStatus | None:
        """An answer about ``pub`` (asked now if needed, bounded by the query's timeout), or
        None when the workflow does not give one."""
        self.collect()
        if self.answered_for != pub:
            if self._task is None or self._asked_for != pub:
                self.cancel()
                self._asked_for, self._asked_at = pub, time.monotonic()
                self._task = asyncio.create_task(
                    deployment_status(self._client, self._namespace, self._name)
                )
            with contextlib.suppress(CliError, RPCError, WorkflowQueryFailedError):
                await asyncio.shield(self._task)
            self.collect()
        return self.status if self.answered_for == pub else None

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None


async def watch_rollout(client: Client, namespace: str, name: str, limit_seconds: float) -> bool:
    """Follow until every replica is Ready (True) or the rollout cannot finish (False), then
    print why. Live on a terminal; one line per change elsewhere (logs, CI).

    Each round reads what the deployment publishes (phase and counts: a describe of its
    workflow, no workflow task); its status (replicas, reasons) is asked in the background
    when that changes, or every ``ASK_EVERY_SECONDS``, so a busy worker neither stalls nor
    fails the watch: without an answer it follows the published facts and ends on those that
    are enough (Ready, scaled to 0, paused, gone), or at ``--timeout``."""
    handle = client.get_workflow_handle(deployment_id(namespace, name))
    asker = _Asker(client, namespace, name)
    started = time.monotonic()
    last_line = ""
    live = Live(console=console, refresh_per_second=4) if stdout_is_terminal() else None
    status: DeploymentStatus | None = None
    verdict: Verdict | None = None
    unanswered = False
    try:
        if live is not None:
            live.start()
        while verdict is None:
            desc = await handle.describe(rpc_timeout=resources.QUERY_TIMEOUT)
            pub = published(desc.typed_search_attributes)
            running_now = desc.status is WorkflowExecutionStatus.RUNNING
            asker.maybe_ask(pub)
            elapsed = time.monotonic() - started
            if asker.answered_for == pub and asker.status is not None:
                status = asker.status
                verdict = judge(status, running_now, elapsed)
            else:
                verdict = judge_published(namespace, name, pub, running_now)
                if verdict is not None and running_now:
                    # Over by what it publishes: its own status, for the replica table.
                    answer = await asker.answer_for(pub)
                    if answer is not None:
                        status = answer
                        verdict = judge(answer, running_now, time.monotonic() - started)
                    else:
                        unanswered = True
            if verdict is None and elapsed > limit_seconds:
                verdict = Verdict(False, f"gave up after {limit_seconds:g}s (--timeout)")
            line = (
                _headline(namespace, name, pub.phase, pub.ready, pub.desired, pub.updated)
                if pub.counted
                else (
                    _headline(
                        namespace, name, status.phase, status.ready, status.desired, status.updated
                    )
                    if status is not None
                    else ""
                )
            )
            if live is not None:
                grid = Table.grid()
                summary = f"\n[dim]{escape(status.summary)}[/]" if status and status.summary else ""
                grid.add_row(line + summary)
                table = Table(box=None, header_style="bold")
                for h in REPLICA_HEADER:
                    table.add_column(h)
                for row in replica_rows(status) if status is not None else []:
                    table.add_row(*row)
                grid.add_row(table)
                live.update(grid)
            elif line and line != last_line:
                console.print(line)
                last_line = line
            if verdict is None:
                await asyncio.sleep(0.5)
    finally:
        asker.cancel()
        if live is not None:
            live.stop()
    if live is None and status is not None and status.replicas and not unanswered:
        print_table(REPLICA_HEADER, replica_rows(status), flexible=("REASON",))
    if unanswered:
        console.print(
            "[yellow]the deployment's workflow did not answer: its replicas are not shown "
            "(the verdict is what it published)[/]"
        )
    colour = "green" if verdict.ok else "red"
    console.print(f"[{colour}]{escape(verdict.message)}[/]")
    return verdict.ok


def _target(
    args: list[str], namespace: str | None, address: str | None, temporal_namespace: str | None
) -> tuple[str, Namespace, TemporalSettings]:
    """The deployment a command names, its namespace, and how to reach Temporal."""
    name, ns = deployment_name(args), resolve_namespace(namespace)
    return name, ns, settings(address, temporal_namespace)


async def _open_deployment(s: TemporalSettings, ns: Namespace, name: str) -> Client:
    """A client (with a worker running) once the deployment's workflow is known to run."""
    client = await connect_with_worker(s)
    if not await is_running(client, deployment_id(ns.name, name)):
        raise NotFoundError(f"deployment {name!r} not found in {ns.described()}")
    return client


@rollout_app.command("status")
def rollout_status(
    args: DeploymentArgument,
    namespace: NsOption = None,
    timeout: Annotated[float, typer.Option(help="Give up after this many seconds.")] = 1800,
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """Follow a rollout until every replica is Ready (exit 0) or it cannot finish (exit 1);
    ``cluster/NAME`` follows a cluster's provisioning until it is Ready."""
    cluster = cluster_target(args)
    if cluster is not None:
        s = settings(address, temporal_namespace)
        ok = run_async(lambda: cluster_rollout(s, cluster, timeout))
        raise typer.Exit(EXIT_OK if ok else EXIT_FAILED)
    name, ns, s = _target(args, namespace, address, temporal_namespace)

    async def go() -> bool:
        client = await _open_deployment(s, ns, name)
        console.print(f"Workflow: {s.workflow_url(deployment_id(ns.name, name))}")
        return await watch_rollout(client, ns.name, name, timeout)

    raise typer.Exit(EXIT_OK if run_async(go) else EXIT_FAILED)


async def fetch_history(client: Client, namespace: str, name: str) -> list[Revision]:
    """The revisions the deployment's workflow keeps, oldest first."""
    revisions: list[Revision] = await query(
        client.get_workflow_handle(deployment_id(namespace, name)),
        DeploymentWorkflow.revisions,
        what=f"ModelDeployment {namespace}/{name}",
    )
    return revisions


@rollout_app.command("history")
def rollout_history(
    args: DeploymentArgument,
    namespace: NsOption = None,
    revision: Annotated[
        int | None, typer.Option("--revision", help="Print this revision's template.")
    ] = None,
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """Revisions of a deployment's replica template (the last ten)."""
    name, ns, s = _target(args, namespace, address, temporal_namespace)

    async def go() -> list[Revision]:
        client = await _open_deployment(s, ns, name)
        return await fetch_history(client, ns.name, name)

    history = run_async(go)
    if revision is not None:
        chosen = [r for r in history if r.number == revision]
        if not chosen:
            kept = f"{history[0].number}..{history[-1].number}" if history else "none"
            raise UsageError(f"revision {revision} not found (revisions kept: {kept})")
        import yaml

        print(yaml.safe_dump(chosen[0].spec.spec.template.to_wire(), sort_keys=False), end="")
        return
    console.print(f"deployment {ns.name}/{name}")
    rows = [
        [
            str(r.number),
            r.at.strftime("%Y-%m-%d %H:%M:%S") if r.at else "-",
            r.cause,
            r.template,
            str(r.replicas),
        ]
        for r in history
    ]
    header = ["REVISION", "SINCE", "CAUSE", "TEMPLATE", "REPLICAS"]
    if any(r.outcome for r in history):
        # A revision rolled back by itself (a failed replacement) says why, with the figures.
        header.append("OUTCOME")
        rows = [[*row, r.outcome or "-"] for row, r in zip(rows, history, strict=True)]
    print_table(header, rows, flexible=("OUTCOME",))
    analysed = [r for r in history if r.analyses]
    for r in analysed:
        # A canary roll's analyses, with the figures each step was judged on.
        console.print(f"revision {r.number} canary analyses:", markup=False)
        for line in r.analyses:
            console.print(f"  {line}", markup=False)


async def _apply_to_running(client: Client, spec: ModelDeployment) -> DeploymentStatus:
    handle = client.get_workflow_handle(deployment_id(spec.namespace, spec.name))
    result: DeploymentStatus = await handle.execute_update(DeploymentWorkflow.apply, spec)
    return result


@rollout_app.command("undo")
def rollout_undo(
    args: DeploymentArgument,
    namespace: NsOption = None,
    to_revision: Annotated[
        int | None, typer.Option("--to-revision", help="Revision to go back to.")
    ] = None,
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """Roll the replica template back to the previous (or a given) revision."""
    name, ns, s = _target(args, namespace, address, temporal_namespace)

    async def go() -> None:
        client = await _open_deployment(s, ns, name)
        await _refuse_paused(client, ns.name, name, "roll back", "undo")
        history = await fetch_history(client, ns.name, name)
        current = await deployment_spec(client, ns.name, name)
        try:
            spec, number = undo_spec(history, current, to_revision)
        except ValueError as exc:
            raise UsageError(f"deployment {ns.name}/{name}: {exc}") from None
        await _apply_to_running(client, spec)
        console.print(f"modeldeployment.modelfleet.dev/{name} rolled back to revision {number}")

    run_async(go)


@rollout_app.command("restart")
def rollout_restart(
    args: DeploymentArgument,
    namespace: NsOption = None,
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """Replace every replica, one at a time (surge first), without changing what it runs;
    ``cluster/NAME`` provisions a Failed cluster again."""
    cluster = cluster_target(args)
    if cluster is not None:
        status = run_async(lambda: restart_cluster(settings(address, temporal_namespace), cluster))
        console.print(
            f"inferencecluster.modelfleet.dev/{cluster} restarted ({status.phase}): follow it "
            f"with `modelfleet rollout status cluster/{cluster}`"
        )
        return
    name, ns, s = _target(args, namespace, address, temporal_namespace)

    async def go() -> None:
        client = await _open_deployment(s, ns, name)
        await _refuse_paused(client, ns.name, name, "restart", "restart")
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        spec = restart_spec(await deployment_spec(client, ns.name, name), stamp)
        await _apply_to_running(client, spec)
        console.print(f"modeldeployment.modelfleet.dev/{name} restarted")

    run_async(go)


async def _refuse_paused(client: Client, namespace: str, name: str, what: str, verb: str) -> None:
    """kubectl refuses to roll back or restart a paused deployment: the change would only wait."""
    if (await deployment_status(client, namespace, name)).paused:
        raise CliError(
            f"cannot {what} paused deployment {namespace}/{name}: resume it first with "
            f"`modelfleet rollout resume deployment/{name} -n {namespace}`, then {verb} again"
        )


def _set_paused(
    args: list[str],
    namespace: str | None,
    address: str | None,
    temporal_namespace: str | None,
    pause: bool,
) -> None:
    name, ns, s = _target(args, namespace, address, temporal_namespace)

    async def go() -> bool:
        client = await _open_deployment(s, ns, name)
        before = (await deployment_status(client, ns.name, name)).paused
        if before is not pause:
            handle = client.get_workflow_handle(deployment_id(ns.name, name))
            update = DeploymentWorkflow.pause if pause else DeploymentWorkflow.resume
            await handle.execute_update(update)
        return before is not pause

    changed = run_async(go)
    verb = "paused" if pause else "resumed"
    # kubectl's words when nothing changes: "already paused" / "is not paused".
    state = verb if changed else ("already paused" if pause else "is not paused")
    console.print(f"modeldeployment.modelfleet.dev/{name} {state}")


def _canary_update(
    args: list[str],
    namespace: str | None,
    address: str | None,
    temporal_namespace: str | None,
    promote: bool,
) -> None:
    name, ns, s = _target(args, namespace, address, temporal_namespace)

    async def go() -> DeploymentStatus:
        client = await _open_deployment(s, ns, name)
        handle = client.get_workflow_handle(deployment_id(ns.name, name))
        update = DeploymentWorkflow.promote if promote else DeploymentWorkflow.abort
        try:
            result: DeploymentStatus = await handle.execute_update(update)
        except WorkflowUpdateFailedError as exc:
            # The validator's reason (no canary in progress, being deleted), not the SDK's.
            cause = exc.cause
            raise CliError(str(cause.__cause__ or cause) if cause else str(exc)) from None
        return result

    status = run_async(go)
    verb = "promoted" if promote else "aborted"
    console.print(f"modeldeployment.modelfleet.dev/{name} canary {verb}", markup=False)
    if status.summary:
        console.print(status.summary, markup=False)


@rollout_app.command("promote")
def rollout_promote(
    args: DeploymentArgument,
    namespace: NsOption = None,
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """Skip the remaining canary analyses: roll the new template to every replica."""
    _canary_update(args, namespace, address, temporal_namespace, True)


@rollout_app.command("abort")
def rollout_abort(
    args: DeploymentArgument,
    namespace: NsOption = None,
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """End the canary roll now: roll back to the last good template."""
    _canary_update(args, namespace, address, temporal_namespace, False)


@rollout_app.command("pause")
def rollout_pause(
    args: DeploymentArgument,
    namespace: NsOption = None,
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """Start no new roll of the template (replicas keep running, scale still works)."""
    _set_paused(args, namespace, address, temporal_namespace, True)


@rollout_app.command("resume")
def rollout_resume(
    args: DeploymentArgument,
    namespace: NsOption = None,
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """Roll out the template a paused deployment was given meanwhile."""
    _set_paused(args, namespace, address, temporal_namespace, False)
