"""A global load balancer in front of the fleet's gateways, shaped like Cloudflare Load Balancing
(API v4): health monitors, pools of origins, and proxied load balancers that answer on one
hostname each and relay every request to a healthy origin.

The API (``/client/v4``, bearer token, Cloudflare's ``{"success", "errors", "messages",
"result"}`` envelope and error codes) serves what a client of the real one uses:

- ``/accounts/{account}/load_balancers/monitors[/{id}]``: GET, POST, PUT, DELETE;
- ``/accounts/{account}/load_balancers/pools[/{id}]``: GET, POST, PUT, DELETE, and
  ``/pools/{id}/health`` (each origin's health as the monitor last saw it, one "pop");
- ``/zones/{zone}/load_balancers[/{id}]``: GET, POST, PUT, DELETE.

The edge (the anycast address every proxied hostname resolves to) is one loopback listener.
There is no DNS here, so a client reaches a hostname through the edge as its HTTP proxy
(``HTTP_PROXY``, httpx's ``proxy=``): the request's ``Host`` picks the load balancer, as the
real edge does. Steering: ``off`` (the first healthy pool of ``default_pools``, then
``fallback_pool``) or ``random``; origin steering within a pool is a weighted random draw over
its healthy enabled origins. A connection that fails before any answer (refused, reset,
connect timeout) is sent again to another origin (Cloudflare's zero-downtime failover); when
none answers the edge says 521/522/520 as Cloudflare does.

Monitors act as Cloudflare's: every ``interval`` seconds each enabled origin is checked (method,
path, ``expected_codes`` such as ``200`` or ``2xx``, ``timeout``, ``retries`` extra tries), and an
origin turns unhealthy after ``consecutive_down`` failed checks in a row and healthy again after
``consecutive_up`` good ones. A new origin counts as healthy until its first check.

Development/test emulator only: product code never imports ``modelfleet.sim``, and nothing here
imports product code. Binds two loopback ports (API and edge) and connects only to origins.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
import socket
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from modelfleet.sim.http_relay import relay
from modelfleet.sim.serving.lb_api import (
    LB_FIELDS,
    MONITOR_FIELDS,
    POOL_FIELDS,
    ApiError,
    check_lb,
    check_monitor,
    check_pool,
    check_unused,
    expected,
    fill,
    now,
)

__all__ = ["GlobalLoadBalancer", "OriginHealth"]

log = logging.getLogger(__name__)
_HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "content-length",
     "proxy-connection", "proxy-authorization"}
)  # fmt: skip
_POP = "SIM"


@dataclass
class OriginHealth:
    healthy: bool = True
    failures: int = 0
    successes: int = 0
    reason: str = "No failures"
    response_code: int = 0
    checked: bool = False


@dataclass
class _Account:
    monitors: dict[str, dict[str, Any]] = field(default_factory=dict)
    pools: dict[str, dict[str, Any]] = field(default_factory=dict)


def _port(origin: dict[str, Any]) -> int:
    return int(origin.get("port") or 80)


def _origin_key(pool_id: str, origin: dict[str, Any]) -> tuple[str, str, int]:
    return pool_id, str(origin["address"]), _port(origin)


class GlobalLoadBalancer:
    """One account with one zone, on the current event loop."""

    def __init__(
        self,
        *,
        account_id: str,
        zone_id: str,
        zone_name: str,
        token: str,
        host: str = "127.0.0.1",
        seed: int | None = None,
    ) -> None:
        self.account_id, self.zone_id, self.zone_name = account_id, zone_id, zone_name
        self._token = token
        self.host = host
        self._rng = random.Random(seed)
        self._ids = itertools.count(1)
        self._account = _Account()
        self._lbs: dict[str, dict[str, Any]] = {}
        self.health: dict[tuple[str, str, int], OriginHealth] = {}
        self._monitor_tasks: dict[str, asyncio.Task[None]] = {}
        self._runners: list[web.AppRunner] = []
        self._session: aiohttp.ClientSession | None = None
        self.api_port = 0
        self.edge_port = 0
        # Requests the edge sent again to another origin (zero-downtime failover).
        self.failovers = 0

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5.0), auto_decompress=False
        )
        api = web.Application(middlewares=[self._envelope])
        api.router.add_route("*", "/client/v4/{tail:.*}", self._api)
        edge = web.Application(client_max_size=8 * 1024 * 1024)
        edge.router.add_route("*", "/{tail:.*}", self._edge)
        self.api_port = await self._serve(api)
        self.edge_port = await self._serve(edge)

    async def _serve(self, app: web.Application) -> int:
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        self._runners.append(runner)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, 0))
        await web.SockSite(runner, sock).start()
        return int(sock.getsockname()[1])

    async def stop(self) -> None:
        for task in self._monitor_tasks.values():
            task.cancel()
        for task in self._monitor_tasks.values():
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._monitor_tasks.clear()
        for runner in self._runners:
            await runner.cleanup()
        if self._session is not None:
            await self._session.close()

    @property
    def api_url(self) -> str:
        return f"http://{self.host}:{self.api_port}/client/v4"

    @property
    def edge_url(self) -> str:
        """The anycast address every proxied hostname resolves to (use it as an HTTP proxy)."""
        return f"http://{self.host}:{self.edge_port}"

    # -- API ---------------------------------------------------------------------------------

    @web.middleware
    async def _envelope(self, request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            if request.headers.get("Authorization") != f"Bearer {self._token}":
                raise ApiError(403, 10000, "Authentication error")
            response: web.StreamResponse = await handler(request)
            return response
        except ApiError as exc:
            return web.json_response(
                {
                    "success": False,
                    "errors": [{"code": exc.code, "message": exc.message}],
                    "messages": [],
                    "result": None,
                },
                status=exc.status,
            )

    @staticmethod
    def _ok(result: Any) -> web.Response:
        return web.json_response({"success": True, "errors": [], "messages": [], "result": result})

    async def _body(self, request: web.Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except ValueError:
            raise ApiError(400, 1002, "Malformed JSON in request body") from None
        if not isinstance(body, dict):
            raise ApiError(400, 1002, "Malformed JSON in request body")
        return body

    async def _api(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.match_info["tail"].split("/") if p]
        method = request.method
        if len(parts) >= 3 and parts[0] == "accounts" and parts[2] == "load_balancers":
            if parts[1] != self.account_id:
                raise ApiError(403, 9109, "Unauthorized to access requested resource")
            rest = parts[3:]
            if rest[:1] == ["monitors"]:
                return await self._collection(
                    request, method, rest[1:], self._account.monitors, MONITOR_FIELDS,
                    check_monitor, 1001,
                )  # fmt: skip
            if rest[:1] == ["pools"]:
                if len(rest) == 3 and rest[2] == "health" and method == "GET":
                    return self._ok(self._pool_health(rest[1]))
                return await self._collection(
                    request, method, rest[1:], self._account.pools, POOL_FIELDS,
                    lambda item: check_pool(item, self._account.monitors), 1002,
                )  # fmt: skip
        if len(parts) >= 3 and parts[0] == "zones" and parts[2] == "load_balancers":
            if parts[1] != self.zone_id:
                raise ApiError(404, 1001, "Invalid zone identifier")
            return await self._collection(
                request,
                method,
                parts[3:],
                self._lbs,
                LB_FIELDS,
                lambda item: check_lb(item, self._account.pools, self._lbs, self.zone_name),
                1003,
            )
        raise ApiError(
            404, 7003, "Could not route to the requested resource: no route for that URI"
        )

    async def _collection(
        self,
        request: web.Request,
        method: str,
        rest: list[str],
        objects: dict[str, dict[str, Any]],
        defaults: dict[str, Any],
        check: Any,
        not_found: int,
    ) -> web.Response:
        if not rest:
            if method == "GET":
                return self._ok([objects[k] for k in sorted(objects)])
            if method == "POST":
                body = await self._body(request)
                item = fill(defaults, body, None)
                check(item)
                item["id"] = f"{next(self._ids):032x}"
                item["created_on"] = item["modified_on"] = now()
                objects[item["id"]] = item
                self._changed()
                return self._ok(item)
            raise ApiError(405, 10405, "Method not allowed")
        if len(rest) != 1:
            raise ApiError(404, 7003, "Could not route to the requested resource")
        item_id = rest[0]
        old = objects.get(item_id)
        if old is None:
            raise ApiError(404, not_found, "Not found")
        if method == "GET":
            return self._ok(old)
        if method in ("PUT", "PATCH"):
            body = await self._body(request)
            item = fill(defaults, body, old if method == "PATCH" else None)
            check(item)
            item.update(id=item_id, created_on=old["created_on"], modified_on=now())
            objects[item_id] = item
            self._changed()
            return self._ok(item)
        if method == "DELETE":
            check_unused(item_id, self._account.pools, self._lbs)
            del objects[item_id]
            self._changed()
            return self._ok({"id": item_id})
        raise ApiError(405, 10405, "Method not allowed")

    def _pool_health(self, pool_id: str) -> dict[str, Any]:
        pool = self._account.pools.get(pool_id)
        if pool is None:
            raise ApiError(404, 1002, "Not found")
        origins = []
        for origin in pool["origins"]:
            h = self.health.get(_origin_key(pool_id, origin), OriginHealth())
            origins.append(
                {
                    str(origin["address"]): {
                        "healthy": h.healthy,
                        "failure_reason": h.reason,
                        "response_code": h.response_code,
                        "port": _port(origin),
                        "name": origin["name"],
                    }
                }
            )
        healthy = self._healthy_origins(pool)
        return {
            "pool_id": pool_id,
            "pop_health": {
                _POP: {
                    "healthy": len(healthy) >= int(pool["minimum_origins"]),
                    "origins": origins,
                }
            },
        }

    # -- monitors ------------------------------------------------------------------------------

    def _changed(self) -> None:
        """(Re)start one checker per pool with a monitor; forget the health of origins gone."""
        live = {_origin_key(pid, o) for pid, p in self._account.pools.items() for o in p["origins"]}
        for key in list(self.health):
            if key not in live:
                del self.health[key]
        for pool_id in list(self._monitor_tasks):
            pool = self._account.pools.get(pool_id)
            if pool is None or pool["monitor"] is None:
                self._monitor_tasks.pop(pool_id).cancel()
        for pool_id, pool in self._account.pools.items():
            if pool["monitor"] is not None and pool_id not in self._monitor_tasks:
                self._monitor_tasks[pool_id] = asyncio.create_task(self._check_loop(pool_id))

    async def _check_loop(self, pool_id: str) -> None:
        while True:
            pool = self._account.pools.get(pool_id)
            if pool is None or pool["monitor"] is None:
                return
            monitor = self._account.monitors[pool["monitor"]]
            origins = [o for o in pool["origins"] if o.get("enabled", True)]
            await asyncio.gather(*(self._check(pool_id, monitor, o) for o in origins))
            await asyncio.sleep(float(monitor["interval"]))

    async def _check(self, pool_id: str, monitor: dict[str, Any], origin: dict[str, Any]) -> None:
        assert self._session is not None
        port = int(monitor["port"] or _port(origin))
        url = f"{monitor['type']}://{origin['address']}:{port}{monitor['path']}"
        ok, reason, code = False, "", 0
        for _ in range(1 + int(monitor["retries"])):
            try:
                async with self._session.request(
                    str(monitor["method"]),
                    url,
                    headers={k: v[0] for k, v in (monitor["header"] or {}).items() if v},
                    timeout=aiohttp.ClientTimeout(total=float(monitor["timeout"])),
                    allow_redirects=bool(monitor["follow_redirects"]),
                ) as response:
                    await response.read()
                    code = response.status
                    ok = expected(str(monitor["expected_codes"]), code)
                    reason = "No failures" if ok else "HTTP response code is not expected"
            except TimeoutError:
                reason = "TCP connection failed: timeout"
            except aiohttp.ClientError:
                reason = "TCP connection failed"
            if ok:
                break
        key = _origin_key(pool_id, origin)
        h = self.health.setdefault(key, OriginHealth())
        h.checked, h.reason, h.response_code = True, reason, code
        if ok:
            h.successes, h.failures = h.successes + 1, 0
            if not h.healthy and h.successes >= max(1, int(monitor["consecutive_up"])):
                h.healthy = True
        else:
            h.failures, h.successes = h.failures + 1, 0
            if h.healthy and h.failures >= max(1, int(monitor["consecutive_down"])):
                h.healthy = False

    # -- edge --------------------------------------------------------------------------------

    def _healthy_origins(self, pool: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            o
            for o in pool["origins"]
            if o.get("enabled", True)
            and self.health.get(_origin_key(pool["id"], o), OriginHealth()).healthy
        ]

    def _pool_order(self, lb: dict[str, Any]) -> list[dict[str, Any]]:
        """Pools in the order the edge tries them: healthy default pools (in order, or shuffled
        for ``random``), then the fallback pool."""
        pools = [self._account.pools[p] for p in lb["default_pools"] if p in self._account.pools]
        healthy = [
            p
            for p in pools
            if p["enabled"] and len(self._healthy_origins(p)) >= int(p["minimum_origins"])
        ]
        if lb["steering_policy"] == "random":
            self._rng.shuffle(healthy)
        fallback = self._account.pools.get(lb["fallback_pool"])
        return healthy + ([fallback] if fallback is not None and fallback not in healthy else [])

    def _candidates(self, lb: dict[str, Any]) -> list[dict[str, Any]]:
        """Origins in try order: per pool a weighted shuffle of its healthy enabled origins
        (all enabled ones when none is healthy, as the fallback pool is used)."""
        out: list[dict[str, Any]] = []
        for pool in self._pool_order(lb):
            origins = self._healthy_origins(pool) or [
                o for o in pool["origins"] if o.get("enabled", True)
            ]
            remaining = list(origins)
            while remaining:
                weights = [float(o.get("weight", 1)) or 0.0001 for o in remaining]
                pick = self._rng.choices(range(len(remaining)), weights)[0]
                origin = remaining.pop(pick)
                if origin not in out:
                    out.append(origin)
        return out

    async def _edge(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        hostname = (request.host or "").split(":")[0].lower().rstrip(".")
        lb = next((b for b in self._lbs.values() if b["name"] == hostname and b["enabled"]), None)
        if lb is None or not lb["proxied"]:
            return web.Response(status=530, text=f"error 1016: origin DNS error for {hostname}")
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        status, text = 521, "error 521: web server is down"
        for attempt, origin in enumerate(self._candidates(lb)):
            if attempt:
                self.failovers += 1
            url = f"http://{origin['address']}:{_port(origin)}{request.path_qs}"
            try:
                upstream = await self._session.request(
                    request.method, url, headers=headers, data=body, allow_redirects=False
                )
            except TimeoutError:
                status, text = 522, "error 522: connection timed out"
                continue
            except aiohttp.ClientConnectorError:
                status, text = 521, "error 521: web server is down"
                continue
            except aiohttp.ClientError:
                status, text = 520, "error 520: web server returned an unknown error"
                continue
            try:
                return await relay(request, upstream, _HOP_HEADERS)
            finally:
                upstream.release()
        return web.Response(status=status, text=text)
