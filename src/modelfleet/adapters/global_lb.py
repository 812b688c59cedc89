"""Cloudflare Load Balancing (API v4) over httpx: make a service's monitor, pools and proxied
load balancer match a :class:`~modelfleet.rendering.global_address.GlobalPlan`, read each
pool's health, and remove them all again.

Setting (environment of the worker): ``MODELFLEET_CLOUDFLARE_ENDPOINT``, the API base (default
Cloudflare's); the simulated fleet's stand-in is reached that way. The API token is passed in by
the caller and goes into the Authorization header only, never into an error or a log line.

Side effects: outbound HTTP to the API only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import httpx

from modelfleet.rendering.global_address import GlobalPlan, pool_prefix

__all__ = ["ENV_ENDPOINT", "CloudflareLoadBalancing", "GlobalLBError", "PoolHealth"]

ENV_ENDPOINT = "MODELFLEET_CLOUDFLARE_ENDPOINT"
DEFAULT_ENDPOINT = "https://api.cloudflare.com/client/v4"


class GlobalLBError(Exception):
    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.message, self.retryable = message, retryable


@dataclass(frozen=True)
class PoolHealth:
    """One origin of one pool, as the load balancer's monitor last saw it."""

    origin: str
    healthy: bool
    reason: str


def _differs(want: dict[str, Any], have: dict[str, Any]) -> bool:
    return any(have.get(k) != v for k, v in want.items())


class CloudflareLoadBalancing:
    def __init__(
        self,
        token: str,
        account_id: str,
        zone_id: str,
        *,
        endpoint: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        base = (endpoint or os.environ.get(ENV_ENDPOINT) or DEFAULT_ENDPOINT).rstrip("/")
        self._http = httpx.Client(
            base_url=base, timeout=timeout, headers={"Authorization": f"Bearer {token}"}
        )
        self._account = f"/accounts/{account_id}/load_balancers"
        self._zone = f"/zones/{zone_id}/load_balancers"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> CloudflareLoadBalancing:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        try:
            response = self._http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise GlobalLBError(
                f"load balancing API unreachable: {type(exc).__name__}", retryable=True
            ) from None
        try:
            payload = response.json()
        except ValueError:
            payload = {}
        if response.is_success and payload.get("success", False):
            return payload.get("result")
        errors = payload.get("errors") or []
        detail = "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errors) or (
            f"HTTP {response.status_code}"
        )
        retryable = response.status_code == 429 or response.status_code >= 500
        raise GlobalLBError(
            f"{method} {path.split('/load_balancers', 1)[-1] or '/'} failed: {detail}",
            retryable=retryable,
        )

    def _list(self, path: str) -> list[dict[str, Any]]:
        result = self._call("GET", path)
        return list(result or [])

    def _put_or_post(
        self, path: str, found: dict[str, Any] | None, body: dict[str, Any]
    ) -> dict[str, Any]:
        if found is None:
            created: dict[str, Any] = self._call("POST", path, body)
            return created
        if _differs(body, found):
            updated: dict[str, Any] = self._call("PUT", f"{path}/{found['id']}", body)
            return updated
        return found

    def ensure(self, plan: GlobalPlan) -> dict[str, str]:
        """Make the monitor, pools and load balancer match ``plan``; pools of the service no
        longer planned are removed. Returns pool name -> pool id."""
        monitors = {m.get("description"): m for m in self._list(f"{self._account}/monitors")}
        monitor = self._put_or_post(
            f"{self._account}/monitors", monitors.get(plan.hostname), plan.monitor
        )
        prefix = pool_prefix(plan.hostname)
        existing = {
            p["name"]: p
            for p in self._list(f"{self._account}/pools")
            if str(p.get("name", "")).startswith(prefix)
        }
        ids: dict[str, str] = {}
        for name, body in plan.pools.items():
            pool = self._put_or_post(
                f"{self._account}/pools", existing.get(name), {**body, "monitor": monitor["id"]}
            )
            ids[name] = pool["id"]
        balancers = {b["name"]: b for b in self._list(self._zone)}
        body = dict(plan.load_balancer)
        body["default_pools"] = [ids[n] for n in body["default_pools"]]
        body["fallback_pool"] = ids[body["fallback_pool"]]
        self._put_or_post(self._zone, balancers.get(plan.hostname), body)
        for name, pool in existing.items():
            if name not in ids:
                self._call("DELETE", f"{self._account}/pools/{pool['id']}")
        return ids

    def health(self, pool_id: str) -> list[PoolHealth]:
        result = self._call("GET", f"{self._account}/pools/{pool_id}/health") or {}
        out: list[PoolHealth] = []
        for pop in (result.get("pop_health") or {}).values():
            for entry in pop.get("origins") or []:
                for address, seen in entry.items():
                    out.append(
                        PoolHealth(
                            origin=str(seen.get("name") or address),
                            healthy=bool(seen.get("healthy")),
                            reason=str(seen.get("failure_reason") or ""),
                        )
                    )
        return out

    def remove(self, hostname: str) -> int:
        """Delete the service's load balancer, pools and monitor (absent ones are fine)."""
        removed = 0
        for lb in self._list(self._zone):
            if lb.get("name") == hostname:
                self._call("DELETE", f"{self._zone}/{lb['id']}")
                removed += 1
        prefix = pool_prefix(hostname)
        for pool in self._list(f"{self._account}/pools"):
            if str(pool.get("name", "")).startswith(prefix):
                self._call("DELETE", f"{self._account}/pools/{pool['id']}")
                removed += 1
        for monitor in self._list(f"{self._account}/monitors"):
            if monitor.get("description") == hostname:
                self._call("DELETE", f"{self._account}/monitors/{monitor['id']}")
                removed += 1
        return removed
