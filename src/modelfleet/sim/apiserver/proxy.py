"""The API server's proxy subresources: ``GET|POST|... /api/v1/namespaces/<ns>/pods/<name>
[:<port>]/proxy/<path>`` and ``.../services/<name>[:<port>]/proxy/<path>``, forwarded to the
serving plane's engine ports, as the real API server forwards them to pod IPs. Product code
(the metrics adapter) reads ``/metrics`` exactly as it would from a real cluster, without pod
network access.

Semantics follow the real server: ``<name>`` may be ``[scheme:]name[:port]``; a pod port is a
number or a container port's name (no port: 80, as the real server dials the pod IP bare); a
service port is a port number or name (no port: the service's only or unnamed port), mapped to
its ``targetPort`` on one Ready selected pod. A missing object is 404 NotFound; a pod that is
not serving on that port, or a service without Ready endpoints, is 503 ServiceUnavailable with
the real server's wording. The caller's ``Authorization`` is never forwarded (the API server
terminates it).

Development/test emulator only: product code never imports ``modelfleet.sim``. Reads the
cluster's in-process store, and connects only to the loopback ports a serving plane reports
through :class:`EngineLocator` (engines, and the gateway's metrics Service it stands behind).
"""

from __future__ import annotations

import fnmatch
import random
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import aiohttp
from aiohttp import web

from modelfleet.sim.apiserver.request_info import request_info
from modelfleet.sim.apiserver.responses import error_response
from modelfleet.sim.apiserver.selectors import label_selector_from_object
from modelfleet.sim.apiserver.status_errors import ApiError, not_found
from modelfleet.sim.apiserver.store import ClusterStore
from modelfleet.sim.http_relay import relay

if TYPE_CHECKING:
    from modelfleet.sim.apiserver.server import FleetApiServer

__all__ = ["PORT_PROXY_ROUTE", "PROXY_ROUTE", "ApiProxy", "EngineLocator", "split_target"]

# Matched before the catch-all cluster routes. The whole tail is kept under ``tail`` so the
# request classifier (and the fault middleware) sees these requests like any other. The same
# path without the prefix is a cluster's own port (request_info resolves which).
_PROXY_TAIL = "{tail:api/v1/namespaces/[^/]+/(?:pods|services)/[^/]+/proxy(?:/.*)?}"
PROXY_ROUTE = "/clusters/{cluster}/" + _PROXY_TAIL
PORT_PROXY_ROUTE = "/" + _PROXY_TAIL
_HOP_HEADERS = frozenset(
    {
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "upgrade",
        "host",
        "content-length",
        "authorization",
        "proxy-authorization",
    }
)
_TIMEOUT = aiohttp.ClientTimeout(total=60.0, sock_connect=5.0)


class EngineLocator(Protocol):
    """Where a pod's container port really answers (the serving plane), or None."""

    def engine_url(self, namespace: str, pod: str, port: int = 8000) -> str | None: ...

    def service_url(self, namespace: str, name: str, port: str) -> str | None:
        """Where a Service the locator itself stands behind answers (the gateway's metrics)."""


def split_target(target: str) -> tuple[str, str, str]:
    """``[scheme:]name[:port]`` as (scheme, name, port); scheme and port may be empty."""
    parts = target.split(":")
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    if len(parts) == 2:
        if parts[0] in ("http", "https"):
            return parts[0], parts[1], ""
        return "", parts[0], parts[1]
    return "", target, ""


def not_found_path() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource")


def _unavailable(message: str) -> ApiError:
    return ApiError(503, "ServiceUnavailable", message)


def _container_port(pod: Mapping[str, Any], port: str) -> int | None:
    if port.isdigit():
        return int(port)
    for container in (pod.get("spec") or {}).get("containers") or []:
        for declared in container.get("ports") or []:
            if declared.get("name") == port and declared.get("containerPort"):
                return int(declared["containerPort"])
    return None


