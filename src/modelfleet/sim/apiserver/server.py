"""The simulated API server: one aiohttp application serving many simulated clusters, each with
its own store and fault injector, plus the admin endpoints of :mod:`.admin`.

Every cluster has its own listener and is served at that port's root, as a real API server is:
its kubeconfig says ``server: http://127.0.0.1:<cluster port>``. Clients that build URLs from the
server's root alone (kubectl's ``get --raw /readyz``, client-go's ``AbsPath``/``RequestURI``)
therefore reach the right cluster. The main port serves the admin endpoints and, under
``/clusters/<name>``, every cluster again (tests and tools address clusters by name there).

Development/test emulator only: product code never imports ``modelfleet.sim``. This module binds
TCP listeners (callers should use 127.0.0.1 and port 0; a cluster's port is picked by the OS) and
otherwise keeps all state in memory; ``write_kubeconfig`` writes the one file it is asked to write.

Layout of the HTTP surface (``<root>`` is ``http://host:<cluster port>`` or, on the main port,
``/clusters/<name>``)::

    <root>/version | /api | /apis | /api/v1 | /apis/<g> | /apis/<g>/<v>          discovery
    <root>/healthz | /livez | /readyz | /openapi/v2 | /openapi/v3[/...]           health, openapi
    <root>/api/v1/[namespaces/<ns>/]<plural>[/<name>[/status|/scale|/log|/exec|/proxy]]
    <root>/apis/<g>/<v>/[namespaces/<ns>/]<plural>[/<name>[/status|/scale]]
    /_admin/clusters[/<c>[/faults|/stats]]                          admin (main port only)

Unmodified clients (kubectl, the official ``kubernetes`` client, its DynamicClient, lightkube,
kubernetes_asyncio) work against the kubeconfig's server with ``user: {}``. Routing is here;
requests are classified by :mod:`.request_info` (which resolves a request on a cluster's own port
to that cluster), answered by :mod:`.discovery`, :mod:`.resource_handlers`, :mod:`.pod_exec` and
:mod:`.watch_stream`, with :mod:`modelfleet.sim.faults` as middleware on cluster requests only.

Start it with ``await FleetApiServer.start()`` on a running loop, or :func:`serve_in_thread` for
synchronous callers (its own loop in a background thread, see :mod:`modelfleet.sim.loop_thread`).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from modelfleet.sim.apiserver.admin import CLUSTER_NAME, AdminRoutes
from modelfleet.sim.apiserver.discovery import serve_discovery
from modelfleet.sim.apiserver.pod_exec import serve_pod_exec
from modelfleet.sim.apiserver.proxy import ApiProxy
from modelfleet.sim.apiserver.request_info import CLUSTER_PORTS, request_info
from modelfleet.sim.apiserver.resource_handlers import serve_resource
from modelfleet.sim.apiserver.responses import error_response
from modelfleet.sim.apiserver.status_errors import ApiError
from modelfleet.sim.apiserver.store import DEFAULT_NAMESPACES, ClusterStore
from modelfleet.sim.faults import FaultConfig, FaultInjector, FaultStats, FaultTarget
from modelfleet.sim.faults import fault_middleware as _fault_middleware
from modelfleet.sim.kubeconfig import write_kubeconfig_file
from modelfleet.sim.kubernetes_version import KUBERNETES_VERSION
from modelfleet.sim.loop_thread import LoopThread

__all__ = [
    "ClusterInfo",
    "FleetApiServer",
    "ServerSettings",
    "SimCluster",
    "serve_in_thread",
]


class ServerSettings(BaseModel):
    """Knobs of the emulator (not of any one cluster)."""

    model_config = ConfigDict(extra="forbid")

    history_limit: int = Field(default=10_000, ge=1)
    watch_queue_limit: int = Field(default=100_000, ge=1)
    bookmark_interval_seconds: float = Field(default=30.0, gt=0)
    default_watch_timeout_seconds: float = Field(default=1800.0, gt=0)
    shutdown_timeout_seconds: float = Field(default=1.0, ge=0)
    kubernetes_version: str = KUBERNETES_VERSION


class ClusterInfo(BaseModel):
    name: str
    server: str
    resource_version: str
    objects: int
    faults: FaultConfig


@dataclass
class SimCluster:
    """One simulated cluster: its store (objects, events) and its fault injector."""

    name: str
    store: ClusterStore
    faults: FaultInjector


@dataclass
class _Listener:
    """A cluster's own port: the socket bound in ``add_cluster`` and the site serving it."""

    port: int
    site: web.SockSite
    started: asyncio.Task[None]


