"""The serving plane of one simulated cluster: a loopback port per served container port of
every Ready engine pod, and the cluster's gateway listening on the address its Gateway reports.

One aiohttp application per cluster serves all of them and dispatches by the local port a
connection arrived on, so a cluster costs one runner however many pods it serves. The plane
follows the store's Pod events (no edits to the workload simulator): a pod that turns Ready
starts answering, one that stops being Ready or goes away stops.

The gateway implements what modelfleet's manifests use: HTTPRoutes attached to the Gateway,
Exact/PathPrefix matches, URLRewrite (on the rule or per backendRef), weighted backendRefs,
InferencePool backends (least-loaded Ready pod of the pool, as an endpoint picker would),
Service backends (selector pods, or a selectorless Service's EndpointSlices: how a front door
reaches other clusters and external providers), an API-key check (a rule's ``ExtensionRef`` to a
Secret of SHA-256 key hashes; 401 without a valid ``Authorization: Bearer`` key) and upstream
credentials (a backendRef's ``ExtensionRef`` to a Secret whose ``token`` is sent as the bearer
token to that backend instead of the caller's), and Envoy Gateway's ``BackendTrafficPolicy`` on a
route (passive health check and retries, :mod:`.traffic_policy`). 503 when the
chosen backend has nothing Ready, 404 when no route matches. An engine whose image has an
``error_rate_5xx`` fault answers that share of its completions 500. A dark cluster (fault) resets
every connection of its plane.

Development/test emulator only. Binds loopback ports, reads the cluster's in-process store, and
connects only to the backends routes name.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import random
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from modelfleet.sim.apiserver.selectors import label_selector_from_object
from modelfleet.sim.apiserver.status_errors import ApiError
from modelfleet.sim.apiserver.store import ClusterStore
from modelfleet.sim.apiserver.watch import WatchEvent
from modelfleet.sim.controllers.object_helpers import pod_is_ready
from modelfleet.sim.faults import FaultConfig
from modelfleet.sim.http_relay import relay
from modelfleet.sim.infrastructure import GATEWAY_NAME, SYSTEM_NAMESPACE
from modelfleet.sim.serving.backend_wait import (
    RETRY_AFTER_SECONDS,
    WAIT_HEADER,
    RouteKey,
    WaitingRequests,
    requested_wait,
    unavailable,
)
from modelfleet.sim.serving.engine import EngineProfile, EngineState
from modelfleet.sim.serving.model_args import pod_model, serving_ports
from modelfleet.sim.serving.openai_api import fails, handle_engine
from modelfleet.sim.serving.routes import (
    BackendRef,
    RuleMatch,
    attached,
    match_request,
    pick_backend,
    rewrite_path,
)
from modelfleet.sim.serving.traffic_policy import (
    POLICY_API_VERSION,
    POLICY_KIND,
    HostOutcome,
    OutlierDetector,
    RetryPolicy,
    TrafficPolicy,
    policy_for,
)

__all__ = ["ServingPlane"]

log = logging.getLogger(__name__)
_POOL_GROUP = "inference.networking.k8s.io"
_HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "host", "content-length"}
)
_SERVICE_NAME_LABEL = "kubernetes.io/service-name"
_ROLE = "llm-d.ai/role"
_SERVICE_LABEL = "modelfleet.dev/service"
# The gateway's metrics port (Envoy Gateway's), reached through the API server's service proxy.
GATEWAY_METRICS_PORT = 19001
_HOLD_POLL_SECONDS = 0.1
_UPSTREAM_LIMIT = 1024


def _engine_image(pod: Mapping[str, Any]) -> str:
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return str(containers[0].get("image", ""))


def _host(backend: BackendRef) -> str:
    """The outlier detector's host: one backendRef (the front door's backends are selectorless
    Services of one endpoint each, so a backendRef is an endpoint)."""
    return f"{backend.namespace}/{backend.kind}/{backend.name}"


@dataclass(frozen=True)
class _Answer:
    status: int | None
    response: web.StreamResponse | None


class _NoBackendError(Exception):
    """Nothing Ready behind the chosen backend (503)."""


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
        self._gateway = (gateway_namespace, gateway_name)
        self._rng = random.Random(seed)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._gateway_port = 0
        self._metrics_port = 0
        self.waiting = WaitingRequests()
        # local port -> engine; (namespace, pod) -> {container port: (local port, site)}
        self._by_port: dict[int, EngineState] = {}
        self._pods: dict[tuple[str, str], tuple[str, dict[int, tuple[int, web.SockSite]]]] = {}
        self._lock = asyncio.Lock()
        self._sub: Any = None
        # Outlier state per route rule (namespace, route, matched prefix), and retries sent.
        self._outliers: dict[tuple[str, str, str], OutlierDetector] = {}
        self.retries = 0

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        self._gateway_port, _ = await self._listen()
        self._metrics_port, _ = await self._listen()
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5.0),
            auto_decompress=False,
            # Envoy's default circuit breaker (1024 requests per cluster), not aiohttp's 100
            # connections: under load the queue must build at the engines, where the
            # autoscaler sees it, not hidden in the gateway.
            connector=aiohttp.TCPConnector(limit=_UPSTREAM_LIMIT),
        )
        self._sub = self.store.subscribe([("v1", "Pod")], callback=self._on_pod)
        rt = self.store.resource_type("v1", "Pod")
        for pod in list(self.store.list_objects(rt).items):
            await self._sync_pod(pod, deleted=False)

    async def stop(self) -> None:
        if self._sub is not None:
            self._sub.close()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()
        self._by_port.clear()
        self._pods.clear()

    async def _listen(self) -> tuple[int, web.SockSite]:
        assert self._runner is not None
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, 0))
        site = web.SockSite(self._runner, sock)
        await site.start()
        return int(sock.getsockname()[1]), site

    # -- addresses -------------------------------------------------------------------------

    @property
    def gateway_port(self) -> int:
        return self._gateway_port

    @property
    def gateway_url(self) -> str:
        return f"http://{self.host}:{self._gateway_port}"

    def engine_url(self, namespace: str, pod: str, port: int = 8000) -> str | None:
        """Where a Ready pod's container port answers, or None."""
        entry = self._pods.get((namespace, pod))
        if entry is None or port not in entry[1]:
            return None
        return f"http://{self.host}:{entry[1][port][0]}"

    def service_url(self, namespace: str, name: str, port: str) -> str | None:
        """Where a Service the plane itself stands behind answers: the gateway's metrics."""
        if (namespace, name) == self._gateway and port in ("metrics", str(GATEWAY_METRICS_PORT)):
            return f"http://{self.host}:{self._metrics_port}"
        return None

    def engine(self, namespace: str, pod: str) -> EngineState | None:
        entry = self._pods.get((namespace, pod))
        if entry is None or not entry[1]:
            return None
        return self._by_port[next(iter(entry[1].values()))[0]]

    @property
    def serving_pods(self) -> list[tuple[str, str]]:
        return sorted(self._pods)

    # -- pods ------------------------------------------------------------------------------

    async def _on_pod(self, event: WatchEvent) -> None:
        await self._sync_pod(event.object, deleted=event.type == "DELETED")

    async def _sync_pod(self, pod: Mapping[str, Any], *, deleted: bool) -> None:
        meta = pod.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        ip = str((pod.get("status") or {}).get("podIP") or "")
        serving = not deleted and not meta.get("deletionTimestamp") and pod_is_ready(pod)
        ports = serving_ports(pod) if serving else []
        model = pod_model(pod) if ports else None
        async with self._lock:
            current = self._pods.get(key)
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
                self._by_port[local] = engine
            self._pods[key] = (ip, sites)

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
        _, sites = self._pods.pop(key)
        for local, site in sites.values():
            self._by_port.pop(local, None)
            with contextlib.suppress(Exception):
                await site.stop()

    def _local_port(self, ip: str, port: int) -> int | None:
        for pod_ip, sites in self._pods.values():
            if pod_ip == ip and port in sites:
                return sites[port][0]
        return None

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
            return await self._route(request)
        if port == self._metrics_port:
            if request.path != "/metrics":
                return web.Response(status=404, text=f"no route {request.path}")
            text = self.waiting.metrics_text() + self._outlier_metrics()
            return web.Response(text=text, content_type="text/plain")
        engine = self._by_port.get(port)
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

    def _outlier_metrics(self) -> str:
        """Envoy's outlier-detection and retry counters (cluster.<name>.outlier_detection.*,
        upstream_rq_retry) in its Prometheus names, one series per route rule."""
        ejected = "envoy_cluster_outlier_detection_ejections_enforced_total"
        active = "envoy_cluster_outlier_detection_ejections_active"
        overflow = "envoy_cluster_outlier_detection_ejections_overflow"
        lines = [
            f"# TYPE {ejected} counter",
            f"# TYPE {active} gauge",
            f"# TYPE {overflow} counter",
        ]
        now = asyncio.get_running_loop().time()
        for (namespace, route, prefix), detector in sorted(self._outliers.items()):
            labels = f'envoy_cluster_name="httproute/{namespace}/{route}{prefix}"'
            lines += [
                f"{ejected}{{{labels}}} {float(detector.ejections_enforced_total)}",
                f"{active}{{{labels}}} {float(detector.active_ejections(now))}",
                f"{overflow}{{{labels}}} {float(detector.ejections_overflow)}",
            ]
        lines += [
            "# TYPE envoy_cluster_upstream_rq_retry counter",
            f"envoy_cluster_upstream_rq_retry {float(self.retries)}",
        ]
        return "\n".join(lines) + "\n"

    # -- gateway ---------------------------------------------------------------------------

    def _objects(self, api_version: str, kind: str, namespace: str | None = None,
                 selector: Any = None) -> list[dict[str, Any]]:  # fmt: skip
        try:
            rt = self.store.resource_type(api_version, kind)
        except ApiError:
            return []
        return list(self.store.list_objects(rt, namespace=namespace, label_selector=selector).items)

    def _get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.store.get_object(
                self.store.resource_type(api_version, kind), namespace, name
            )
        except ApiError:
            return None

    def _match(self, path: str) -> tuple[RuleMatch, RouteKey] | None:
        routes = [
            r
            for r in self._objects("gateway.networking.k8s.io/v1", "HTTPRoute")
            if attached(r, *self._gateway)
        ]
        match = match_request(routes, path)
        if match is None:
            return None
        route = self._get("gateway.networking.k8s.io/v1", "HTTPRoute", match.namespace, match.route)
        labels = ((route or {}).get("metadata") or {}).get("labels") or {}
        return match, RouteKey(match.namespace, match.route, str(labels.get(_SERVICE_LABEL, "")))

    def _choose(self, match: RuleMatch) -> tuple[BackendRef, str]:
        backend = pick_backend(match.backends, self._rng)
        if backend is None:
            raise _NoBackendError("no backends")
        return backend, self._resolve(backend)

    def _policy(self, match: RuleMatch) -> TrafficPolicy:
        policies = self._objects(POLICY_API_VERSION, POLICY_KIND)
        return policy_for(policies, (match.namespace, match.route), self._gateway)

    def _detector(
        self, match: RuleMatch, policy: TrafficPolicy, now: float
    ) -> OutlierDetector | None:
        """The outlier detector of the matched rule (one Envoy cluster over its backendRefs),
        kept while the rule's passive health check stays the same."""
        key = (match.namespace, match.route, match.prefix)
        if policy.passive is None:
            self._outliers.pop(key, None)
            return None
        detector = self._outliers.get(key)
        if detector is None or detector.check != policy.passive:
            detector = OutlierDetector(policy.passive, started=now)
            self._outliers[key] = detector
        detector.sync((_host(b) for b in match.backends if b.weight > 0), now)
        return detector

    def _choose_host(
        self,
        match: RuleMatch,
        detector: OutlierDetector | None,
        tried: set[str],
        now: float,
    ) -> tuple[BackendRef, str]:
        """A weighted draw over the rule's backends that are not ejected, preferring ones not
        tried yet (Envoy's previous_hosts retry predicate); all of them when every one is out
        (Envoy's panic mode: better a sick host than none)."""
        live = [b for b in match.backends if b.weight > 0]
        if detector is not None:
            keys = detector.available([_host(b) for b in live], now)
            healthy = [b for b in live if _host(b) in keys] or live
        else:
            healthy = live
        fresh = [b for b in healthy if _host(b) not in tried] or healthy
        backend = pick_backend(fresh, self._rng)
        if backend is None:
            raise _NoBackendError("no backends")
        return backend, self._resolve(backend)

    async def _route(self, request: web.Request) -> web.StreamResponse:
        found = self._match(request.path)
        if found is None:
            return web.Response(status=404, text=f"no route for {request.path}")
        match, key = found
        if not self._authorised(request, match):
            return web.json_response(
                {"error": {"message": "a valid API key is required", "type": "Unauthorized"}},
                status=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        loop = asyncio.get_running_loop()
        wait = requested_wait(request.headers)
        deadline = loop.time() + wait
        policy = self._policy(match)
        detector = self._detector(match, policy, loop.time())
        with contextlib.ExitStack() as stack:
            holding = False
            while True:
                try:
                    backend, base = self._choose_host(match, detector, set(), loop.time())
                    break
                except _NoBackendError as exc:
                    if loop.time() >= deadline:
                        if holding:
                            self.waiting.timed_out(key)
                            return _unavailable(
                                "backend_wait_timeout",
                                key,
                                f"held {wait:g} s and no backend became Ready",
                            )
                        return _unavailable(
                            "no_ready_backend",
                            key,
                            f"{exc}; send {WAIT_HEADER}: <seconds> to be held until one is Ready",
                        )
                if not holding:
                    if self.waiting.full(key):
                        self.waiting.rejected(key)
                        return _unavailable(
                            "backend_queue_full",
                            key,
                            "no backend is Ready and the route holds its limit of "
                            f"{self.waiting.limit} waiting request(s) already",
                        )
                    # Held until a backend is Ready (scale from zero) or the wait runs out.
                    stack.enter_context(self.waiting.hold(key))
                    holding = True
                await asyncio.sleep(min(_HOLD_POLL_SECONDS, max(0.0, deadline - loop.time())))
                again = self._match(request.path)
                if again is None:
                    return web.Response(status=404, text=f"no route for {request.path}")
                match = again[0]
        body = await request.read()
        retries = policy.retry.num_retries if policy.retry is not None else 0
        tried: set[str] = set()
        attempt = 0
        while True:
            path = rewrite_path(request.path, match, backend.rewrite or match.rewrite)
            tried.add(_host(backend))
            last = attempt >= retries
            answer = await self._proxy(
                request,
                base,
                path,
                self._upstream_token(backend),
                body=body,
                final=last,
                retry=policy.retry,
            )
            if detector is not None:
                detector.record(_host(backend), HostOutcome(answer.status), loop.time())
            if answer.response is not None:
                return answer.response
            attempt += 1
            assert policy.retry is not None
            await asyncio.sleep(policy.retry.backoff(attempt, self._rng.random()))
            self.retries += 1
            if detector is not None:
                detector.sync((_host(b) for b in match.backends if b.weight > 0), loop.time())
            try:
                backend, base = self._choose_host(match, detector, tried, loop.time())
            except _NoBackendError as exc:
                return web.Response(status=503, text=f"no healthy upstream: {exc}")

    def _authorised(self, request: web.Request, match: RuleMatch) -> bool:
        refs = [e for e in match.extensions if e.get("kind") == "Secret"]
        if not refs:
            return True
        header = request.headers.get("Authorization", "")
        scheme, _, key = header.partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            return False
        digest = hashlib.sha256(key.strip().encode()).hexdigest()
        for ref in refs:
            secret = self._get("v1", "Secret", match.namespace, str(ref.get("name", "")))
            for value in ((secret or {}).get("data") or {}).values():
                with contextlib.suppress(ValueError):
                    if base64.b64decode(value).decode().strip() == digest:
                        return True
        return False

    def _upstream_token(self, backend: BackendRef) -> str | None:
        """A backendRef's ExtensionRef to a Secret: its ``token`` replaces the caller's
        Authorization on requests to that backend (a provider's key)."""
        for ref in backend.extensions:
            if ref.get("kind") != "Secret":
                continue
            secret = self._get("v1", "Secret", backend.namespace, str(ref.get("name", "")))
            token = ((secret or {}).get("data") or {}).get("token")
            if token:
                with contextlib.suppress(ValueError):
                    return base64.b64decode(token).decode().strip()
        return None

    def _resolve(self, backend: BackendRef) -> str:
        """The base URL (scheme://host:port) of one endpoint behind ``backend``."""
        if backend.group == _POOL_GROUP and backend.kind == "InferencePool":
            return self._pool_endpoint(backend)
        if backend.group in ("", "core") and backend.kind == "Service":
            return self._service_endpoint(backend)
        raise _NoBackendError(f"unsupported backend kind {backend.group}/{backend.kind}")

    def _ready_engines(self, namespace: str, selector: Mapping[str, Any] | None,
                       port: int) -> list[tuple[EngineState, int]]:  # fmt: skip
        out = []
        for pod in self._objects("v1", "Pod", namespace, label_selector_from_object(selector)):
            name = str(pod.get("metadata", {}).get("name", ""))
            entry = self._pods.get((namespace, name))
            if entry is not None and port in entry[1]:
                local = entry[1][port][0]
                out.append((self._by_port[local], local))
        return out

    def _least_loaded(self, candidates: list[tuple[EngineState, int]], what: str) -> str:
        if not candidates:
            raise _NoBackendError(f"no Ready pod behind {what}")
        low = min(engine.load for engine, _ in candidates)
        picks = [local for engine, local in candidates if engine.load == low]
        return f"http://{self.host}:{self._rng.choice(picks)}"

    def _pool_endpoint(self, backend: BackendRef) -> str:
        pool = self._get(f"{_POOL_GROUP}/v1", "InferencePool", backend.namespace, backend.name)
        if pool is None:
            raise _NoBackendError(f"InferencePool {backend.name} not found")
        spec = pool.get("spec") or {}
        ports = spec.get("targetPorts") or [{"number": 8000}]
        port = int(ports[0].get("number", 8000))
        selector = spec.get("selector") or {}
        # A disaggregated pool: the picker sends requests to the decode side (its sidecar
        # fetches the prefill), so only decode pods take requests directly.
        decode = self._ready_engines(
            backend.namespace,
            {**selector, "matchLabels": {**selector.get("matchLabels", {}), _ROLE: "decode"}},
            port,
        )
        candidates = decode or self._ready_engines(backend.namespace, selector, port)
        return self._least_loaded(candidates, f"InferencePool {backend.name}")

    def _service_endpoint(self, backend: BackendRef) -> str:
        svc = self._get("v1", "Service", backend.namespace, backend.name)
        if svc is None:
            raise _NoBackendError(f"Service {backend.name} not found")
        spec = svc.get("spec") or {}
        svc_ports = spec.get("ports") or []
        chosen = next(
            (p for p in svc_ports if backend.port is None or p.get("port") == backend.port),
            None,
        )
        if chosen is None:
            raise _NoBackendError(f"Service {backend.name} has no port {backend.port}")
        if spec.get("selector"):
            target = chosen.get("targetPort", chosen.get("port"))
            if not isinstance(target, int):
                raise _NoBackendError(f"named targetPort {target!r} is not supported")
            candidates = self._ready_engines(
                backend.namespace, {"matchLabels": spec["selector"]}, target
            )
            return self._least_loaded(candidates, f"Service {backend.name}")
        return self._slice_endpoint(backend, chosen)

    def _slice_endpoint(self, backend: BackendRef, svc_port: Mapping[str, Any]) -> str:
        slices = self._objects(
            "discovery.k8s.io/v1",
            "EndpointSlice",
            backend.namespace,
            label_selector_from_object({"matchLabels": {_SERVICE_NAME_LABEL: backend.name}}),
        )
        port_name = svc_port.get("name", "")
        targets: list[str] = []
        for item in slices:
            ports = [p for p in item.get("ports") or [] if p.get("name", "") == port_name]
            if not ports:
                continue
            port = int(ports[0].get("port", svc_port.get("port", 80)))
            https = ports[0].get("appProtocol") == "https" or port == 443
            for endpoint in item.get("endpoints") or []:
                if (endpoint.get("conditions") or {}).get("ready") is False:
                    continue
                for address in endpoint.get("addresses") or []:
                    local = self._local_port(str(address), port)
                    if local is not None:
                        targets.append(f"http://{self.host}:{local}")
                    else:
                        host = f"[{address}]" if ":" in str(address) else str(address)
                        targets.append(f"{'https' if https else 'http'}://{host}:{port}")
        if not targets:
            raise _NoBackendError(f"no ready endpoint of Service {backend.name}")
        return self._rng.choice(targets)

    async def _proxy(
        self,
        request: web.Request,
        base: str,
        path: str,
        token: str | None = None,
        *,
        body: bytes = b"",
        final: bool = True,
        retry: RetryPolicy | None = None,
    ) -> _Answer:
        """Send the request to one host. The answer is relayed (``response`` set) unless the
        attempt is not ``final`` and the policy retries what came back; ``status`` is what the
        host answered (None: no answer), for the outlier detector."""
        assert self._session is not None
        url = base + path + (f"?{request.query_string}" if request.query_string else "")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        headers["Host"] = urlsplit(base).netloc
        if token is not None:
            headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
            headers["Authorization"] = f"Bearer {token}"
        try:
            async with self._session.request(
                request.method, url, headers=headers, data=body or None, allow_redirects=False
            ) as upstream:
                if not final and retry is not None and retry.retries_status(upstream.status):
                    # Nothing went downstream yet: drop this answer and try again.
                    return _Answer(upstream.status, None)
                return _Answer(upstream.status, await relay(request, upstream, _HOP_HEADERS))
        except (aiohttp.ClientError, OSError) as exc:
            log.debug("gateway: upstream %s failed: %s", url, exc)
            if not final and retry is not None and retry.retries_failure():
                return _Answer(None, None)
            return _Answer(None, web.Response(status=503, text="upstream connect error"))


def _unavailable(why: str, key: RouteKey, detail: str) -> web.Response:
    answer = unavailable(why, key, detail, RETRY_AFTER_SECONDS)
    return web.json_response(answer.body, status=answer.status, headers=answer.headers)
