"""The simulated cluster's gateway: HTTPRoutes attached to its Gateway (Exact/PathPrefix matches,
URLRewrite on the rule or per backendRef, weighted backendRefs resolved by :mod:`.backends`), the
API-key check and upstream credentials (:mod:`.credentials`), Envoy Gateway's
``BackendTrafficPolicy`` on a route (passive health check and retries, :mod:`.traffic_policy`),
holding requests while no backend is Ready (:mod:`.backend_wait`), and its metrics (waiting
requests, outlier ejections, retries) in Envoy's Prometheus names. 503 when the chosen backend
has nothing Ready, 404 when no route matches.

Development/test emulator only. Reads the cluster's in-process store and connects only to the
backends routes name.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from modelfleet.sim.apiserver.store import ClusterStore
from modelfleet.sim.http_relay import relay
from modelfleet.sim.serving.backend_wait import (
    RETRY_AFTER_SECONDS,
    WAIT_HEADER,
    RouteKey,
    WaitingRequests,
    requested_wait,
    unavailable,
)
from modelfleet.sim.serving.backends import Backends, NoBackendError
from modelfleet.sim.serving.credentials import authorised, upstream_token
from modelfleet.sim.serving.routes import (
    BackendRef,
    RuleMatch,
    attached,
    match_request,
    pick_backend,
    rewrite_path,
)
from modelfleet.sim.serving.store_view import get, objects
from modelfleet.sim.serving.traffic_policy import (
    POLICY_API_VERSION,
    POLICY_KIND,
    HostOutcome,
    OutlierDetector,
    RetryPolicy,
    TrafficPolicy,
    policy_for,
)

__all__ = ["Gateway"]

log = logging.getLogger(__name__)
_HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "host", "content-length"}
)
_SERVICE_LABEL = "modelfleet.dev/service"
_HOLD_POLL_SECONDS = 0.1
_UPSTREAM_LIMIT = 1024


def _host(backend: BackendRef) -> str:
    """The outlier detector's host: one backendRef (the front door's backends are selectorless
    Services of one endpoint each, so a backendRef is an endpoint)."""
    return f"{backend.namespace}/{backend.kind}/{backend.name}"


@dataclass(frozen=True)
class _Answer:
    status: int | None
    response: web.StreamResponse | None


class Gateway:
    """One cluster's Gateway (``namespace``/``name``) routing to its backends."""

    def __init__(
        self,
        store: ClusterStore,
        gateway: tuple[str, str],
        backends: Backends,
        waiting: WaitingRequests,
        rng: random.Random,
    ) -> None:
        self.store = store
        self.gateway = gateway
        self.backends = backends
        self.waiting = waiting
        self._rng = rng
        self._session: aiohttp.ClientSession | None = None
        # Outlier state per route rule (namespace, route, matched prefix), and retries sent.
        self._outliers: dict[tuple[str, str, str], OutlierDetector] = {}
        self.retries = 0

    def open(self) -> None:
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5.0),
            auto_decompress=False,
            # Envoy's default circuit breaker (1024 requests per cluster), not aiohttp's 100
            # connections: under load the queue must build at the engines, where the
            # autoscaler sees it, not hidden in the gateway.
            connector=aiohttp.TCPConnector(limit=_UPSTREAM_LIMIT),
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    # -- metrics ---------------------------------------------------------------------------

    def metrics_text(self) -> str:
        return self.waiting.metrics_text() + self._outlier_metrics()

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

    # -- routing ---------------------------------------------------------------------------

    def _match(self, path: str) -> tuple[RuleMatch, RouteKey] | None:
        routes = [
            r
            for r in objects(self.store, "gateway.networking.k8s.io/v1", "HTTPRoute")
            if attached(r, *self.gateway)
        ]
        match = match_request(routes, path)
        if match is None:
            return None
        route = get(
            self.store, "gateway.networking.k8s.io/v1", "HTTPRoute", match.namespace, match.route
        )
        labels = ((route or {}).get("metadata") or {}).get("labels") or {}
        return match, RouteKey(match.namespace, match.route, str(labels.get(_SERVICE_LABEL, "")))

    def _policy(self, match: RuleMatch) -> TrafficPolicy:
        policies = objects(self.store, POLICY_API_VERSION, POLICY_KIND)
        return policy_for(policies, (match.namespace, match.route), self.gateway)

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
            raise NoBackendError("no backends")
        return backend, self.backends.resolve(backend)

    async def route(self, request: web.Request) -> web.StreamResponse:
        found = self._match(request.path)
        if found is None:
            return web.Response(status=404, text=f"no route for {request.path}")
        match, key = found
        if not authorised(self.store, request.headers, match):
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
                except NoBackendError as exc:
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
                upstream_token(self.store, backend),
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
            except NoBackendError as exc:
                return web.Response(status=503, text=f"no healthy upstream: {exc}")

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