class FleetApiServer:
    """The simulated clusters of one emulator process, and the listener serving them.

    Build it with :meth:`start`. Every method runs on the server's event loop (from another
    thread, go through :class:`~modelfleet.sim.loop_thread.LoopThread`).
    """

    def __init__(self, settings: ServerSettings | None = None) -> None:
        self.settings = settings or ServerSettings()
        self.clusters: dict[str, SimCluster] = {}
        self.host = ""
        self.port = 0
        self.base_url = ""
        self._runner: web.AppRunner | None = None
        # Local port -> cluster name, shared with request_info through the app.
        self._ports: dict[int, str] = {}
        self._listeners: dict[str, _Listener] = {}
        self.proxy = ApiProxy(self)  # pods|services/<name>/proxy, to attached serving planes

    # ------------------------------------------------------------------ starting and stopping

    @classmethod
    async def start(
        cls,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        clusters: Iterable[str] = (),
        settings: ServerSettings | None = None,
    ) -> FleetApiServer:
        """Serve on ``host:port`` (0 picks a free port) with empty ``clusters``."""
        server = cls(settings)
        runner = web.AppRunner(
            server._build_app(),
            access_log=None,
            handler_cancellation=True,
            shutdown_timeout=server.settings.shutdown_timeout_seconds,
        )
        await runner.setup()
        site = web.TCPSite(runner, host, port, reuse_address=True)
        await site.start()
        listener = site._server
        assert isinstance(listener, asyncio.Server)
        assert listener.sockets
        server._runner = runner
        server.host = host
        server.port = int(listener.sockets[0].getsockname()[1])
        server.base_url = f"http://{host}:{server.port}"
        for name in clusters:
            server.add_cluster(name)
        return server

    async def stop(self) -> None:
        """End watches and held requests, then close the listener."""
        for cluster in self.clusters.values():
            cluster.store.close_subscriptions()
            cluster.faults.stop()
        for listener in self._listeners.values():
            await _settled(listener.started)
        self._listeners.clear()
        self._ports.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ------------------------------------------------------------------ clusters

    def add_cluster(
        self,
        name: str,
        faults: FaultConfig | Mapping[str, Any] | None = None,
        *,
        namespaces: Iterable[str] = DEFAULT_NAMESPACES,
        history_limit: int | None = None,
        port: int = 0,
    ) -> SimCluster:
        """Create an empty cluster (with the usual namespaces) served on its own port;
        ValueError if the name is taken, OSError if ``port`` cannot be bound.

        The port is bound and listening when this returns (connections queue until the site
        starts on the loop); ``port`` 0 lets the OS pick one. ``history_limit`` overrides the
        server's watch-history length for this cluster.
        """
        if not CLUSTER_NAME.match(name) or len(name) > 63:
            raise ValueError(f"invalid cluster name {name!r}")
        if name in self.clusters:
            raise ValueError(f"cluster {name!r} already exists")
        cfg = (
            faults
            if isinstance(faults, FaultConfig)
            else FaultConfig.model_validate(dict(faults or {}))
        )
        cluster = SimCluster(
            name=name,
            store=ClusterStore(
                name,
                history_limit=history_limit or self.settings.history_limit,
                subscriber_queue_limit=self.settings.watch_queue_limit,
                namespaces=namespaces,
            ),
            faults=FaultInjector(cfg),
        )
        if self._runner is not None:
            self._listen(name, port)
        self.clusters[name] = cluster
        return cluster

    def _listen(self, name: str, port: int) -> None:
        assert self._runner is not None
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            # Rebinding a just-closed port (a cluster restarted at the same address) must not
            # wait out TIME_WAIT, as the main listener's reuse_address allows too.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, port))
            sock.listen(128)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        bound = int(sock.getsockname()[1])
        site = web.SockSite(self._runner, sock)
        started = asyncio.get_running_loop().create_task(site.start())
        self._listeners[name] = _Listener(bound, site, started)
        self._ports[bound] = name

    def remove_cluster(self, name: str) -> None:
        """Drop the cluster and close its port (at once when its site has started, else as
        soon as it has)."""
        cluster = self.clusters.pop(name)
        cluster.store.close_subscriptions()
        cluster.faults.stop()
        listener = self._listeners.pop(name, None)
        if listener is not None:
            self._ports.pop(listener.port, None)
            _close_listener(listener)

    def cluster_port(self, name: str) -> int:
        """The port cluster ``name`` is served on at its root."""
        self.cluster(name)
        return self._listeners[name].port

    def cluster(self, name: str) -> SimCluster:
        try:
            return self.clusters[name]
        except KeyError:
            raise KeyError(f"no simulated cluster named {name!r}") from None

    def store(self, name: str) -> ClusterStore:
        return self.cluster(name).store

    def cluster_url(self, name: str) -> str:
        """The apiserver URL of cluster ``name`` (the kubeconfig ``server``): its own port's
        root, as a real API server's."""
        listener = self._listeners.get(name)
        if listener is None:
            return self.prefixed_url(name)
        return f"http://{self.host}:{listener.port}"

    def prefixed_url(self, name: str) -> str:
        """Cluster ``name`` under ``/clusters/<name>`` on the main port."""
        return f"{self.base_url}/clusters/{name}"

    def info(self, cluster: SimCluster) -> ClusterInfo:
        return ClusterInfo(
            name=cluster.name,
            server=self.cluster_url(cluster.name),
            resource_version=cluster.store.resource_version,
            objects=cluster.store.object_count,
            faults=cluster.faults.config,
        )

    def set_faults(self, name: str, faults: FaultConfig | Mapping[str, Any]) -> FaultConfig:
        return self.cluster(name).faults.set_config(faults)

    def update_faults(self, name: str, changes: Mapping[str, Any]) -> FaultConfig:
        return self.cluster(name).faults.update_config(changes)

    def stats(self, name: str) -> FaultStats:
        return self.cluster(name).faults.stats.model_copy(deep=True)

    def write_kubeconfig(
        self, cluster: str | Iterable[str], path: str | Path, *, namespace: str = "default"
    ) -> Path:
        """Write a kubeconfig for one cluster (or several; the first is current) to ``path``."""
        names = [cluster] if isinstance(cluster, str) else list(cluster)
        for n in names:
            self.cluster(n)
        return write_kubeconfig_file(
            path, {n: self.cluster_url(n) for n in names}, namespace=namespace
        )

    # ------------------------------------------------------------------ routing

    def _build_app(self) -> web.Application:
        app = web.Application(
            middlewares=[_fault_middleware(self._resolve_faults)],
            client_max_size=64 * 1024 * 1024,
        )
        app[CLUSTER_PORTS] = self._ports
        AdminRoutes(self).add_routes(app)
        self.proxy.add_routes(app)  # before the catch-all cluster routes
        app.router.add_route("*", "/clusters/{cluster}", self._handle)
        app.router.add_route("*", "/clusters/{cluster}/{tail:.*}", self._handle)
        # Last: everything else, which request_info resolves by the port it arrived on (a
        # cluster's own port), and is 404 on the main port.
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    def _resolve_faults(self, request: web.Request) -> FaultTarget | None:
        info = request_info(request)
        if info is None:
            return None
        cluster = self.clusters.get(info.cluster)
        if cluster is None:
            return None
        return FaultTarget(cluster.faults, info.verb, info.resource)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        info = request_info(request)
        if info is None:  # the main port's root: no cluster there
            return error_response(
                ApiError(404, "NotFound", "the server could not find the requested resource")
            )
        cluster = self.clusters.get(info.cluster)
        if cluster is None:
            return error_response(
                ApiError(404, "NotFound", f'simulated cluster "{info.cluster}" not found')
            )
        try:
            if info.discovery or info.unknown:
                return serve_discovery(request, cluster, info, self.settings.kubernetes_version)
            if info.subresource == "exec" and info.plural == "pods" and not info.group:
                return await serve_pod_exec(
                    request, cluster.store, info, self.proxy.locator(cluster.name)
                )
            return await serve_resource(request, cluster, info, self.settings)
        except ApiError as err:
            return error_response(err)


def _close_listener(listener: _Listener) -> None:
    """Stop accepting on a cluster's port now, so that it can be bound again at once."""
    site = listener.site
    if listener.started.done():
        server = site._server  # the asyncio server SockSite.start created
        if server is not None:
            server.close()
        return
    listener.started.add_done_callback(
        lambda _: site._server.close() if site._server is not None else None
    )


async def _settled(task: asyncio.Task[None]) -> None:
    with contextlib.suppress(Exception, asyncio.CancelledError):
        await task


@contextlib.contextmanager
def serve_in_thread(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    clusters: Iterable[str] = (),
    settings: ServerSettings | None = None,
) -> Iterator[LoopThread[FleetApiServer]]:
    """Run a server on its own loop in a background thread for the ``with`` block; reach it
    with ``srv.call(srv.target.add_cluster, "a")`` or ``srv.run(store.create(...))``."""
    names = list(clusters)
    with LoopThread.start(
        lambda: FleetApiServer.start(host, port, clusters=names, settings=settings),
        name="modelfleet-sim-apiserver",
        timeout=30.0,
    ) as running:
        yield running
