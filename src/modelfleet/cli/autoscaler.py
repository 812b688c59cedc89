"""``modelfleet autoscaler``: what a ModelAutoscaler decided and why. ``status`` (target, bounds,
the last decision), ``history`` (the decision log as a table, and with ``--plot out.png`` a chart
of each metric against its target and of recommended, desired and applied replicas over time),
and ``delete`` (``applying.kinds.apply_autoscaler`` is what ``modelfleet apply`` uses).

Reads the workflow's queries through the Temporal client; the chart needs matplotlib (the
``plot`` extra), imported only when asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from temporalio.client import Client

from modelfleet.autoscaler.records import AutoscalerStatus, Decision
from modelfleet.autoscaler.workflow import AutoscalerWorkflow, autoscaler_id
from modelfleet.cli.connection import AddressOption, NamespaceOption, open_client, run_async
from modelfleet.cli.connection import settings as temporal_settings
from modelfleet.cli.errors import NotFoundError
from modelfleet.cli.output import EXIT_FAILED, console, err_console, print_table
from modelfleet.cli.resources import connect_with_worker, is_running, query
from modelfleet.cli.targets import NsOption, resolve_namespace
from modelfleet.worker.settings import TemporalSettings

autoscaler_app = typer.Typer(help="What a ModelAutoscaler decided and why.", no_args_is_help=True)

NameArg = Annotated[str, typer.Argument(help="The ModelAutoscaler's name.")]


async def fetch(
    client: Client, namespace: str, name: str, limit: int
) -> tuple[AutoscalerStatus, list[Decision]]:
    """The status and the last ``limit`` decisions (bounded queries: no worker, no hang)."""
    handle = client.get_workflow_handle(autoscaler_id(namespace, name))
    what = f"autoscaler {namespace}/{name}"
    status: AutoscalerStatus = await query(handle, AutoscalerWorkflow.status, what=what)
    decisions: list[Decision] = await query(handle, AutoscalerWorkflow.decisions, limit, what=what)
    return status, decisions


def _where(
    namespace: str | None, address: str | None, temporal_namespace: str | None
) -> tuple[TemporalSettings, str]:
    """How to reach Temporal, and the namespace a command is about."""
    return temporal_settings(address, temporal_namespace), resolve_namespace(namespace).name


def _read(
    s: TemporalSettings, namespace: str, name: str, limit: int
) -> tuple[AutoscalerStatus, list[Decision]]:
    """``fetch`` on a fresh client, for a command."""

    async def go() -> tuple[AutoscalerStatus, list[Decision]]:
        return await fetch(await open_client(s), namespace, name, limit)

    return run_async(go)


HISTORY_HEADER = [
    "TIME",
    "REPLICAS",
    "METRICS (VALUE/TARGET)",
    "RECOMMENDED",
    "DESIRED",
    "APPLIED",
    "REASON",
]


def _metric_cell(decision: Decision) -> str:
    parts = []
    for reading in decision.metrics:
        value = "-" if reading.value is None else f"{reading.value:.3g}"
        parts.append(f"{reading.metric} {value}/{reading.target:g}")
    return ", ".join(parts)


def history_rows(decisions: Sequence[Decision]) -> list[list[str]]:
    """One line per decision (a table that stays whole in a pipe: see ``print_table``)."""
    rows = []
    for d in decisions:
        reason = escape(d.reason) + (f" [yellow]({escape(d.outcome)})[/]" if d.outcome else "")
        rows.append(
            [
                d.at.strftime("%H:%M:%S"),
                str(d.current),
                escape(_metric_cell(d)),
                str(d.recommended),
                str(d.desired),
                str(d.applied),
                reason,
            ]
        )
    return rows


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


@autoscaler_app.command("status")
def status(
    name: NameArg,
    namespace: NsOption = None,
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """The target, bounds, current count and the last decision with its reason."""
    s, ns = _where(namespace, address, temporal_namespace)
    st, _ = _read(s, ns, name, 1)
    console.print(
        f"ModelAutoscaler {st.namespace}/{st.name} -> ModelDeployment {st.target}  "
        f"replicas {st.current if st.current is not None else '?'} "
        f"(min {st.min_replicas}, max {st.max_replicas})"
    )
    if st.problem:
        console.print(f"[red]problem[/]: {escape(st.problem)}")
    if st.last_decision is not None:
        print_table(HISTORY_HEADER, history_rows([st.last_decision]), flexible=("REASON",))
    console.print(f"[dim]{s.workflow_url(autoscaler_id(ns, name))}[/]", soft_wrap=True)


@autoscaler_app.command("history")
def history(
    name: NameArg,
    namespace: NsOption = None,
    limit: Annotated[int, typer.Option(help="How many recent decisions.", min=1)] = 40,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Also draw a chart to this PNG file.")
    ] = None,
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """The recent decisions: inputs, recommended, desired and applied counts, and why."""
    s, ns = _where(namespace, address, temporal_namespace)
    st, decisions = _read(s, ns, name, limit)
    print_table(HISTORY_HEADER, history_rows(decisions), flexible=("REASON",))
    if plot is not None:
        if not decisions:
            err_console.print("[yellow]no decisions yet[/]: nothing to plot")
            raise typer.Exit(EXIT_FAILED)
        try:
            written = plot_history(decisions, plot, f"ModelAutoscaler {ns}/{name} -> {st.target}")
        except (RuntimeError, OSError) as exc:
            err_console.print(f"[red]error[/]: {exc}")
            raise typer.Exit(EXIT_FAILED) from None
        console.print(f"chart written to {written}")


@autoscaler_app.command("delete")
def delete(
    name: NameArg,
    namespace: NsOption = None,
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """Stop autoscaling; the deployment keeps its current replica count."""
    s, ns = _where(namespace, address, temporal_namespace)

    async def go() -> AutoscalerStatus:
        client = await connect_with_worker(s)
        if not await is_running(client, autoscaler_id(ns, name)):
            raise NotFoundError(f"autoscaler {ns}/{name} not found")
        handle = client.get_workflow_handle(autoscaler_id(ns, name))
        result: AutoscalerStatus = await handle.execute_update(AutoscalerWorkflow.delete)
        return result

    st = run_async(go)
    console.print(
        f"deleted ModelAutoscaler {ns}/{name}; ModelDeployment {st.target} stays at "
        f"{st.current if st.current is not None else 'its current'} replica(s)"
    )
