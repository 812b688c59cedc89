"""A service's one stable address in front of its front doors: what the global load balancer
(Cloudflare Load Balancing) should hold for it — a health monitor on the service's path, one
pool per gateway cluster (its gateway as the pool's one origin, so ``steering: off`` fails
over in cluster order) and a proxied load balancer named ``<service>.<namespace>.<zone>``.

Pure: models in, request bodies out. Objects are found again by name (the monitor by its
description), so a retried or repeated sync converges on the same objects.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from modelfleet.api.meta import Model
from modelfleet.api.services import GlobalAddress
from modelfleet.rendering.front_door import service_path

__all__ = [
    "GlobalOrigin",
    "GlobalPlan",
    "global_hostname",
    "global_plan",
    "pool_name",
    "pool_prefix",
]

MANAGED = "managed by modelfleet"


class GlobalOrigin(Model):
    """One front door as an origin: its cluster, its gateway's authority, and whether the fleet
    counts the cluster Ready (a NotReady cluster's origin is disabled: no traffic, no checks)."""

    cluster: str
    host: str
    port: int = Field(ge=1, le=65535)
    enabled: bool = True


class GlobalPlan(Model):
    hostname: str
    monitor: dict[str, Any]
    # Pool name -> body, in failover order (``cluster`` first).
    pools: dict[str, dict[str, Any]]
    load_balancer: dict[str, Any]


def global_hostname(namespace: str, service: str, zone: str) -> str:
    return f"{service}.{namespace}.{zone}"


def pool_prefix(hostname: str) -> str:
    """What every pool name of the service at ``hostname`` starts with: how its pools are found
    again (Cloudflare pool names take letters, digits, ``-`` and ``_`` only)."""
    return f"{hostname.replace('.', '_')}__"


def pool_name(hostname: str, cluster: str) -> str:
    return pool_prefix(hostname) + cluster.replace(".", "_")


def global_plan(
    namespace: str,
    service: str,
    settings: GlobalAddress,
    origins: list[GlobalOrigin],
    *,
    auth: bool,
) -> GlobalPlan:
    """The monitor, pools and load balancer (without the ids the API assigns: the pools'
    ``monitor`` and the balancer's pool lists name pools and the monitor by name, for the
    adapter to resolve)."""
    hostname = global_hostname(namespace, service, settings.zone)
    check = settings.health_check
    monitor = {
        "type": "http",
        "method": "GET",
        "path": f"{service_path(namespace, service)}v1/models",
        # A protected service answers its model list with 401 to a caller without a key: the
        # gateway is up and routing; its endpoints' own health is the service's probes' job.
        "expected_codes": "401" if auth else "200",
        "interval": check.interval_seconds,
        "timeout": check.timeout_seconds,
        "retries": check.retries,
        "consecutive_down": check.consecutive_down,
        "consecutive_up": check.consecutive_up,
        "follow_redirects": False,
        "allow_insecure": False,
        "description": hostname,
    }
    pools = {
        pool_name(hostname, o.cluster): {
            "name": pool_name(hostname, o.cluster),
            "description": f"{hostname}: front door on {o.cluster} ({MANAGED})",
            "enabled": True,
            "minimum_origins": 1,
            "origins": [
                {
                    "name": o.cluster,
                    "address": o.host,
                    "port": o.port,
                    "enabled": o.enabled,
                    "weight": 1,
                }
            ],
        }
        for o in origins
    }
    names = list(pools)
    balancer = {
        "name": hostname,
        "description": MANAGED,
        "proxied": True,
        "enabled": True,
        "steering_policy": settings.steering,
        "default_pools": names,
        "fallback_pool": names[0] if names else None,
    }
    return GlobalPlan(hostname=hostname, monitor=monitor, pools=pools, load_balancer=balancer)
