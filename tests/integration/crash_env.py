"""A disposable modelfleet environment whose parts can be killed: the simulated quickstart fleet
in the test process (on the test's event loop), the Temporal dev server as a subprocess on a
SQLite file, and the worker as a separate ``python -m modelfleet.cli worker`` process.

Used by the crash-recovery and secret-scan tests, which kill or restart parts and so cannot share
the session ``stack``. Every wait is a bounded condition wait; nothing here blocks the event
loop (the simulator answers the worker from it), so processes are driven with asyncio APIs and
polled, never waited on synchronously. Every process started here is stopped when
``crash_env`` exits, whatever happened inside.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from integration_support import QUICKSTART, wait_for
from temporalio.client import Client

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.naming import LABEL_NAMESPACE, LABEL_REPLICA
from modelfleet.cli.apply import apply_resource
from modelfleet.cli.devenv import load_fleet
from modelfleet.contracts.ids import FLEET_ID, deployment_id
from modelfleet.contracts.status import DeploymentStatus, FleetView, ReplicaPhase
from modelfleet.deployment.workflow import DeploymentWorkflow
from modelfleet.fleet.workflow import FleetWorkflow
from modelfleet.rendering.replica_manifests import ClusterFacts, Step, render_replica
from modelfleet.sim.controllers.kubelet import StartupPolicy
from modelfleet.sim.simulated_fleet import SimulatedFleet
from modelfleet.worker.client import connect
from modelfleet.worker.devserver import DevServer, free_port, start_dev_server
from modelfleet.worker.runner import ensure_fleet
from modelfleet.worker.settings import ENV_PAYLOAD_KEY, TemporalSettings

T = TypeVar("T")

# Written by the cluster about objects, never applied by modelfleet.
CONTROLLER_KINDS = frozenset({"Event"})


async def tolerant(probe: Callable[[], Awaitable[T | None]]) -> T | None:
    """``probe()``, or None while Temporal is unreachable or the workflow not yet started."""
    try:
        return await probe()
    except Exception:  # RPC errors while a server restarts, queries before a worker polls
        return None


def all_ready(n: int) -> Callable[[DeploymentStatus], bool]:
    def check(s: DeploymentStatus) -> bool:
        return (
            s.phase == "Ready"
            and s.ready == n
            and len(s.replicas) == n
            and all(r.phase is ReplicaPhase.READY for r in s.replicas)
        )

    return check


@dataclass
class CrashEnv:
    state_dir: Path
    fleet: SimulatedFleet
    port: int
    settings: TemporalSettings
    worker_env: dict[str, str]
    server: DevServer | None = None
    client: Client | None = None
    worker: asyncio.subprocess.Process | None = None
    worker_logs: list[Path] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def credentials_dir(self) -> Path:
        return self.fleet.kubeconfig_dir

    @property
    def temporal(self) -> Client:
        assert self.client is not None, "the Temporal client is not connected"
        return self.client

    # --- the Temporal dev server -----------------------------------------------------------

    async def start_server(self) -> None:
        assert self.server is None or self.server.process.poll() is not None
        self.server = await start_dev_server(
            self.state_dir / "temporal", port=self.port, ui=False, db_file=True
        )

    async def stop_server(self, *, limit: float = 20.0) -> None:
        """SIGTERM, then wait (bounded, without blocking the loop) until the process is gone,
        so the port is free for a restart."""
        server = self.server
        if server is None or server.process.poll() is not None:
            return
        server.process.send_signal(signal.SIGTERM)
        try:
            await wait_for(_exited(server.process), limit, "the dev server to exit on SIGTERM")
        except AssertionError:
            server.process.kill()
            await wait_for(_exited(server.process), 10, "the dev server to exit on SIGKILL")
            raise

    # --- the worker process ----------------------------------------------------------------

    async def start_worker(self, *, limit: float = 60.0) -> None:
        assert self.worker is None or self.worker.returncode is not None
        log_path = self.state_dir / f"worker-{len(self.worker_logs) + 1}.log"
        self.worker_logs.append(log_path)
        with log_path.open("wb") as log:
            self.worker = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "modelfleet.cli",
                "worker",
                "--credentials-dir",
                str(self.credentials_dir),
                "--address",
                self.address,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.worker_env,
                start_new_session=True,
            )
        worker = self.worker

        async def polling() -> bool | None:
            if worker.returncode is not None:
                tail = log_path.read_text(errors="replace")[-3000:]
                raise AssertionError(f"the worker exited ({worker.returncode}):\n{tail}")
            return True if "worker polling task queue" in log_path.read_text("utf-8") else None

        await wait_for(polling, limit, "the worker to poll its task queue")

    async def kill_worker(self) -> None:
        """SIGKILL: no graceful shutdown, in-flight activities are simply lost."""
        worker = self.worker
        if worker is None or worker.returncode is not None:
            return
        worker.kill()
        await asyncio.wait_for(worker.wait(), 10)

    async def stop_worker(self, *, limit: float = 30.0) -> None:
        worker = self.worker
        if worker is None or worker.returncode is not None:
            return
        worker.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(worker.wait(), limit)
        except TimeoutError:
            worker.kill()
            await asyncio.wait_for(worker.wait(), 10)
            raise

    def worker_output(self) -> bytes:
        return b"".join(p.read_bytes() for p in self.worker_logs if p.exists())

    # --- reading state ---------------------------------------------------------------------

    async def status(self, namespace: str, name: str) -> DeploymentStatus:
        handle = self.temporal.get_workflow_handle(deployment_id(namespace, name))
        result: DeploymentStatus = await handle.query(DeploymentWorkflow.status)
        return result

    async def fleet_view(self) -> FleetView:
        handle = self.temporal.get_workflow_handle(FLEET_ID)
        view: FleetView = await handle.query(FleetWorkflow.view)
        return view

    async def wait_status(
        self,
        namespace: str,
        name: str,
        predicate: Callable[[DeploymentStatus], bool],
        limit: float,
        what: str,
    ) -> DeploymentStatus:
        """Wait for a status that satisfies ``predicate``; tolerates Temporal being away."""

        seen: list[DeploymentStatus] = []

        async def probe() -> DeploymentStatus | None:
            status = await tolerant(lambda: self.status(namespace, name))
            if status is None:
                return None
            seen[:] = [status]
            return status if predicate(status) else None

        try:
            return await wait_for(probe, limit, f"{namespace}/{name}: {what}")
        except AssertionError as exc:
            last = seen[0].model_dump_json(indent=1) if seen else "no status answered"
            raise AssertionError(f"{exc}; last status: {last}") from None

    def objects_of(self, namespace: str, cluster: str) -> list[dict[str, Any]]:
        """Every object on ``cluster`` labelled with deployment namespace ``namespace``."""
        store = self.fleet.store(cluster)
        found: list[dict[str, Any]] = []
        for rt in store.registry:
            listed = store.list_objects(rt, label_selector=f"{LABEL_NAMESPACE}={namespace}")
            found.extend(listed.items)
        return found

    def objects_in(self, workload_namespace: str, cluster: str) -> list[dict[str, Any]]:
        """Every namespaced object in ``workload_namespace`` on ``cluster``, labelled or not."""
        store = self.fleet.store(cluster)
        found: list[dict[str, Any]] = []
        for rt in store.registry:
            if rt.namespaced:
                found.extend(store.list_objects(rt, namespace=workload_namespace).items)
        return found

    async def assert_exactly_the_final_replicas(
        self, namespace: str, status: DeploymentStatus
    ) -> None:
        """No duplicate, orphaned or missing object on any cluster.

        What modelfleet applied for ``namespace`` (every object carrying its label, and every
        object without an owner in the workload namespace) is exactly what the final replicas
        render to, once each; what controllers made (pods, claims) has a live owner; the Fleet's
        ledger holds exactly the final replicas."""
        view = await self.fleet_view()
        placed = {r.name: r for r in view.replicas if r.namespace == namespace}
        final = {r.name: r.cluster for r in status.replicas}
        assert set(placed) == set(final), f"ledger {sorted(placed)} != status {sorted(final)}"
        for name, cluster in final.items():
            assert placed[name].spec.cluster_name == cluster
        expected: dict[str, list[tuple[str, str | None, str]]] = {
            c: [] for c in self.fleet.clusters
        }
        workload_namespace = f"mf-{namespace}"
        for replica in placed.values():
            rendered = render_replica(replica, ClusterFacts())
            workload_namespace = rendered.namespace
            for step in rendered.steps:
                if step.step is Step.NAMESPACE:
                    continue  # shared by every replica of the namespace on the cluster
                expected[replica.spec.cluster_name].extend(_key(m) for m in step.manifests)
        for cluster in self.fleet.clusters:
            inside = self.objects_in(workload_namespace, cluster)
            roots = [o for o in inside if not o["metadata"].get("ownerReferences")]
            labelled = [o for o in self.objects_of(namespace, cluster) if o["kind"] != "Namespace"]
            applied = {_key(o): o for o in [*roots, *labelled] if o["kind"] not in CONTROLLER_KINDS}
            assert sorted(applied) == sorted(expected[cluster]), (
                f"objects of {namespace} on {cluster}: {sorted(applied)} "
                f"!= {sorted(expected[cluster])}"
            )
            alive = {(o["kind"], o["metadata"]["uid"]) for o in inside}
            for o in inside:
                for owner in o["metadata"].get("ownerReferences", []):
                    assert (owner["kind"], owner["uid"]) in alive, (
                        f"orphaned {o['kind']} {o['metadata']['name']} on {cluster}: its "
                        f"{owner['kind']} {owner['name']} is gone"
                    )
            owners = {o["metadata"].get("labels", {}).get(LABEL_REPLICA) for o in applied.values()}
            strays = owners - {n for n, c in final.items() if c == cluster}
            assert not strays, f"objects of replicas {sorted(map(str, strays))} left on {cluster}"


def _key(manifest: dict[str, Any]) -> tuple[str, str | None, str]:
    meta = manifest["metadata"]
    return (manifest["kind"], meta.get("namespace"), meta["name"])


def _exited(process: subprocess.Popen[bytes]) -> Callable[[], Awaitable[bool | None]]:
    async def probe() -> bool | None:
        return True if process.poll() is not None else None

    return probe


async def register_fleet(client: Client, resources: Iterable[Any]) -> None:
    """Apply the fleet's classes then clusters, as ``modelfleet dev`` does."""
    await ensure_fleet(client)
    for resource in sorted(resources, key=lambda r: r.KIND != "InferenceClass"):
        await apply_resource(client, resource)


