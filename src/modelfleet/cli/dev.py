"""``modelfleet dev`` (the embedded default: Temporal dev server + simulated fleet + worker) and
``modelfleet demo`` (dev, then roll out the quickstart and follow it live).

Both need the ``sim`` extra (the simulator and the dev server binary): the environment module is
imported only when one of them runs, through ``cli.extras``, so the rest of the CLI (and the
worker) loads without it."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelDeployment
from modelfleet.api.loading import load_paths
from modelfleet.api.manifest_errors import InvalidManifestsError
from modelfleet.cli.apply import apply_all
from modelfleet.cli.demo_serving import chat_through_services
from modelfleet.cli.devlock import claim, clear_state_dir
from modelfleet.cli.extras import require_temporal_cli, sim_extra
from modelfleet.cli.inspect import watch_rollout
from modelfleet.cli.output import (
    EXIT_FAILED,
    EXIT_INVALID,
    EXIT_OK,
    console,
    print_manifest_errors,
    print_table,
)
from modelfleet.cli.sim import STATE_FILE, write_state
from modelfleet.worker.devserver import DevServerError
from modelfleet.worker.logs import LogFormat, configure_logging, quiet_stop

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from modelfleet.cli.devenv import DevEnvironment

    DevEnvironmentFactory = Callable[..., AbstractAsyncContextManager[DevEnvironment]]

QUICKSTART = Path("examples/quickstart")

FleetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--fleet",
        help="Class, cluster and gateway manifests (default: examples/quickstart).",
    ),
]
StateOption = Annotated[
    Path, typer.Option("--state-dir", help="Temporal SQLite state, kubeconfigs, logs.")
]
StartupOption = Annotated[
    float, typer.Option("--startup-seconds", help="Simulated engine start-up time.")
]


def _fleet_paths(fleet: list[str] | None) -> list[str]:
    if fleet:
        return fleet
    if not QUICKSTART.is_dir():
        console.print("[red]error[/]: no --fleet given and examples/quickstart not found here")
        raise typer.Exit(EXIT_INVALID)
    return [str(QUICKSTART)]


def _banner(env: DevEnvironment) -> None:
    console.print(f"[bold green]modelfleet dev is up[/]  Temporal {env.settings.address}")
    if env.server.ui_url:
        console.print(f"Temporal UI: [bold]{env.server.ui_url}[/]", soft_wrap=True)
    rows = []
    for r in env.resources:
        if isinstance(r, InferenceCluster):
            pools = ", ".join(
                f"{p.name}({p.class_name} x{p.capacity_nodes})" for p in r.spec.node_pools
            )
            rows.append([r.name, escape(pools), escape(str(env.kubeconfig_dir / f"{r.name}.yaml"))])
    console.print("[bold]Simulated fleet[/]")
    # Whole paths even in a pipe or a log file: the kubeconfig paths are meant to be copied.
    print_table(["CLUSTER", "POOLS", "KUBECONFIG"], rows, flexible=("POOLS",))
    if env.management_kubeconfig is not None:
        console.print(
            "[bold]Management cluster[/] (the CRDs installed, the controller watching it): "
            f"[bold]kubectl --kubeconfig {escape(str(env.management_kubeconfig))} apply -f "
            "examples/quickstart/[/]",
            soft_wrap=True,
        )
    # The UI address too: the CLI's workflow links (rollout status, describe) point there.
    ui = f" MODELFLEET_TEMPORAL_UI={env.server.ui_url}" if env.server.ui_url else ""
    console.print(
        "Point the CLI at it: [bold]export "
        f"MODELFLEET_TEMPORAL_ADDRESS={env.settings.address}{ui}[/]",
        soft_wrap=True,
    )
    if env.global_lb is not None:
        # The simulated global load balancer has no DNS: its hostnames resolve through the edge.
        console.print(
            f"Global load balancer (Cloudflare-shaped): API {env.global_lb.api_url}; services'"
            f" global addresses through its edge: [bold]export HTTP_PROXY={env.global_lb.edge_url}"
            "[/]",
            soft_wrap=True,
        )


def _dev_environment(verb: str) -> DevEnvironmentFactory:
    """The dev environment, or the one-line hint (exit 2) when the sim extra is absent."""
    require_temporal_cli(verb)
    with sim_extra(verb):
        from modelfleet.cli.devenv import dev_environment
    return dev_environment


def _install_stop(stop: asyncio.Event) -> None:
    """Ctrl-C (or SIGTERM) stops everything, quietly: the worker's logs from then on are errors
    only, one line each (the activities it cancels are not failures)."""
    # The worker's log lines on this terminal: warnings and errors, an expected failure (a
    # stockout, a readiness deadline) in one line, its stack only with MODELFLEET_DEBUG=1.
    handler = configure_logging(LogFormat.TEXT, logging.WARNING)

    def stopping() -> None:
        quiet_stop(handler)
        stop.set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping)


def dev(
    fleet: FleetOption = None,
    state_dir: StateOption = Path(".modelfleet/dev"),
    port: Annotated[int, typer.Option(help="Temporal frontend port.")] = 7233,
    ui_port: Annotated[int, typer.Option(help="Temporal UI port.")] = 8233,
    startup_seconds: StartupOption = 3.0,
    clouds: Annotated[
        bool,
        typer.Option(
            "--clouds/--no-clouds",
            help="Run the simulated GKE, EKS and AKS clouds, the worker pointed at them, so GKE, "
            "EKS and AKS clusters can be applied (default: on).",
        ),
    ] = True,
) -> None:
    """Start Temporal, a simulated fleet (and clouds) and a worker; Ctrl-C stops everything."""
    dev_environment = _dev_environment("modelfleet dev")
    paths = _fleet_paths(fleet)

    async def go() -> int:
        stop = asyncio.Event()
        _install_stop(stop)
        async with dev_environment(
            state_dir,
            paths,
            port=port,
            ui_port=ui_port,
            startup_seconds=startup_seconds,
            clouds=clouds,
            management=True,
        ) as env:
            # The fleet's state file, so `modelfleet sim faults` finds this fleet and its clouds.
            sim_state = state_dir / "sim" / STATE_FILE
            write_state(env.fleet, sim_state, env.clouds)
            try:
                _banner(env)
                console.print(
                    "Ready. Try: modelfleet apply -f examples/quickstart/qwen3-8b.yaml\n"
                    "Inject faults: modelfleet sim faults CLUSTER --state-dir "
                    f"{state_dir / 'sim'} --error-rate 0.2",
                    soft_wrap=True,
                )
                if env.clouds is not None:
                    console.print(
                        "Simulated GKE, EKS and AKS are up (the worker uses them): try "
                        "modelfleet apply -f examples/provisioning/gke.yaml, then "
                        "modelfleet rollout status cluster/gke-central\n"
                        f"Cloud errors: modelfleet sim faults --state-dir {state_dir / 'sim'} "
                        "--cloud gke --fail stockout",
                        soft_wrap=True,
                    )
                await stop.wait()
                console.print("stopping...")
            finally:
                sim_state.unlink(missing_ok=True)
        return EXIT_OK

    # Refuse before starting anything: a second stack on the same ports would find the first
    # one's server answering there and run its worker (with another fleet's kubeconfigs under
    # the same cluster names) against it; on the same state directory it would overwrite them.
    with claim(
        "modelfleet dev",
        [state_dir, state_dir / "sim"],
        {"--port": port, "--ui-port": ui_port},
    ):
        raise typer.Exit(_run(go))


def demo(
    once: Annotated[bool, typer.Option("--once", help="Exit with the rollout's result.")] = False,
    fleet: FleetOption = None,
    deployments: Annotated[
        list[str] | None,
        typer.Option("--deploy", "-f", help="Deployments to roll out (default: the quickstart)."),
    ] = None,
    state_dir: StateOption = Path(".modelfleet/demo"),
    startup_seconds: StartupOption = 2.0,
    timeout: Annotated[float, typer.Option(help="Give up after this many seconds.")] = 300,
) -> None:
    """dev + apply the quickstart + follow the rollout live."""
    dev_environment = _dev_environment("modelfleet demo")
    paths = _fleet_paths(fleet)
    result = load_paths(deployments or paths)
    if result.errors:
        print_manifest_errors(result.errors)
        raise typer.Exit(EXIT_INVALID)
    to_roll = [r for r in result.resources if isinstance(r, ModelDeployment)]

    async def go() -> int:
        stop = asyncio.Event()
        _install_stop(stop)
        async with dev_environment(
            state_dir, paths, port=None, ui_port=None, startup_seconds=startup_seconds
        ) as env:
            _banner(env)
            failures = await apply_all(env.client, env.settings, list(to_roll))
            ok = failures == 0
            for md in to_roll:
                ok = await watch_rollout(env.client, md.namespace, md.name, timeout) and ok
            if ok:
                ok = await chat_through_services(env.client, list(result.resources))
            console.print(
                "[bold green]rollout complete: every replica is Ready[/]"
                if ok
                else "[bold red]rollout did not complete[/]"
            )
            if env.server.ui_url:
                console.print(f"Inspect it in the Temporal UI: {env.server.ui_url}")
            if once:
                console.print(
                    "Stopping now (--once). `modelfleet demo` keeps everything running for the UI."
                )
            else:
                console.print("Still running; Ctrl-C to stop.")
                await stop.wait()
            return EXIT_OK if ok else EXIT_FAILED

    with claim("modelfleet demo", [state_dir]):
        # Fresh state each time: a demo should not resume yesterday's rollout.
        clear_state_dir(state_dir)
        with claim("modelfleet demo", [state_dir / "sim"]):
            raise typer.Exit(_run(go))


def _run(go: Callable[[], Coroutine[Any, Any, int | None]]) -> int:
    try:
        code = asyncio.run(go())
    except InvalidManifestsError as exc:
        print_manifest_errors(exc.errors)
        return EXIT_INVALID
    except DevServerError as exc:
        console.print(f"[red]error[/]: {exc}")
        return EXIT_FAILED
    return code or EXIT_OK
