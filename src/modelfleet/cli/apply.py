"""``modelfleet apply -f``: validate every document first, then hand each to its entity
workflow with update-with-start, so applying twice is idempotent and an invalid change is
rejected (by the workflow's validator) without touching what runs. Thousands of documents are
handed over paced (``Pace``: a rate and a bound on those in flight) behind a progress bar, and
an interrupted apply says how far it got (issue 22, admission control)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from temporalio.client import (
    Client,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)

from modelfleet.api.deployments import ModelDeployment
from modelfleet.api.meta import Resource
from modelfleet.api.support import held_without_action, not_acted_upon
from modelfleet.applying.kinds import apply_held
from modelfleet.cli.changes import (
    UNCHANGED,
    LiveFleet,
    consequences,
    live_plan,
    read_live,
    read_only,
    verdict,
)
from modelfleet.cli.connection import AddressOption, NamespaceOption, run_async, settings
from modelfleet.cli.errors import START_WORKER, NoWorkerError
from modelfleet.cli.kinds import REGISTRY, apply_order
from modelfleet.cli.management import apply_to_management, management_kubeconfig
from modelfleet.cli.output import (
    EXIT_INVALID,
    console,
    err_console,
    rejection_reason,
)
from modelfleet.cli.plan import print_plan
from modelfleet.cli.resources import connect_with_worker
from modelfleet.cli.targets import resource_name
from modelfleet.cli.validate import FilesOption, load_or_exit
from modelfleet.worker.settings import TemporalSettings
from modelfleet.worker.tuning import Tuning

# The registry's apply ranks: classes first (clusters reference them), then clusters and the
# front door on one of them, then what runs on them, then what routes to and scales what runs.
# Kinds held without action (ServingStack, per-cloud clusters) depend on nothing and nothing
# depends on them: they go last (ORDER.get's default).
ORDER = apply_order()
# A worker that polls takes an apply in well under a second; this long means none is there.
APPLY_TIMEOUT = timedelta(seconds=30)
# Interrupted (Ctrl-C), as a shell reports SIGINT.
EXIT_INTERRUPTED = 130


async def apply_resource(
    client: Client,
    resource: Resource,
    *,
    rpc_timeout: timedelta | None = None,
    tuning: Tuning | None = None,
) -> str:
    """Apply one validated resource; returns the workflow ID that now holds it. A cluster's new
    workflow takes its probe knobs from ``tuning`` (default: the environment's)."""
    if held_without_action(resource):
        return await apply_held(client, resource, rpc_timeout)
    spec = REGISTRY.get(resource.KIND)
    if spec is None or spec.apply is None:
        raise ValueError(f"{resource.KIND} cannot be applied yet")
    return await spec.apply(client, resource, rpc_timeout, tuning)


async def apply_all(
    client: Client,
    s: TemporalSettings,
    resources: list[Resource],
    *,
    pace: Pace | None = None,
    tally: Tally | None = None,
) -> int:
    """Apply in dependency order, printing created/configured/unchanged per document; returns
    how many were rejected.

    Documents of one rank (classes, then clusters, ...) are handed over ``pace.in_flight`` at a
    time and at most ``pace.rate`` a second, with a progress bar past a few documents; an
    unchanged deployment is not sent at all (its workflow would change nothing), so applying a
    directory again after an interruption hands over only what is left. ``tally`` counts as it
    goes (what an interrupted apply reports)."""
    # Imported here: worker.runner loads every activity and the cloud SDKs, which the other
    # verbs never need (each `modelfleet` command would start about a second slower).
    from modelfleet.worker.runner import ensure_fleet

    pace = pace or Pace()
    tally = tally if tally is not None else Tally()
    await ensure_fleet(client)
    live = await read_live(client, resources, rolling=False)
    order = apply_order()
    ranked = sorted(resources, key=lambda r: order.get(r.KIND, 9))
    tally.total = len(ranked)
    with _progress(len(ranked)) as bar:
        task = bar.add_task("applying", total=len(ranked))
        started = time.monotonic()
        gate = asyncio.Semaphore(pace.in_flight)

        async def one(index: int, resource: Resource) -> None:
            if pace.rate:
                # The n-th hand-over starts no sooner than n / rate seconds in.
                await asyncio.sleep(max(0.0, started + index / pace.rate - time.monotonic()))
            async with gate:
                await _hand_over(client, s, live, resource, tally, bar.console)
            bar.advance(task)

        index = 0
        for _, group in itertools.groupby(ranked, key=lambda r: order.get(r.KIND, 9)):
            # A rank waits for the one before it (clusters name classes, deployments clusters).
            batch = list(group)
            await asyncio.gather(*(one(index + i, r) for i, r in enumerate(batch)))
            index += len(batch)
    if tally.total > PROGRESS_FROM:
        console.print(tally.summary(time.monotonic() - started))
    return tally.rejected


@dataclass
class Pace:
    """How fast ``apply`` hands documents over: at most ``rate`` a second (0: as fast as the
    workflows take them) and ``in_flight`` at a time."""

    rate: float = 20.0
    in_flight: int = 8


@dataclass
class Tally:
    total: int = 0
    handed: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    rejected: int = 0

    def summary(self, seconds: float) -> str:
        counts = ", ".join(f"{n} {what}" for what, n in sorted(self.outcomes.items()))
        rate = f" ({self.handed / seconds:.1f}/s)" if seconds > 0 else ""
        return f"{self.handed} of {self.total} documents in {seconds:.1f}s{rate}: {counts}"


# Past this many documents, apply shows a progress bar and a summary line.
PROGRESS_FROM = 10


def _progress(total: int) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=total <= PROGRESS_FROM,
    )


