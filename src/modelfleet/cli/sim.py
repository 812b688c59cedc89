"""``modelfleet sim``: run a simulated fleet on its own, and change its faults while it runs.

``sim up`` builds a simulated fleet from InferenceClass/InferenceCluster manifests (default: the
repository's ``examples/quickstart``), writes one kubeconfig per cluster to
``<state dir>/kubeconfigs/<cluster>.yaml`` (default state dir: ``.modelfleet/sim``) and a state
file ``<state dir>/sim.json`` naming the emulator's URL, then serves until SIGINT/SIGTERM.
``modelfleet dev`` writes the same state file for its fleet (``<dev state dir>/sim/sim.json``).
``sim faults CLUSTER`` reads that state file (``--state-dir``, or by default the first of
``.modelfleet/sim`` and ``.modelfleet/dev/sim`` holding one) and PATCHes the cluster's faults
through the emulator's admin endpoint.

This is development tooling: it may start the simulator (``modelfleet.sim``), write under the
state directory and talk to the emulator's loopback admin endpoint with the standard library. It
never contacts any other host and holds no credentials (simulated clusters have none).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.loading import load_paths
from modelfleet.cli.extras import sim_extra
from modelfleet.cli.output import (
    EXIT_FAILED,
    EXIT_INVALID,
    EXIT_OK,
    console,
    err_console,
    print_manifest_errors,
)
from modelfleet.cli.sim_load import load_command

if TYPE_CHECKING:
    from modelfleet.sim.simulated_fleet import SimulatedFleet

__all__ = ["STATE_FILE", "sim_app", "write_state"]

STATE_FILE = "sim.json"
DEFAULT_STATE_DIR = Path(".modelfleet/sim")
# Where `sim faults` looks without --state-dir: `sim up`'s default, then `modelfleet dev`'s fleet.
DEFAULT_STATE_DIRS = (DEFAULT_STATE_DIR, Path(".modelfleet/dev/sim"))
# The repository's quickstart, found from this file (src/modelfleet/cli/sim.py) or the cwd.
_REPO_QUICKSTART = Path(__file__).resolve().parents[3] / "examples" / "quickstart"
_CWD_QUICKSTART = Path("examples/quickstart")
_ADMIN_TIMEOUT = 10.0

sim_app = typer.Typer(
    help="Run a simulated GPU fleet (emulated Kubernetes API servers) for development.",
    no_args_is_help=True,
)

sim_app.command("load")(load_command)  # the load generator: cli/sim_load.py

StateDirOption = Annotated[
    Path,
    typer.Option("--state-dir", help="Kubeconfigs and the state file live here."),
]


def _default_fleet() -> list[str]:
    for candidate in (_CWD_QUICKSTART, _REPO_QUICKSTART):
        if candidate.is_dir():
            return [str(candidate)]
    err_console.print("[red]error[/]: no --fleet given and examples/quickstart was not found")
    raise typer.Exit(EXIT_INVALID)


def _load(paths: list[str]) -> tuple[list[InferenceClass], list[InferenceCluster]]:
    result = load_paths(paths)
    if result.errors:
        print_manifest_errors(result.errors)
        raise typer.Exit(EXIT_INVALID)
    classes = [r for r in result.resources if isinstance(r, InferenceClass)]
    clusters = [r for r in result.resources if isinstance(r, InferenceCluster)]
    if not clusters:
        err_console.print("[red]error[/]: the manifests define no InferenceCluster")
        raise typer.Exit(EXIT_INVALID)
    return classes, clusters


@sim_app.command("up")
def up(
    fleet: Annotated[
        list[str] | None,
        typer.Option("--fleet", help="Class and cluster manifests (default: examples/quickstart)."),
    ] = None,
    state_dir: StateDirOption = DEFAULT_STATE_DIR,
    port: Annotated[int, typer.Option(help="Emulator port on 127.0.0.1 (0: any free port).")] = 0,
    startup_seconds: Annotated[
        float | None,
        typer.Option(
            "--startup-seconds",
            help="Every pod's start-up time (default: per image, e.g. 30 s for vLLM).",
        ),
    ] = None,
) -> None:
    """Start a simulated fleet and serve it until interrupted (SIGINT/SIGTERM)."""
    classes, clusters = _load(fleet or _default_fleet())
    raise typer.Exit(asyncio.run(_serve(classes, clusters, state_dir, port, startup_seconds)))


async def _serve(
    classes: list[InferenceClass],
    clusters: list[InferenceCluster],
    state_dir: Path,
    port: int,
    startup_seconds: float | None,
) -> int:
    # Imported here: the emulator (aiohttp, the sim extra) is only needed by this verb.
    with sim_extra("modelfleet sim up"):
        from modelfleet.sim.simulated_fleet import SimulatedFleet

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        sim = await SimulatedFleet.start(
            classes,
            clusters,
            state_dir=state_dir,
            startup_seconds=startup_seconds,
            port=port,
        )
    except OSError as exc:
        err_console.print(f"[red]error[/]: cannot start the emulator on port {port}: {exc}")
        return EXIT_FAILED
    state_path = state_dir / STATE_FILE
    try:
        table = Table(box=None, header_style="bold", title="Simulated fleet")
        for header in ("CLUSTER", "POOL", "CLASS", "NODES", "GPUS", "GATEWAY"):
            table.add_column(header)
        # Paths must stay copyable, so they wrap instead of being truncated with an ellipsis.
        table.add_column("KUBECONFIG", overflow="fold")
        for cluster in sim.clusters.values():
            first = True
            for pool in cluster.pools or ():
                table.add_row(
                    cluster.name if first else "",
                    pool.pool.name,
                    pool.pool.class_name,
                    str(len(pool.nodes)),
                    str(len(pool.nodes) * pool.gpus_per_node),
                    cluster.gateway_address if first else "",
                    str(cluster.kubeconfig) if first else "",
                )
                first = False
        write_state(sim, state_path)
        console.print(table)
        console.print(f"Kubeconfigs: {sim.kubeconfig_dir}  State: {state_path}")
        # Scripts (and tests) wait for this exact line.
        console.print(f"modelfleet sim ready: {sim.base_url} ({len(sim.clusters)} clusters)")
        sys.stdout.flush()
        await stop.wait()
        console.print("stopping...")
    finally:
        await sim.stop()
        with contextlib.suppress(FileNotFoundError):
            state_path.unlink()
    console.print("stopped")
    return EXIT_OK


def write_state(sim: SimulatedFleet, state_path: Path) -> None:
    """Write the state file naming ``sim``'s URL, clusters, kubeconfigs and admin endpoints
    (``sim faults`` reads it); the caller removes it when the fleet stops."""
    state: dict[str, Any] = {"pid": os.getpid(), "base_url": sim.base_url, "clusters": {}}
    for cluster in sim.clusters.values():
        state["clusters"][cluster.name] = {
            "server": cluster.server,
            "kubeconfig": str(cluster.kubeconfig.resolve()),
            "admin": sim.admin_url(cluster.name),
        }
    state_path.parent.mkdir(parents=True, exist_ok=True)
    state_path.write_text(json.dumps(state, indent=2) + "\n")


def _find_state_dir(state_dir: Path | None) -> Path:
    if state_dir is not None:
        return state_dir
    for candidate in DEFAULT_STATE_DIRS:
        if (candidate / STATE_FILE).is_file():
            return candidate
    err_console.print(
        "[red]error[/]: no simulated fleet is running (no "
        + " or ".join(str(d / STATE_FILE) for d in DEFAULT_STATE_DIRS)
        + "); start one with `modelfleet sim up` or `modelfleet dev`, or pass --state-dir"
    )
    raise typer.Exit(EXIT_FAILED)


def _read_state(state_dir: Path) -> dict[str, Any]:
    path = state_dir / STATE_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        err_console.print(
            f"[red]error[/]: no simulated fleet is running ({path} not found); "
            "start one with `modelfleet sim up`"
        )
        raise typer.Exit(EXIT_FAILED) from None
    except ValueError:
        err_console.print(f"[red]error[/]: {path} is not a valid state file")
        raise typer.Exit(EXIT_FAILED) from None
    if not isinstance(data, dict) or not isinstance(data.get("base_url"), str):
        err_console.print(f"[red]error[/]: {path} is not a valid state file")
        raise typer.Exit(EXIT_FAILED)
    return data


def _admin(method: str, url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=_ADMIN_TIMEOUT) as response:
            result = json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")
        with contextlib.suppress(ValueError):
            detail = str(json.loads(detail).get("message", detail))
        err_console.print(f"[red]error[/]: the emulator refused: {exc.code} {detail}")
        raise typer.Exit(EXIT_FAILED) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        err_console.print(
            f"[red]error[/]: cannot reach the simulated fleet at {url} ({reason}); "
            "is `modelfleet sim up` (or `modelfleet dev`) still running?"
        )
        raise typer.Exit(EXIT_FAILED) from None
    return result if isinstance(result, dict) else {}


@sim_app.command("faults")
def faults(
    cluster: Annotated[str, typer.Argument(help="The simulated cluster to change.")],
    error_rate: Annotated[
        float | None,
        typer.Option("--error-rate", min=0.0, max=1.0, help="Share of requests answered 500."),
    ] = None,
    throttle_rate: Annotated[
        float | None,
        typer.Option(
            "--throttle-rate",
            min=0.0,
            max=1.0,
            help="Share of requests answered 429 with Retry-After.",
        ),
    ] = None,
    retry_after: Annotated[
        int | None, typer.Option("--retry-after", min=0, help="Retry-After seconds on 429s.")
    ] = None,
    latency_ms: Annotated[
        float | None, typer.Option("--latency-ms", min=0.0, help="Added latency per request.")
    ] = None,
    dark: Annotated[
        bool | None,
        typer.Option("--dark/--no-dark", help="Stop (or resume) answering any request."),
    ] = None,
    never_ready: Annotated[
        list[str] | None,
        typer.Option(
            "--never-ready",
            help="Workload name glob (or namespace/name) whose pods never become ready "
            "(ImagePullBackOff). Repeatable; replaces the current list.",
        ),
    ] = None,
    crash_after_ready: Annotated[
        float | None,
        typer.Option(
            "--crash-after-ready",
            min=0.0,
            help="Pods crash (CrashLoopBackOff) this many seconds after becoming ready.",
        ),
    ] = None,
    reset: Annotated[
        bool, typer.Option("--reset", help="Clear every fault before applying the options.")
    ] = False,
    deny_access: Annotated[
        list[str] | None,
        typer.Option(
            "--deny-access",
            help='"VERB RESOURCE" glob that access reviews (kubectl auth can-i) deny, e.g. '
            '"delete pods". Repeatable; replaces the current list.',
        ),
    ] = None,
    download_bandwidth: Annotated[
        float | None,
        typer.Option(
            "--download-mib-per-second",
            min=0.001,
            help="Bandwidth of model-weight downloads (ModelCache hydration Jobs), MiB/s.",
        ),
    ] = None,
    fail_downloads: Annotated[
        list[str] | None,
        typer.Option(
            "--fail-downloads",
            help="Job name glob whose download pods fail half-way (see --download-error). "
            "Repeatable; replaces the current list.",
        ),
    ] = None,
    download_error: Annotated[
        str | None,
        typer.Option("--download-error", help="How failing downloads fail: auth or network."),
    ] = None,
    state_dir: Annotated[
        Path | None,
        typer.Option(
            "--state-dir",
            help="The fleet's state directory (default: .modelfleet/sim, then "
            "modelfleet dev's .modelfleet/dev/sim).",
        ),
    ] = None,
) -> None:
    """Change (or, with no options, show) the faults of one simulated cluster."""
    state = _read_state(_find_state_dir(state_dir))
    url = f"{state['base_url']}/_admin/clusters/{cluster}/faults"
    changes: dict[str, Any] = {}
    if error_rate is not None:
        changes["error_rate_500"] = error_rate
    if throttle_rate is not None:
        changes["error_rate_429"] = throttle_rate
    if retry_after is not None:
        changes["retry_after_seconds"] = retry_after
    if latency_ms is not None:
        changes["latency_seconds"] = latency_ms / 1000.0
    if dark is not None:
        changes["dark"] = dark
    if never_ready is not None:
        changes["never_ready"] = list(never_ready)
    if crash_after_ready is not None:
        changes["crash_after_ready_seconds"] = crash_after_ready
    if deny_access is not None:
        changes["deny_access"] = list(deny_access)
    if download_bandwidth is not None:
        changes["download_mib_per_second"] = download_bandwidth
    if fail_downloads is not None:
        changes["fail_downloads"] = list(fail_downloads)
    if download_error is not None:
        changes["download_error"] = download_error
    if reset:
        config = _admin("PUT", url, changes)
    elif changes:
        config = _admin("PATCH", url, changes)
    else:
        config = _admin("GET", url)
    console.print_json(json.dumps(config))
    raise typer.Exit(EXIT_OK)
