"""Where a cluster's Gateway answers, read from the observed Gateway object: its first status
address, with the HTTP listener's port appended unless it is the scheme default (80).

Pure: reads a JSON-like dict. A real install reports an IP or hostname on port 80; a gateway
listening elsewhere (a NodePort-style install, the simulated fleet's loopback gateways) is still
reached correctly because the port comes from the Gateway's own listener.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["gateway_authority"]

_DEFAULT_HTTP_PORT = 80


def gateway_authority(gateway: Mapping[str, Any]) -> str | None:
    """``host`` or ``host:port`` of the Gateway, or None while it has no address."""
    addresses = (gateway.get("status") or {}).get("addresses") or []
    if not addresses or not addresses[0].get("value"):
        return None
    host = str(addresses[0]["value"])
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 literal
    listeners = (gateway.get("spec") or {}).get("listeners") or []
    http = [li for li in listeners if li.get("protocol") == "HTTP"]
    port = http[0].get("port") if http else None
    if isinstance(port, int) and port != _DEFAULT_HTTP_PORT:
        return f"{host}:{port}"
    return host
