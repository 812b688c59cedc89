"""``modelfleet autoscaler``: what a ModelAutoscaler decided and why. ``status`` (target, bounds,
the last decision), ``history`` (the decision log as a table, and with ``--plot out.png`` a chart
of each metric against its target and of recommended, desired and applied replicas over time),
and ``delete``. Also ``apply_autoscaler``, the update-with-start that ``modelfleet apply`` uses.

Reads the workflow's queries through the Temporal client; the chart needs matplotlib (the
``plot`` extra), imported only when asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from temporalio.client import Client, WithStartWorkflowOperation
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError

from modelfleet.api.autoscalers import ModelAutoscaler
from modelfleet.autoscaling.records import AutoscalerStatus, Decision
from modelfleet.cli.connection import AddressOption, NamespaceOption, open_client, run_async
from modelfleet.cli.connection import settings as temporal_settings
from modelfleet.cli.output import EXIT_FAILED, console, err_console
from modelfleet.contracts.activity_names import TASK_QUEUE
from modelfleet.workflows.autoscaler import AutoscalerInput, AutoscalerWorkflow, autoscaler_id

autoscaler_app = typer.Typer(help="What a ModelAutoscaler decided and why.", no_args_is_help=True)

NameArg = Annotated[str, typer.Argument(help="The ModelAutoscaler's name.")]
NsOpt = Annotated[str, typer.Option("--namespace", "-n", help="Its namespace.")]


async def apply_autoscaler(client: Client, resource: ModelAutoscaler) -> str:
    """Start (or update) the autoscaler's workflow; returns its workflow ID."""
    wid = autoscaler_id(resource.namespace, resource.name)
    await client.execute_update_with_start_workflow(
        AutoscalerWorkflow.apply,
        resource,
        start_workflow_operation=WithStartWorkflowOperation(
            AutoscalerWorkflow.run,
            AutoscalerInput(spec=resource),
            id=wid,
            task_queue=TASK_QUEUE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            static_summary=(
                f"ModelAutoscaler {resource.namespace}/{resource.name} -> "
                f"ModelDeployment {resource.spec.scale_target_ref.name}"
            ),
        ),
    )
    return wid


async def fetch(
    client: Client, namespace: str, name: str, limit: int
) -> tuple[AutoscalerStatus, list[Decision]]:
    handle = client.get_workflow_handle(autoscaler_id(namespace, name))
    status: AutoscalerStatus = await handle.query(AutoscalerWorkflow.status)
    decisions: list[Decision] = await handle.query(AutoscalerWorkflow.decisions, limit)
    return status, decisions


def _metric_cell(decision: Decision) -> str:
    parts = []
    for reading in decision.metrics:
        value = "-" if reading.value is None else f"{reading.value:.3g}"
        parts.append(f"{reading.metric} {value}/{reading.target:g}")
    return "\n".join(parts)


def history_table(decisions: Sequence[Decision]) -> Table:
    table = Table(show_lines=False)
    for column in ("TIME", "REPLICAS", "METRIC (VALUE/TARGET)", "RECOMMENDED", "DESIRED"):
        table.add_column(column)
    table.add_column("APPLIED")
    table.add_column("REASON", overflow="fold")
    for d in decisions:
        reason = d.reason + (f"\n[yellow]{d.outcome}[/]" if d.outcome else "")
        table.add_row(
            d.at.strftime("%H:%M:%S"),
            str(d.current),
            _metric_cell(d),
            str(d.recommended),
            str(d.desired),
            str(d.applied),
            reason,
        )
    return table


