"""The simulated global load balancer's API objects, as Cloudflare's Load Balancing API has them:
monitors, pools and load balancers with their fields and defaults (a PUT replaces, a PATCH
merges), the checks the API applies before it stores one, and its error (HTTP status, Cloudflare
error code, message) in the ``{"success": false, "errors": [...]}`` envelope.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

MONITOR_FIELDS = {
    "type": "http",
    "method": "GET",
    "path": "/",
    "port": 0,
    "timeout": 5,
    "retries": 2,
    "interval": 60,
    "expected_codes": "200",
    "consecutive_up": 0,
    "consecutive_down": 0,
    "description": "",
    "header": {},
    "follow_redirects": False,
    "allow_insecure": False,
}
POOL_FIELDS = {
    "name": None,
    "origins": None,
    "monitor": None,
    "minimum_origins": 1,
    "enabled": True,
    "description": "",
    "origin_steering": {"policy": "random"},
}
LB_FIELDS = {
    "name": None,
    "default_pools": None,
    "fallback_pool": None,
    "proxied": False,
    "enabled": True,
    "steering_policy": "off",
    "description": "",
    "ttl": 30,
}
STEERING = {"off", "random"}


class ApiError(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def expected(codes: str, status: int) -> bool:
    codes = codes.strip().lower()
    if len(codes) == 3 and codes.endswith("xx"):
        return str(status)[0] == codes[0]
    return any(c.strip() == str(status) for c in codes.split(","))


def fill(
    defaults: dict[str, Any], body: dict[str, Any], old: dict[str, Any] | None
) -> dict[str, Any]:
    item: dict[str, Any] = {}
    for name, default in defaults.items():
        if name in body:
            item[name] = body[name]
        elif old is not None and name in old:
            item[name] = old[name]
        elif default is None:
            raise ApiError(400, 1002, f"{name} is required")
        else:
            item[name] = default
    return item


def check_monitor(item: dict[str, Any]) -> None:
    if item["type"] not in ("http", "https"):
        raise ApiError(400, 1002, "monitor type must be http or https")
    for name, low, high in (("interval", 1, 3600), ("timeout", 1, 10), ("retries", 0, 5)):
        value = item[name]
        if not isinstance(value, int) or not low <= value <= high:
            raise ApiError(400, 1002, f"{name} must be an integer from {low} to {high}")
    if not str(item["path"]).startswith("/"):
        raise ApiError(400, 1002, "path must start with /")


def check_pool(item: dict[str, Any], monitors: dict[str, Any]) -> None:
    origins = item["origins"]
    if not isinstance(origins, list) or not origins:
        raise ApiError(400, 1002, "a pool needs at least one origin")
    for origin in origins:
        if not isinstance(origin, dict) or not origin.get("name") or not origin.get("address"):
            raise ApiError(400, 1002, "every origin needs a name and an address")
        origin.setdefault("enabled", True)
        origin.setdefault("weight", 1)
    if item["monitor"] is not None and item["monitor"] not in monitors:
        raise ApiError(400, 1002, f"monitor {item['monitor']} does not exist")


def check_lb(
    item: dict[str, Any], pools: dict[str, Any], lbs: dict[str, Any], zone_name: str
) -> None:
    pools = item["default_pools"]
    if not isinstance(pools, list) or not pools:
        raise ApiError(400, 1002, "default_pools needs at least one pool")
    for pool in [*pools, item["fallback_pool"]]:
        if pool not in pools:
            raise ApiError(400, 1002, f"pool {pool} does not exist")
    if item["steering_policy"] not in STEERING:
        raise ApiError(400, 1002, f"steering_policy must be one of {sorted(STEERING)}")
    name = str(item["name"]).lower().rstrip(".")
    if name != zone_name and not name.endswith("." + zone_name):
        raise ApiError(400, 1002, f"name {name} is not in zone {zone_name}")
    item["name"] = name
    if any(lb["name"] == name and lb is not item for lb in lbs.values()):
        raise ApiError(409, 1002, f"a load balancer named {name} already exists")


def check_unused(item_id: str, pools: dict[str, Any], lbs: dict[str, Any]) -> None:
    if any(p["monitor"] == item_id for p in pools.values()):
        raise ApiError(400, 1002, "the monitor is in use by a pool")
    if any(item_id in lb["default_pools"] or lb["fallback_pool"] == item_id for lb in lbs.values()):
        raise ApiError(400, 1002, "the pool is in use by a load balancer")


__all__ = [
    "LB_FIELDS",
    "MONITOR_FIELDS",
    "POOL_FIELDS",
    "STEERING",
    "ApiError",
    "check_lb",
    "check_monitor",
    "check_pool",
    "check_unused",
    "expected",
    "fill",
    "now",
]