class ApiProxy:
    """The proxy routes of one :class:`FleetApiServer`; serving planes attach per cluster."""

    def __init__(self, server: FleetApiServer) -> None:
        self._server = server
        self._locators: dict[str, EngineLocator] = {}
        self._unreachable: dict[str, tuple[str, ...]] = {}
        self._rng = random.Random()

    def attach(self, cluster: str, locator: EngineLocator) -> None:
        self._locators[cluster] = locator

    def locator(self, cluster: str) -> EngineLocator | None:
        """The serving plane attached to ``cluster`` (what a pod's own ports answer), if any."""
        return self._locators.get(cluster)

    def detach(self, cluster: str) -> None:
        self._locators.pop(cluster, None)
        self._unreachable.pop(cluster, None)

    def set_unreachable(self, cluster: str, pods: Iterable[str]) -> None:
        """A partition between the API server and some pods of ``cluster`` (fnmatch globs over
        pod names, or ``namespace/name``): proxying to them times out, as a real server's dial
        to an unreachable pod IP does. The pods keep serving traffic from the gateway."""
        self._unreachable[cluster] = tuple(pods)

    def _blocked(self, cluster: str, namespace: str, pod: str) -> bool:
        return any(
            fnmatch.fnmatchcase(pod, pattern) or fnmatch.fnmatchcase(f"{namespace}/{pod}", pattern)
            for pattern in self._unreachable.get(cluster, ())
        )

    def add_routes(self, app: web.Application) -> None:
        app.router.add_route("*", PROXY_ROUTE, self._handle)
        app.router.add_route("*", PORT_PROXY_ROUTE, self._handle)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        info = request_info(request)
        if info is None:  # no prefix, on the main port
            return error_response(not_found_path())
        cluster = self._server.clusters.get(info.cluster)
        if cluster is None:
            return error_response(
                ApiError(404, "NotFound", f'simulated cluster "{info.cluster}" not found')
            )
        segs = request.match_info["tail"].split("/")
        namespace, kind, target = segs[3], segs[4], segs[5]
        path = "/" + "/".join(segs[7:])
        try:
            if kind == "pods":
                base = self._pod_url(cluster.name, cluster.store, namespace, target)
            else:
                base = self._service_url(cluster.name, cluster.store, namespace, target)
            return await _forward(request, base, path)
        except ApiError as err:
            return error_response(err)

    def _locate(self, cluster: str, namespace: str, pod: str, port: int) -> str | None:
        if self._blocked(cluster, namespace, pod):
            return None
        locator = self._locators.get(cluster)
        return locator.engine_url(namespace, pod, port) if locator is not None else None

    def _pod_url(self, cluster: str, store: ClusterStore, namespace: str, target: str) -> str:
        _, name, port_text = split_target(target)
        rt = store.resource_type("v1", "Pod")
        try:
            pod = store.get_object(rt, namespace, name)
        except ApiError:
            raise not_found(rt, name) from None
        status = pod.get("status") or {}
        ip = status.get("podIP")
        if not (pod.get("spec") or {}).get("nodeName") or not ip:
            raise ApiError(400, "BadRequest", f"pod {name} does not have a host assigned")
        port = _container_port(pod, port_text) if port_text else 80
        if port is None:
            raise ApiError(400, "BadRequest", f'pod {name} has no port named "{port_text}"')
        url = self._locate(cluster, namespace, name, port)
        if url is None and self._blocked(cluster, namespace, name):
            raise _unavailable(f"error trying to reach service: dial tcp {ip}:{port}: i/o timeout")
        if url is None:
            raise _unavailable(
                f"error trying to reach service: dial tcp {ip}:{port}: connect: connection refused"
            )
        return url

    def _service_url(self, cluster: str, store: ClusterStore, namespace: str, target: str) -> str:
        _, name, port_text = split_target(target)
        locator = self._locators.get(cluster)
        own = locator.service_url(namespace, name, port_text) if locator is not None else None
        if own is not None:
            return own
        rt = store.resource_type("v1", "Service")
        try:
            svc = store.get_object(rt, namespace, name)
        except ApiError:
            raise not_found(rt, name) from None
        spec = svc.get("spec") or {}
        ports = spec.get("ports") or []
        if port_text:
            chosen = next(
                (p for p in ports if str(p.get("port")) == port_text or p.get("name") == port_text),
                None,
            )
        else:
            chosen = (
                ports[0] if len(ports) == 1 else next((p for p in ports if not p.get("name")), None)
            )
        if chosen is None or not spec.get("selector"):
            raise _unavailable(f'no endpoints available for service "{name}"')
        target_port = chosen.get("targetPort", chosen.get("port"))
        candidates: list[str] = []
        pods = store.list_objects(
            store.resource_type("v1", "Pod"),
            namespace=namespace,
            label_selector=label_selector_from_object({"matchLabels": spec["selector"]}),
        ).items
        for pod in pods:
            port = _container_port(pod, str(target_port))
            pod_name = str((pod.get("metadata") or {}).get("name", ""))
            url = self._locate(cluster, namespace, pod_name, port) if port else None
            if url is not None:
                candidates.append(url)
        if not candidates:
            raise _unavailable(f'no endpoints available for service "{name}"')
        return self._rng.choice(candidates)


async def _forward(request: web.Request, base: str, path: str) -> web.StreamResponse:
    url = base + path + (f"?{request.query_string}" if request.query_string else "")
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
    body = await request.read()
    try:
        async with (
            aiohttp.ClientSession(timeout=_TIMEOUT, auto_decompress=False) as session,
            session.request(
                request.method, url, headers=headers, data=body or None, allow_redirects=False
            ) as upstream,
        ):
            return await relay(request, upstream, _HOP_HEADERS)
    except (aiohttp.ClientError, OSError) as exc:
        return error_response(_unavailable(f"error trying to reach service: {type(exc).__name__}"))
