"""The engines of one simulated cluster's serving plane: a loopback port per served container port
of every Ready engine pod, following the store's Pod events (a pod that turns Ready starts
answering, one that stops being Ready or goes away stops), and the lookups the gateway and the API
server's proxy make over them (a pod's URL, the Ready engines a selector picks, which local port
stands for a pod IP).

Development/test emulator only. Reads Pods from the cluster's in-process store and opens sites
through the plane's ``listen``; it never connects anywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from modelfleet.sim.apiserver.selectors import label_selector_from_object
from modelfleet.sim.apiserver.store import ClusterStore
from modelfleet.sim.controllers.object_helpers import pod_is_ready
from modelfleet.sim.serving.engine import EngineProfile, EngineState
from modelfleet.sim.serving.model_args import pod_model, serving_ports
from modelfleet.sim.serving.store_view import objects

__all__ = ["EnginePorts"]

# (pod IP, {container port: (local port, site)})
_Sites = tuple[str, dict[int, tuple[int, web.SockSite]]]


def _engine_image(pod: Mapping[str, Any]) -> str:
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return str(containers[0].get("image", ""))


class EnginePorts:
    """Ready engine pods and the loopback ports they answer on."""

    def __init__(
        self,
        store: ClusterStore,
        profile: EngineProfile,
        listen: Callable[[], Awaitable[tuple[int, web.SockSite]]],
    ) -> None:
        self.store = store
        self.profile = profile
        self._listen = listen
        # local port -> engine; (namespace, pod) -> (pod IP, {container port: (local port, site)})
        self.by_port: dict[int, EngineState] = {}
        self.pods: dict[tuple[str, str], _Sites] = {}
        self._lock = asyncio.Lock()

    def clear(self) -> None:
        self.by_port.clear()
        self.pods.clear()

    def url(self, host: str, namespace: str, pod: str, port: int) -> str | None:
        entry = self.pods.get((namespace, pod))
        if entry is None or port not in entry[1]:
            return None
        return f"http://{host}:{entry[1][port][0]}"

    def engine(self, namespace: str, pod: str) -> EngineState | None:
        entry = self.pods.get((namespace, pod))
        if entry is None or not entry[1]:
            return None
        return self.by_port[next(iter(entry[1].values()))[0]]

    def local_port(self, ip: str, port: int) -> int | None:
        """The loopback port standing for ``ip:port`` when a serving pod has that IP."""
        for pod_ip, sites in self.pods.values():
            if pod_ip == ip and port in sites:
                return sites[port][0]
        return None

    def ready(
        self, namespace: str, selector: Mapping[str, Any] | None, port: int
    ) -> list[tuple[EngineState, int]]:
        """The serving engines (and local ports) of the pods ``selector`` picks, on ``port``."""
        out = []
        for pod in objects(
            self.store, "v1", "Pod", namespace, label_selector_from_object(selector)
        ):
            name = str(pod.get("metadata", {}).get("name", ""))
            entry = self.pods.get((namespace, name))
            if entry is not None and port in entry[1]:
                local = entry[1][port][0]
                out.append((self.by_port[local], local))
        return out

    async def sync(self, pod: Mapping[str, Any], *, deleted: bool) -> None:
        meta = pod.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        ip = str((pod.get("status") or {}).get("podIP") or "")
        serving = not deleted and not meta.get("deletionTimestamp") and pod_is_ready(pod)
        ports = serving_ports(pod) if serving else []
        model = pod_model(pod) if ports else None
        async with self._lock:
            current = self.pods.get(key)
            if current is not None and (not model or current[0] != ip):
                await self._drop(key)
                current = None
            if current is not None or not model or not ports:
                return
            engine = EngineState(
                model=model,
                pod=key[1],
                profile=self.profile,
                log=self._log_to(pod, ports[0]),
                image=_engine_image(pod),
            )
            sites: dict[int, tuple[int, web.SockSite]] = {}
            for port in ports:
                local, site = await self._listen()
                sites[port] = (local, site)
                self.by_port[local] = engine
            self.pods[key] = (ip, sites)

    def _log_to(self, pod: Mapping[str, Any], port: int) -> Callable[[str], None]:
        """Append an engine's lines to the log of the container serving ``port``."""
        snapshot = {"metadata": dict(pod.get("metadata") or {})}
        containers = (pod.get("spec") or {}).get("containers") or [{}]
        name = next(
            (
                str(c.get("name", ""))
                for c in containers
                if any(p.get("containerPort") == port for p in c.get("ports") or [])
            ),
            str(containers[0].get("name", "")),
        )
        return lambda line: self.store.pod_logs.append(snapshot, name, [line])

    async def _drop(self, key: tuple[str, str]) -> None:
        _, sites = self.pods.pop(key)
        for local, site in sites.values():
            self.by_port.pop(local, None)
            with contextlib.suppress(Exception):
                await site.stop()
