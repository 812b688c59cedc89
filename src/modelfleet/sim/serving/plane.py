"""The serving plane of one simulated cluster: a loopback port per served container port of
every Ready engine pod (:mod:`.engine_ports`), and the cluster's gateway (:mod:`.gateway`)
listening on the address its Gateway reports, with its metrics on a port of its own.

One aiohttp application per cluster serves all of them and dispatches by the local port a
connection arrived on, so a cluster costs one runner however many pods it serves. The plane
follows the store's Pod events (no edits to the workload simulator): a pod that turns Ready
starts answering, one that stops being Ready or goes away stops. An engine whose image has an
``error_rate_5xx`` fault answers that share of its completions 500 (and slower ones as their
factors say). A dark cluster (fault) resets every connection of its plane.

Development/test emulator only. Binds loopback ports, reads the cluster's in-process store, and
connects only to the backends routes name.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Callable
from typing import Any

from aiohttp import web

from modelfleet.sim.apiserver.store import ClusterStore
from modelfleet.sim.apiserver.watch import WatchEvent
from modelfleet.sim.faults import FaultConfig
from modelfleet.sim.infrastructure import GATEWAY_NAME, SYSTEM_NAMESPACE
from modelfleet.sim.serving.backend_wait import WaitingRequests
from modelfleet.sim.serving.backends import Backends
from modelfleet.sim.serving.engine import EngineProfile, EngineState
from modelfleet.sim.serving.engine_ports import EnginePorts
from modelfleet.sim.serving.gateway import Gateway
from modelfleet.sim.serving.openai_api import fails, handle_engine

__all__ = ["GATEWAY_METRICS_PORT", "ServingPlane"]

# The gateway's metrics port (Envoy Gateway's), reached through the API server's service proxy.
GATEWAY_METRICS_PORT = 19001


class ServingPlane:
    """Engines and gateway of one simulated cluster, on the store's event loop."""

    def __init__(
        self,
        store: ClusterStore,
        profile: EngineProfile | None = None,
        *,
        host: str = "127.0.0.1",
        faults: Callable[[], FaultConfig] | None = None,
        gateway_namespace: str = SYSTEM_NAMESPACE,
        gateway_name: str = GATEWAY_NAME,
        seed: int | None = None,
    ) -> None:
        self.store = store
        self.profile = profile or EngineProfile()
        self.host = host
        self._faults = faults or FaultConfig
        self._gateway_ref = (gateway_namespace, gateway_name)
        self._rng = random.Random(seed)
        self._runner: web.AppRunner | None = None
        self._gateway_port = 0
        self._metrics_port = 0
        self.waiting = WaitingRequests()
        self.engines = EnginePorts(store, self.profile, self._listen)
        self.gateway = Gateway(
            store,
            self._gateway_ref,
            Backends(store, self.engines, host, self._rng),
            self.waiting,
            self._rng,
        )
        self._sub: Any = None

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        self._gateway_port, _ = await self._listen()
        self._metrics_port, _ = await self._listen()
        self.gateway.open()
        self._sub = self.store.subscribe([("v1", "Pod")], callback=self._on_pod)
        rt = self.store.resource_type("v1", "Pod")
        for pod in list(self.store.list_objects(rt).items):
            await self.engines.sync(pod, deleted=False)

    async def stop(self) -> None:
        if self._sub is not None:
            self._sub.close()
        if self._runner is not None:
            await self._runner.cleanup()
        await self.gateway.close()
        self.engines.clear()

    async def _listen(self) -> tuple[int, web.SockSite]:
        assert self._runner is not None
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, 0))
        site = web.SockSite(self._runner, sock)
        await site.start()
        return int(sock.getsockname()[1]), site

    async def _on_pod(self, event: WatchEvent) -> None:
        await self.engines.sync(event.object, deleted=event.type == "DELETED")

    # -- addresses -------------------------------------------------------------------------

    @property
    def gateway_port(self) -> int:
        return self._gateway_port

    @property
    def gateway_url(self) -> str:
        return f"http://{self.host}:{self._gateway_port}"

    def engine_url(self, namespace: str, pod: str, port: int = 8000) -> str | None:
        """Where a Ready pod's container port answers, or None."""
        return self.engines.url(self.host, namespace, pod, port)

    def service_url(self, namespace: str, name: str, port: str) -> str | None:
        """Where a Service the plane itself stands behind answers: the gateway's metrics."""
        if (namespace, name) == self._gateway_ref and port in (
            "metrics",
            str(GATEWAY_METRICS_PORT),
        ):
            return f"http://{self.host}:{self._metrics_port}"
        return None

    def engine(self, namespace: str, pod: str) -> EngineState | None:
        return self.engines.engine(namespace, pod)

    @property
    def serving_pods(self) -> list[tuple[str, str]]:
        return sorted(self.engines.pods)

    # -- dispatch --------------------------------------------------------------------------

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        if self._faults().dark:
            # A dark cluster answers nothing: the connection drops.
            if request.transport is not None:
                request.transport.close()
            raise web.HTTPServiceUnavailable()
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        port = int(sockname[1]) if sockname else 0
        if port == self._gateway_port:
            return await self.gateway.route(request)
        if port == self._metrics_port:
            if request.path != "/metrics":
                return web.Response(status=404, text=f"no route {request.path}")
            return web.Response(text=self.gateway.metrics_text(), content_type="text/plain")
        engine = self.engines.by_port.get(port)
        if engine is None:
            return web.Response(status=503, text="engine stopped")
        fault = self._faults().image_fault(engine.image)
        rate = fault.error_rate_5xx if fault is not None else 0.0
        fail = rate > 0 and fails(request.path, rate, self._rng.random())
        slower = fault.ttft_factor if fault is not None else 1.0
        slower_decode = fault.tpot_factor if fault is not None else 1.0
        return await handle_engine(
            request, engine, fail=fail, slower=slower, slower_decode=slower_decode
        )