async def _hand_over(
    client: Client,
    s: TemporalSettings,
    live: LiveFleet,
    resource: Resource,
    tally: Tally,
    out: Console,
) -> None:
    ref = resource_name(resource.KIND, resource.name)
    why_not = read_only(live, resource) or not_applied(resource)
    if why_not:
        out.print(f"[yellow]skipped[/] {ref}: {why_not}")
        tally.outcomes["skipped"] += 1
        tally.handed += 1
        return
    outcome = verdict(live, resource)
    if outcome == UNCHANGED and isinstance(resource, ModelDeployment):
        # The same spec changes nothing in its workflow: not sent, so a busy one is not asked.
        out.print(f"{ref} {outcome}")
        tally.outcomes[outcome] += 1
        tally.handed += 1
        return
    try:
        wid = await apply_resource(client, resource, rpc_timeout=APPLY_TIMEOUT)
    except WorkflowUpdateFailedError as exc:
        tally.rejected += 1
        tally.outcomes["rejected"] += 1
        tally.handed += 1
        err_console.print(f"[red]rejected[/] {ref}: {rejection_reason(exc)}")
        return
    except WorkflowUpdateRPCTimeoutOrCancelledError:
        raise NoWorkerError(
            f"no worker took {resource.ref} within {APPLY_TIMEOUT.seconds}s; the request "
            f"is kept and runs when a worker polls; {START_WORKER}"
        ) from None
    tally.outcomes[outcome] += 1
    tally.handed += 1
    out.print(f"{ref} {outcome}  [dim]{s.workflow_url(wid)}[/]")
    _print_note(resource, out)


def not_applied(resource: Resource) -> str | None:
    kind = resource.KIND
    if kind in apply_order() or held_without_action(resource):
        return None
    spec = REGISTRY.get(kind)
    return (spec and spec.not_applied) or f"{kind} cannot be applied"


def _print_note(resource: Resource, out: Console = console) -> None:
    """Accepted but not (wholly) acted upon: said at once, with what to do instead."""
    note = not_acted_upon(resource)
    if note:
        out.print(f"  [yellow]note:[/] {escape(note)}")


def dry_run(live: LiveFleet, resources: list[Resource]) -> None:
    """What apply would do, without doing it: verdicts, rolls and the live placement."""
    order = apply_order()
    for resource in sorted(resources, key=lambda r: order.get(r.KIND, 9)):
        ref = resource_name(resource.KIND, resource.name)
        why_not = read_only(live, resource) or not_applied(resource)
        if why_not:
            console.print(f"[yellow]skipped[/] {ref}: {why_not}")
            continue
        console.print(f"{ref} {verdict(live, resource)} (dry run)")
        _print_note(resource)
        # The one kind placed: its plan, which the consequences count with.
        plan = (
            live_plan(live, resource, resources) if isinstance(resource, ModelDeployment) else None
        )
        for line in consequences(live, resource, plan):
            console.print(f"  {line}")
        if plan is not None:
            print_plan(plan)


def apply(
    files: FilesOption,
    dry_run_flag: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Validate and plan against the live fleet; change nothing.",
        ),
    ] = False,
    rate: Annotated[
        float,
        typer.Option(
            "--rate",
            min=0,
            help="Hand over at most this many documents a second (0: no limit).",
        ),
    ] = Pace.rate,
    address: AddressOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """Apply classes, clusters, gateways, deployments, endpoints, services and autoscalers:
    validated first, then handed to their workflows durably. Ctrl-C stops handing over (what
    was handed over stays applied; the same apply again continues, unchanged ones skipped)."""
    result = load_or_exit(files, check_selectors=True)
    managed = management_kubeconfig()
    if managed is not None and not dry_run_flag:
        # The controller hands them to the workflows: the CLI never writes past it.
        if apply_to_management(managed, result.resources):
            raise typer.Exit(EXIT_INVALID)
        return
    s = settings(address, namespace)

    tally = Tally()

    async def go() -> int:
        client = await connect_with_worker(s)
        if dry_run_flag:
            dry_run(await read_live(client, result.resources), result.resources)
            return 0
        return await apply_all(client, s, result.resources, pace=Pace(rate=rate), tally=tally)

    try:
        failures = run_async(go)
    except KeyboardInterrupt:
        err_console.print(
            f"interrupted: {tally.handed} of {tally.total or len(result.resources)} documents "
            "handed over (they stay applied); run the same apply again to hand over the rest "
            "(unchanged ones are skipped)"
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    if failures:
        raise typer.Exit(EXIT_INVALID)