@contextlib.asynccontextmanager
async def crash_env(
    state_dir: Path,
    *,
    startup_seconds: float,
    payload_key: str | None = None,
    before_worker: Callable[[SimulatedFleet], None] | None = None,
) -> AsyncIterator[CrashEnv]:
    """The quickstart fleet with all three clusters Ready, a dev server and a worker process.
    ``before_worker`` may change the credentials directory before the worker starts."""
    resources = load_fleet([str(QUICKSTART / "classes.yaml"), str(QUICKSTART / "clusters.yaml")])
    classes = [r for r in resources if isinstance(r, InferenceClass)]
    clusters = [r for r in resources if isinstance(r, InferenceCluster)]
    env_vars = {
        k: v for k, v in os.environ.items() if not k.startswith(("MODELFLEET_", "TEMPORAL_"))
    }
    env_vars["PYTHONUNBUFFERED"] = "1"
    env_vars["COLUMNS"] = "200"
    if payload_key is not None:
        env_vars[ENV_PAYLOAD_KEY] = payload_key
    port = free_port()
    settings = TemporalSettings(address=f"127.0.0.1:{port}", payload_key=payload_key)
    async with SimulatedFleet.start(
        classes,
        clusters,
        state_dir=state_dir / "sim",
        startup=StartupPolicy(default_seconds=startup_seconds),
    ) as fleet:
        env = CrashEnv(state_dir, fleet, port, settings, env_vars)
        try:
            if before_worker is not None:
                before_worker(fleet)
            await env.start_server()
            env.client = await connect(env.settings)
            await env.start_worker()
            await register_fleet(env.client, resources)

            async def clusters_ready() -> bool | None:
                view = await tolerant(env.fleet_view)
                if view is None:
                    return None
                ready = [c for c in view.clusters if c.ready]
                return True if len(ready) == len(view.clusters) == len(clusters) else None

            await wait_for(clusters_ready, 60, "every quickstart cluster to be Ready")
            yield env
        finally:
            try:
                await env.kill_worker()
            finally:
                await env.stop_server()
