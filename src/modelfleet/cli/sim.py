"""``modelfleet sim``: run a simulated fleet on its own, and change its faults while it runs.

``sim up`` builds a simulated fleet from InferenceClass/InferenceCluster manifests (default: the
repository's ``examples/quickstart``), writes one kubeconfig per cluster to
``<state dir>/kubeconfigs/<cluster>.yaml`` (default state dir: ``.modelfleet/sim``) and a state
file ``<state dir>/sim.json`` naming the emulator's URL, starts the simulated clouds (the GKE
fake and moto behind its EKS layer; ``--no-clouds`` skips them) and prints the worker settings
that point a worker at them, then serves until SIGINT/SIGTERM. ``modelfleet dev`` writes the
same state file for its fleet (``<dev state dir>/sim/sim.json``).
``sim faults CLUSTER`` reads that state file (``--state-dir``, or by default the first of
``.modelfleet/sim`` and ``.modelfleet/dev/sim`` holding one) and PATCHes the cluster's faults
through the emulator's admin endpoint; ``sim faults --cloud gke|eks|aks`` adds a cloud error to the
fake cloud's (cli/sim_cloud_faults.py).

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
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.loading import load_paths
from modelfleet.cli.devlock import claim
from modelfleet.cli.extras import sim_extra
from modelfleet.cli.output import (
    EXIT_FAILED,
    EXIT_INVALID,
    EXIT_OK,
    console,
    err_console,
    print_manifest_errors,
)
from modelfleet.cli.sim_cloud_faults import Cloud
from modelfleet.cli.sim_faults import DEFAULT_STATE_DIR, STATE_FILE, faults
from modelfleet.cli.sim_load import load_command

if TYPE_CHECKING:
    from modelfleet.sim.clouds.clouds import SimulatedClouds
    from modelfleet.sim.simulated_fleet import SimulatedFleet

__all__ = ["STATE_FILE", "sim_app", "write_state"]

# The repository's quickstart, found from this file (src/modelfleet/cli/sim.py) or the cwd.
_REPO_QUICKSTART = Path(__file__).resolve().parents[3] / "examples" / "quickstart"
_CWD_QUICKSTART = Path("examples/quickstart")
# Classes whose machines the simulated clouds know besides the fleet's own (a real cloud knows
# every machine type; the simulated one knows those some class describes).
_PROVISIONING_EXAMPLES = (
    Path("examples/provisioning"),
    Path(__file__).resolve().parents[3] / "examples" / "provisioning",
)

sim_app = typer.Typer(
    help="Run a simulated GPU fleet (emulated Kubernetes API servers) for development.",
    no_args_is_help=True,
)

sim_app.command("load")(load_command)  # the load generator: cli/sim_load.py
sim_app.command("faults")(faults)  # fault injection: cli/sim_faults.py

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


def cloud_catalog(classes: list[InferenceClass]) -> list[InferenceClass]:
    """The classes whose machines the simulated clouds know: ``classes``, then those of the
    repository's examples/provisioning when it is there (a cluster applied later may use them)."""
    known = {c.name: c for c in classes}
    for folder in _PROVISIONING_EXAMPLES:
        if folder.is_dir():
            for r in load_paths([str(folder)]).resources:
                if isinstance(r, InferenceClass):
                    known.setdefault(r.name, r)
            break
    return list(known.values())


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
    clouds: Annotated[
        bool,
        typer.Option(
            "--clouds/--no-clouds", help="Also run the simulated GKE, EKS (moto) and AKS clouds."
        ),
    ] = True,
) -> None:
    """Start a simulated fleet (and clouds) and serve it until interrupted (SIGINT/SIGTERM)."""
    classes, clusters = _load(fleet or _default_fleet())
    # Refuse before starting anything: another fleet's kubeconfigs and state file live in a
    # state directory in use, and a port in use is another process's.
    with claim("modelfleet sim up", [state_dir], {"--port": port}):
        raise typer.Exit(
            asyncio.run(_serve(classes, clusters, state_dir, port, startup_seconds, clouds))
        )


async def _serve(
    classes: list[InferenceClass],
    clusters: list[InferenceCluster],
    state_dir: Path,
    port: int,
    startup_seconds: float | None,
    with_clouds: bool,
) -> int:
    # Imported here: the emulator (aiohttp, the sim extra) is only needed by this verb.
    with sim_extra("modelfleet sim up"):
        from modelfleet.sim.clouds.clouds import SimulatedClouds
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
    clouds: SimulatedClouds | None = None
    try:
        if with_clouds:
            clouds = await SimulatedClouds.start(
                cloud_catalog(classes), sim.server, state_dir=state_dir / "clouds"
            )
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
        write_state(sim, state_path, clouds)
        console.print(table)
        console.print(f"Kubeconfigs: {sim.kubeconfig_dir}  State: {state_path}")
        if clouds is not None:
            print_cloud_settings(clouds)
        # Scripts (and tests) wait for this exact line.
        console.print(f"modelfleet sim ready: {sim.base_url} ({len(sim.clusters)} clusters)")
        sys.stdout.flush()
        await stop.wait()
        console.print("stopping...")
    finally:
        if clouds is not None:
            await clouds.stop()
        await sim.stop()
        with contextlib.suppress(FileNotFoundError):
            state_path.unlink()
    console.print("stopped")
    return EXIT_OK


def print_cloud_settings(clouds: SimulatedClouds) -> None:
    """How to point a worker at the simulated clouds (the settings docs/clouds.md lists), and
    how to make them fail."""
    console.print(
        f"Simulated clouds: GKE {clouds.gke_url}  EKS {clouds.eks_url}  AKS {clouds.aks_url}"
    )
    console.print("Point a worker at them (then `modelfleet worker`):")
    # Simulated stand-ins, not credentials: the fakes accept nothing else. The fakes finish an
    # operation in a few polls, so a short poll interval keeps provisioning quick.
    settings = {**clouds.worker_env(), "MODELFLEET_CLOUD_POLL_SECONDS": "1"}
    for key, value in settings.items():
        print(f"  export {key}={value}")
    console.print(
        "Cloud errors: modelfleet sim faults --cloud gke --fail stockout --target POOL",
        soft_wrap=True,
    )


def write_state(
    sim: SimulatedFleet, state_path: Path, clouds: SimulatedClouds | None = None
) -> None:
    """Write the state file naming ``sim``'s URL, clusters, kubeconfigs and admin endpoints,
    and the simulated clouds' addresses (``sim faults`` reads it); the caller removes it when
    the fleet stops."""
    state: dict[str, Any] = {"pid": os.getpid(), "base_url": sim.base_url, "clusters": {}}
    if clouds is not None:
        state["clouds"] = {
            Cloud.GKE.value: clouds.gke_url,
            Cloud.EKS.value: clouds.eks_url,
            Cloud.AKS.value: clouds.aks_url,
        }
    for cluster in sim.clusters.values():
        state["clusters"][cluster.name] = {
            "server": cluster.server,
            "kubeconfig": str(cluster.kubeconfig.resolve()),
            "admin": sim.admin_url(cluster.name),
        }
    state_path.parent.mkdir(parents=True, exist_ok=True)
    state_path.write_text(json.dumps(state, indent=2) + "\n")
