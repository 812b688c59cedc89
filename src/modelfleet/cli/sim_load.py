"""``modelfleet sim load SERVICE``: steady OpenAI traffic through a service's address, with live
progress and, at the end, latency and time-to-first-token percentiles, errors and how requests
spread over the pods that served them. For rehearsing a ModelAutoscaler on the simulated fleet.

SERVICE is a ModelService (``NAME`` with ``-n NAMESPACE``, or ``NAMESPACE/NAME``), whose address
is read from its workflow's ``status`` query, or a base URL (``http://...``) used as is.

Development tooling: Temporal client calls (to resolve a service), HTTP to that one address
(:mod:`modelfleet.sim.load`) and console output. The API key, if any, is only sent, never
printed.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated

import typer
from rich.live import Live
from rich.table import Table
from temporalio.service import RPCError

from modelfleet.cli.connection import AddressOption, NamespaceOption, open_client
from modelfleet.cli.connection import settings as temporal_settings
from modelfleet.cli.extras import sim_extra
from modelfleet.cli.output import EXIT_FAILED, EXIT_INVALID, EXIT_OK, console, err_console
from modelfleet.cli.serving_inspect import service_status

if TYPE_CHECKING:
    from modelfleet.sim.load import LoadProgress, LoadReport

__all__ = ["WAIT_HEADER", "load_command", "report_table"]

# The simulated gateway holds a request for a service with no Ready backend up to this many
# seconds (scale from zero) when the client sends it.
WAIT_HEADER = "x-modelfleet-wait-for-backend"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f} ms"


def report_table(report: LoadReport) -> Table:
    table = Table(box=None, header_style="bold", title="Load")
    for column in ("SENT", "OK", "ERRORS", "P50", "P90", "P99", "TTFT P50", "TTFT P99"):
        table.add_column(column)
    table.add_row(
        str(report.sent),
        str(report.ok),
        str(report.failed),
        _ms(report.latency(50)),
        _ms(report.latency(90)),
        _ms(report.latency(99)),
        _ms(report.ttft(50)),
        _ms(report.ttft(99)),
    )
    return table


def _progress_line(p: LoadProgress) -> str:
    return (
        f"{p.elapsed:5.0f} s  sent {p.sent}  done {p.done}  in flight {p.in_flight}  "
        f"errors {p.errors}  p50 {_ms(p.p50)}"
    )


async def _address(service: str, namespace: str, address: str | None, tns: str | None) -> str:
    if service.startswith(("http://", "https://")):
        return service
    ns, _, name = service.rpartition("/")
    client = await open_client(temporal_settings(address, tns))
    status = await service_status(client, ns or namespace, name)
    if status.address is None:
        raise LookupError(f"ModelService {ns or namespace}/{name} has no address yet")
    return status.address


def load_command(
    service: Annotated[str, typer.Argument(help="ModelService name (or NS/NAME), or a URL.")],
    rps: Annotated[float, typer.Option("--rps", help="Requests per second.")] = 5.0,
    duration: Annotated[float, typer.Option("--duration", help="Seconds of load.")] = 30.0,
    namespace: Annotated[str, typer.Option("--namespace", "-n", help="Its namespace.")] = (
        "default"
    ),
    prompt_tokens: Annotated[int, typer.Option("--prompt-tokens")] = 16,
    max_tokens: Annotated[int, typer.Option("--max-tokens")] = 64,
    model: Annotated[str | None, typer.Option("--model", help="Default: the first listed.")] = None,
    stream: Annotated[bool, typer.Option("--stream/--no-stream", help="Measure TTFT.")] = True,
    wait_for_backend: Annotated[
        float | None,
        typer.Option(
            "--wait-for-backend",
            help="Seconds the gateway may hold a request while the service has no replica.",
        ),
    ] = None,
    api_key: Annotated[
        str | None, typer.Option("--api-key", envvar="OPENAI_API_KEY", show_default=False)
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Per-request seconds.")] = 60.0,
    address: AddressOption = None,
    temporal_namespace: NamespaceOption = None,
) -> None:
    """Send OpenAI chat completions through a service at a steady rate; print percentiles."""
    # Imported here: the rest of the CLI loads without the simulator package.
    with sim_extra("modelfleet sim load"):
        from modelfleet.sim.load import LoadSpec, run_load
    try:
        base = asyncio.run(_address(service, namespace, address, temporal_namespace))
    except (LookupError, RPCError) as exc:
        err_console.print(f"[red]error[/]: cannot resolve {service}: {exc}")
        raise typer.Exit(EXIT_FAILED) from None
    headers = {WAIT_HEADER: f"{wait_for_backend:g}"} if wait_for_backend else {}
    try:
        spec = LoadSpec(
            base_url=base,
            rps=rps,
            duration=duration,
            model=model,
            prompt_tokens=prompt_tokens,
            max_tokens=max_tokens,
            stream=stream,
            timeout=timeout,
            api_key=api_key,
            headers=headers,
        )
    except ValueError as exc:
        err_console.print(f"[red]error[/]: {exc}")
        raise typer.Exit(EXIT_INVALID) from None
    console.print(f"{rps:g} req/s for {duration:g} s to {base}")
    with Live(console=console, transient=True, auto_refresh=False) as live:

        def show(p: LoadProgress) -> None:
            live.update(_progress_line(p), refresh=True)

        try:
            report = asyncio.run(run_load(spec, show))
        except (ValueError, OSError) as exc:
            err_console.print(f"[red]error[/]: {base}: {exc}")
            raise typer.Exit(EXIT_FAILED) from None
    console.print(report_table(report))
    for kind, count in report.errors.most_common():
        console.print(f"  [red]{count} x {kind}[/]")
    if report.skipped:
        console.print(f"  [yellow]{report.skipped} not sent: too many requests in flight[/]")
    if report.served_by:
        spread = ", ".join(f"{pod} {n}" for pod, n in sorted(report.served_by.items()))
        console.print(f"Served by: {spread}")
    raise typer.Exit(EXIT_OK if report.ok else EXIT_FAILED)
