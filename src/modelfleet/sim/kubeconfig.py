"""Kubeconfig files pointing at simulated clusters.

Development/test emulator only: product code never imports ``modelfleet.sim``. The only I/O is
writing the kubeconfig file the caller names.

The files use plain HTTP and an empty user (``user: {}``): the emulator does no authentication,
and the official client, lightkube and kubernetes_asyncio all accept that.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

__all__ = ["render_kubeconfig", "write_kubeconfig_file"]


def render_kubeconfig(
    servers: Mapping[str, str],
    *,
    current: str | None = None,
    namespace: str = "default",
) -> dict[str, Any]:
    """A kubeconfig document with one cluster, user and context per entry of ``servers``.

    ``servers`` maps a cluster name to its server URL; the cluster, user and context all take the
    cluster's name. ``current`` (default: the first entry) becomes ``current-context``.
    """
    if not servers:
        raise ValueError("a kubeconfig needs at least one cluster")
    names = list(servers)
    if current is None:
        current = names[0]
    if current not in servers:
        raise ValueError(f"current context {current!r} is not one of {names}")
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": n, "cluster": {"server": servers[n]}} for n in names],
        "users": [{"name": n, "user": {}} for n in names],
        "contexts": [
            {"name": n, "context": {"cluster": n, "user": n, "namespace": namespace}} for n in names
        ],
        "current-context": current,
    }


def write_kubeconfig_file(
    path: str | Path,
    servers: Mapping[str, str],
    *,
    current: str | None = None,
    namespace: str = "default",
) -> Path:
    """Write :func:`render_kubeconfig` to ``path`` (parents created, mode 0600); return it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    doc = render_kubeconfig(servers, current=current, namespace=namespace)
    target.write_text(yaml.safe_dump(doc, sort_keys=False))
    target.chmod(0o600)
    return target
