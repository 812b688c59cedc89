"""Every name the renderer gives an object on the workload cluster, in one place so that their
uniqueness can be reasoned about (and tested) together. Pure string functions.

Two families never collide:
- workload and claim names come from ``child_name`` and so always end in ``-<5 hex digits>``;
- routing names end in ``-pool`` or ``-epp``, which are not hex.
That matters beyond tidiness: the LWS controller creates a headless Service named after each
LeaderWorkerSet only if no Service of that name exists, so a workload that shared a name with the
endpoint picker's Service would silently lose its gang DNS.
"""

from __future__ import annotations

from modelfleet.api.deployments import Role
from modelfleet.api.naming import MAX_NAME, child_name, short_hash


def _suffixed(base: str, suffix: str) -> str:
    """``<base>-<suffix>``, or a hashed shortening of ``base`` that keeps the suffix last."""
    name = f"{base}-{suffix}"
    if len(name) <= MAX_NAME:
        return name
    digest = short_hash(base)
    room = MAX_NAME - len(suffix) - len(digest) - 2
    return f"{base[:room].rstrip('-')}-{digest}-{suffix}"


def workload_name(replica: str, engine: str) -> str:
    """The Deployment or LeaderWorkerSet of one engine; never equal to a routing name."""
    return child_name(replica, engine)


def claim_template_name(replica: str, engine: str, role: Role) -> str:
    return child_name(replica, engine, role.value.lower(), "devices")


def pool_name(replica: str) -> str:
    return _suffixed(replica, "pool")


def endpoint_picker_name(replica: str) -> str:
    """Shared by the EPP's ServiceAccount, Role, RoleBinding, ConfigMap, Deployment and Service."""
    return _suffixed(replica, "epp")


def route_name(replica: str) -> str:
    return replica
