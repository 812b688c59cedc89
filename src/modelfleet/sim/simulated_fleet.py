"""A whole simulated fleet: one emulated API server hosting a cluster per InferenceCluster, each
with its nodes, DRA ResourceSlices, serving stack and workload simulator, and one kubeconfig per
cluster at ``<state_dir>/kubeconfigs/<cluster>.yaml``.

Development/test emulator only: product code never imports ``modelfleet.sim``. This module binds
a loopback port (through :mod:`modelfleet.sim.apiserver.server`), writes the kubeconfig files under
``state_dir`` and nothing else, and may run its own event loop in a background thread for
synchronous callers. It never contacts another host.

Async use::

    async with SimulatedFleet.start(classes, clusters, state_dir=tmp, startup_seconds=0) as fleet:
        KubeCluster(fleet.kubeconfig("l4-dev"))...

Sync use (sync tests), on its own loop in a background thread::

    with SimulatedFleet.start_in_thread(classes, clusters, state_dir=tmp) as running:
        running.run(running.target.settle())
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.sim.apiserver.server import FleetApiServer
from modelfleet.sim.apiserver.store import ClusterStore, now_rfc3339
from modelfleet.sim.controllers.controller_manager import WorkloadSimulator
from modelfleet.sim.controllers.kubelet import StartupPolicy
from modelfleet.sim.faults import FaultConfig
from modelfleet.sim.infrastructure import PoolLayout, cluster_layout, infrastructure_manifests
from modelfleet.sim.loop_thread import LoopThread
from modelfleet.sim.serving import EngineProfile, ServingPlane

__all__ = ["SimulatedCluster", "SimulatedFleet"]

_INFRA_MANAGER = "modelfleet-sim"
_STARTUP_SETTLE_SECONDS = 30.0


@dataclass(frozen=True)
class SimulatedCluster:
    """One cluster of the fleet, as a caller needs to know it."""

    name: str
    server: str
    kubeconfig: Path
    # host:port where the cluster's gateway really listens (what its Gateway status reports).
    gateway_address: str
    pools: tuple[PoolLayout, ...]
    simulator: WorkloadSimulator
    serving: ServingPlane

    @property
    def node_count(self) -> int:
        """Pool nodes (the system node excluded)."""
        return sum(len(p.nodes) for p in self.pools)

    @property
    def gpu_count(self) -> int:
        return sum(len(p.nodes) * p.gpus_per_node for p in self.pools)


def _class_map(
    classes: Iterable[InferenceClass] | Mapping[str, InferenceClass],
) -> dict[str, InferenceClass]:
    if isinstance(classes, Mapping):
        return dict(classes)
    return {c.name: c for c in classes}


class SimulatedFleet:
    """A running simulated fleet on the current event loop. Build it with :meth:`start`."""

    def __init__(
        self,
        server: FleetApiServer,
        *,
        state_dir: Path,
        owns_server: bool,
        startup: StartupPolicy,
        engines: EngineProfile | None = None,
    ) -> None:
        self.server = server
        self.state_dir = state_dir
        self._owns_server = owns_server
        self._startup = startup
        self._engines = engines or EngineProfile()
        self.clusters: dict[str, SimulatedCluster] = {}
        # What each cluster was built from, so that it can be restarted (``restart_cluster``).
        self._built: dict[str, tuple[InferenceCluster, Mapping[str, InferenceClass], int]] = {}
        self._stopped = False

    # -- construction ----------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        classes: Iterable[InferenceClass] | Mapping[str, InferenceClass],
        clusters: Iterable[InferenceCluster],
        *,
        state_dir: str | Path,
        startup_seconds: float | None = None,
        startup: StartupPolicy | None = None,
        faults: Mapping[str, FaultConfig | Mapping[str, Any]] | None = None,
        server: FleetApiServer | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        engines: EngineProfile | None = None,
    ) -> _Starting:
        """Start the fleet; await the result or use it as ``async with``.

        ``startup_seconds`` sets every pod's start-up delay (the per-image defaults otherwise);
        ``startup`` gives the full policy instead. ``faults`` maps cluster names to initial
        fault configs. With ``server`` the clusters are added to that running emulator (and
        removed again on :meth:`stop`); otherwise one is started on ``host:port`` (0: any free
        port) and stopped on :meth:`stop`. ``engines`` sets how the simulated engines perform.
        """
        policy = startup or StartupPolicy(default_seconds=startup_seconds)
        return _Starting(
            cls._create(
                _class_map(classes),
                list(clusters),
                state_dir=Path(state_dir),
                startup=policy,
                faults=dict(faults or {}),
                server=server,
                host=host,
                port=port,
                engines=engines,
            )
        )

    @classmethod
    async def _create(
        cls,
        classes: dict[str, InferenceClass],
        clusters: list[InferenceCluster],
        *,
        state_dir: Path,
        startup: StartupPolicy,
        faults: dict[str, FaultConfig | Mapping[str, Any]],
        server: FleetApiServer | None,
        host: str,
        port: int,
        engines: EngineProfile | None = None,
    ) -> SimulatedFleet:
        owns = server is None
        running = server if server is not None else await FleetApiServer.start(host, port)
        fleet = cls(
            running, state_dir=state_dir, owns_server=owns, startup=startup, engines=engines
        )
        try:
            for cluster in clusters:
                await fleet.add_cluster(cluster, classes, faults=faults.get(cluster.name))
            await fleet.settle(_STARTUP_SETTLE_SECONDS, timers=False)
        except BaseException:
            await fleet.stop()
            raise
        return fleet

    async def add_cluster(
        self,
        cluster: InferenceCluster,
        classes: Mapping[str, InferenceClass],
        *,
        faults: FaultConfig | Mapping[str, Any] | None = None,
        port: int = 0,
    ) -> SimulatedCluster:
        """Add one cluster: API server (on its own port; 0 picks one), nodes, slices, serving
        stack, simulator, kubeconfig."""
        built = self._built.get(cluster.name)
        index = built[2] if built is not None else len(self._built)
        self._built[cluster.name] = (cluster, classes, index)
        sim_cluster = self.server.add_cluster(cluster.name, faults, port=port)
        store = sim_cluster.store
        injector = sim_cluster.faults
        plane = ServingPlane(store, self._engines, faults=lambda: injector.config)
        await plane.start()
        self.server.proxy.attach(cluster.name, plane)
        address = plane.host
        simulator = WorkloadSimulator(
            store,
            startup=self._startup,
            faults=lambda: injector.config,
            gateway_address=address,
            pod_cidr_prefix=f"10.{(index % 120) + 128}",
        )
        await simulator.start()
        used = {
            p.class_name: classes[p.class_name]
            for p in cluster.spec.node_pools
            if p.class_name in classes
        }
        infra = infrastructure_manifests(
            cluster, used, address=address, now=now_rfc3339(), gateway_port=plane.gateway_port
        )
        for manifest in infra:
            await create_with_status(store, manifest)
        kubeconfig = self.kubeconfig_dir / f"{cluster.name}.yaml"
        self.server.write_kubeconfig(cluster.name, kubeconfig)
        existing = cluster.spec.cluster.existing
        if existing is not None and existing.secret_ref is not None:
            # Where the worker looks for a cluster that names a secretRef: the Secret mounted as
            # a directory, ``<name>/<key>``, as a platform team would hand it over.
            ref = existing.secret_ref
            self.server.write_kubeconfig(cluster.name, self.kubeconfig_dir / ref.name / ref.key)
        handle = SimulatedCluster(
            name=cluster.name,
            server=self.server.cluster_url(cluster.name),
            kubeconfig=kubeconfig,
            gateway_address=f"{address}:{plane.gateway_port}",
            pools=tuple(cluster_layout(cluster, used)),
            simulator=simulator,
            serving=plane,
        )
        self.clusters[cluster.name] = handle
        return handle

    async def restart_cluster(self, name: str) -> SimulatedCluster:
        """The cluster as after a restart of the simulated fleet: stopped, then started again at
        the same address with its infrastructure only (what ran on it is gone) and no faults.
        Its kubeconfig is written again."""
        cluster, classes, _ = self._built[name]
        old = self.clusters.pop(name)
        port = self.server.cluster_port(name)
        await old.simulator.stop()
        await old.serving.stop()
        self.server.proxy.detach(name)
        self.server.remove_cluster(name)
        handle = await self.add_cluster(cluster, classes, port=port)
        await handle.simulator.settle(_STARTUP_SETTLE_SECONDS, timers=False)
        return handle

    # -- accessors -------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return self.server.base_url

    @property
    def cluster_names(self) -> list[str]:
        return list(self.clusters)

    @property
    def kubeconfig_dir(self) -> Path:
        """``<state_dir>/kubeconfigs``: one ``<cluster>.yaml`` per cluster, the layout a worker's
        credentials directory expects."""
        return self.state_dir / "kubeconfigs"

    @property
    def kubeconfigs(self) -> dict[str, Path]:
        return {name: c.kubeconfig for name, c in self.clusters.items()}

    def kubeconfig(self, cluster: str) -> Path:
        return self.clusters[cluster].kubeconfig

    def store(self, cluster: str) -> ClusterStore:
        return self.server.store(cluster)

    def simulator(self, cluster: str) -> WorkloadSimulator:
        return self.clusters[cluster].simulator

    def serving(self, cluster: str) -> ServingPlane:
        """The cluster's engines and gateway (``gateway_url``, ``engine_url``)."""
        return self.clusters[cluster].serving

    def admin_url(self, cluster: str) -> str:
        """The emulator's admin endpoint of one cluster (faults: ``<this>/faults``)."""
        return f"{self.base_url}/_admin/clusters/{cluster}"

    def set_faults(self, cluster: str, faults: FaultConfig | Mapping[str, Any]) -> FaultConfig:
        return self.server.set_faults(cluster, faults)

    def update_faults(self, cluster: str, changes: Mapping[str, Any]) -> FaultConfig:
        return self.server.update_faults(cluster, changes)

    # -- running ---------------------------------------------------------------------------

    async def settle(self, max_seconds: float = 10.0, *, timers: bool = True) -> None:
        """Wait until every cluster's simulator is idle (see ``WorkloadSimulator.idle``)."""
        async with asyncio.timeout(max_seconds):
            # Twice round: one cluster's settling never writes to another, but a second pass
            # costs nothing and guards against work queued while waiting on a later cluster.
            for _ in range(2):
                for cluster in self.clusters.values():
                    await cluster.simulator.settle(max_seconds, timers=timers)

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for cluster in self.clusters.values():
            await cluster.simulator.stop()
            await cluster.serving.stop()
            self.server.proxy.detach(cluster.name)
        if self._owns_server:
            await self.server.stop()
        else:
            for name in self.clusters:
                self.server.remove_cluster(name)

    async def __aenter__(self) -> SimulatedFleet:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # -- sync use --------------------------------------------------------------------------

    @classmethod
    def start_in_thread(
        cls,
        classes: Iterable[InferenceClass] | Mapping[str, InferenceClass],
        clusters: Iterable[InferenceCluster],
        *,
        state_dir: str | Path,
        startup_seconds: float | None = None,
        startup: StartupPolicy | None = None,
        faults: Mapping[str, FaultConfig | Mapping[str, Any]] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        start_timeout: float = 60.0,
        engines: EngineProfile | None = None,
    ) -> LoopThread[SimulatedFleet]:
        """Start the fleet on its own event loop in a daemon thread; returns once it serves."""
        class_map = _class_map(classes)
        cluster_list = list(clusters)

        async def boot() -> SimulatedFleet:
            return await cls.start(
                class_map,
                cluster_list,
                state_dir=state_dir,
                startup_seconds=startup_seconds,
                startup=startup,
                faults=faults,
                host=host,
                port=port,
                engines=engines,
            )

        return LoopThread.start(boot, name="modelfleet-sim-fleet", timeout=start_timeout)


class _Starting:
    """What :meth:`SimulatedFleet.start` returns: awaitable, and an async context manager."""

    def __init__(self, coro: Coroutine[Any, Any, SimulatedFleet]) -> None:
        self._coro = coro
        self._fleet: SimulatedFleet | None = None

    def __await__(self) -> Generator[Any, None, SimulatedFleet]:
        return self._coro.__await__()

    async def __aenter__(self) -> SimulatedFleet:
        self._fleet = await self._coro
        return self._fleet

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._fleet is not None:
            await self._fleet.stop()


async def create_with_status(
    store: ClusterStore, manifest: Mapping[str, Any], field_manager: str = _INFRA_MANAGER
) -> None:
    """Create an object and, where the store drops ``status`` on create (as the real API server
    does for kinds with a status subresource), write it through ``/status``."""
    created = await store.create(manifest, field_manager=field_manager)
    status = manifest.get("status")
    if status and created.get("status") != status:
        meta = created["metadata"]
        await store.patch_status(
            str(manifest["apiVersion"]),
            str(manifest["kind"]),
            str(meta["name"]),
            status,
            namespace=meta.get("namespace"),
            field_manager=field_manager,
        )