def plot_history(decisions: Sequence[Decision], path: Path, title: str) -> Path:
    """A PNG of each metric against its target (top) and of the observed, recommended, desired
    and applied replicas, with manual scales marked (bottom), over the decisions' times."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError("the chart needs matplotlib: pip install 'modelfleet[plot]'") from None
    times = [d.at for d in decisions]
    figure, (load_ax, replica_ax) = plt.subplots(2, 1, sharex=True, figsize=(10, 6))
    metrics = sorted({r.metric for d in decisions for r in d.metrics})
    for metric in metrics:
        values = [next((r.value for r in d.metrics if r.metric == metric), None) for d in decisions]
        points = [(t, v) for t, v in zip(times, values, strict=True) if v is not None]
        if points:
            line = load_ax.plot(*zip(*points, strict=True), marker=".", label=metric)[0]
            target = next(r.target for d in decisions for r in d.metrics if r.metric == metric)
            load_ax.axhline(target, color=line.get_color(), linestyle="--", linewidth=0.8)
    load_ax.set_ylabel("per-replica value (dashed: target)")
    if metrics:
        load_ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    series: list[tuple[str, list[Any], str]] = [
        ("observed", [d.current for d in decisions], "-."),
        ("recommended", [d.recommended for d in decisions], ":"),
        ("desired (stabilised)", [d.desired for d in decisions], "--"),
        ("applied", [d.applied for d in decisions], "-"),
    ]
    for label, values, style in series:
        replica_ax.step(times, values, where="post", linestyle=style, label=label)
    overridden = [d for d in decisions if d.outcome.startswith("overridden")]
    if overridden:
        replica_ax.scatter(
            [d.at for d in overridden],
            [d.current for d in overridden],
            marker="x",
            color="red",
            zorder=3,
            label="manual scale (overridden)",
        )
    replica_ax.set_ylabel("replicas")
    replica_ax.set_xlabel("time (UTC)")
    replica_ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    figure.suptitle(title)
    figure.autofmt_xdate()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def _fail(namespace: str, name: str, exc: RPCError) -> typer.Exit:
    err_console.print(f"[red]error[/]: autoscaler {namespace}/{name}: {exc.message}")
    return typer.Exit(EXIT_FAILED)


@autoscaler_app.command("status")
def status(
    name: NameArg,
    namespace: NsOpt = "default",
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """The target, bounds, current count and the last decision with its reason."""
    s = temporal_settings(address, temporal_namespace)

    async def go() -> tuple[AutoscalerStatus, list[Decision]]:
        return await fetch(await open_client(s), namespace, name, 1)

    try:
        st, _ = run_async(go)
    except RPCError as exc:
        raise _fail(namespace, name, exc) from None
    console.print(
        f"ModelAutoscaler {st.namespace}/{st.name} -> ModelDeployment {st.target}  "
        f"replicas {st.current if st.current is not None else '?'} "
        f"(min {st.min_replicas}, max {st.max_replicas})"
    )
    if st.problem:
        console.print(f"[red]problem[/]: {st.problem}")
    if st.last_decision is not None:
        console.print(history_table([st.last_decision]))
    console.print(f"[dim]{s.workflow_url(autoscaler_id(namespace, name))}[/]")


@autoscaler_app.command("history")
def history(
    name: NameArg,
    namespace: NsOpt = "default",
    limit: Annotated[int, typer.Option(help="How many recent decisions.")] = 40,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Also draw a chart to this PNG file.")
    ] = None,
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """The recent decisions: inputs, recommended, desired and applied counts, and why."""
    s = temporal_settings(address, temporal_namespace)

    async def go() -> tuple[AutoscalerStatus, list[Decision]]:
        return await fetch(await open_client(s), namespace, name, limit)

    try:
        st, decisions = run_async(go)
    except RPCError as exc:
        raise _fail(namespace, name, exc) from None
    console.print(history_table(decisions))
    if plot is not None:
        if not decisions:
            err_console.print("[yellow]no decisions yet[/]: nothing to plot")
            raise typer.Exit(EXIT_FAILED)
        try:
            written = plot_history(
                decisions, plot, f"ModelAutoscaler {namespace}/{name} -> {st.target}"
            )
        except (RuntimeError, OSError) as exc:
            err_console.print(f"[red]error[/]: {exc}")
            raise typer.Exit(EXIT_FAILED) from None
        console.print(f"chart written to {written}")


@autoscaler_app.command("delete")
def delete(
    name: NameArg,
    namespace: NsOpt = "default",
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """Stop autoscaling; the deployment keeps its current replica count."""
    s = temporal_settings(address, temporal_namespace)

    async def go() -> AutoscalerStatus:
        client = await open_client(s)
        handle = client.get_workflow_handle(autoscaler_id(namespace, name))
        result: AutoscalerStatus = await handle.execute_update(AutoscalerWorkflow.delete)
        return result

    try:
        st = run_async(go)
    except RPCError as exc:
        raise _fail(namespace, name, exc) from None
    console.print(
        f"deleted ModelAutoscaler {namespace}/{name}; ModelDeployment {st.target} stays at "
        f"{st.current if st.current is not None else 'its current'} replica(s)"
    )
