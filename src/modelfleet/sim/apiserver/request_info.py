"""What a request to a simulated cluster is about: the cluster, verb, group/version/resource,
namespace, name and subresource, parsed from its path, method, query and content type (as the
real server's request-info resolver does). The fault middleware and the handlers both use it.

The cluster is the one named by a ``/clusters/<name>`` prefix, else the one whose own port the
request arrived on (:data:`CLUSTER_PORTS` on the app, kept by the server).

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure, apart from
caching the result on the aiohttp request; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aiohttp import web

__all__ = [
    "CLUSTER_PORTS",
    "RequestInfo",
    "cluster_prefix",
    "manager_from_user_agent",
    "parse_request",
    "request_info",
    "truthy",
]

# Local port -> the cluster served at that port's root (the server's live map, not a copy).
CLUSTER_PORTS: web.AppKey[dict[int, str]] = web.AppKey("sim_cluster_ports", dict)


@dataclass(frozen=True)
class RequestInfo:
    cluster: str
    verb: str
    # "version", "api", "apis", "group", "groupversion", "root", "health", "openapi" (the
    # document's path after /openapi/ in ``name``)
    discovery: str = ""
    group: str = ""
    version: str = ""
    plural: str = ""
    namespace: str | None = None
    name: str | None = None
    subresource: str = ""
    unknown: bool = False

    @property
    def resource(self) -> str:
        base = f"{self.plural}.{self.group}" if self.group else self.plural
        return f"{base}/{self.subresource}" if self.subresource else base


def parse_request(
    cluster: str, tail: str, method: str, query: Mapping[str, str], ctype: str
) -> RequestInfo:
    """Classify a request under ``/clusters/<cluster>/`` (pure; no store access)."""
    segs = [s for s in tail.split("/") if s]
    if not segs:
        return RequestInfo(cluster, "discovery", discovery="root")
    head = segs[0]
    if head == "version" and len(segs) == 1:
        return RequestInfo(cluster, "discovery", discovery="version")
    if head == "openapi":
        return RequestInfo(cluster, "discovery", discovery="openapi", name="/".join(segs[1:]))
    if head in ("healthz", "livez", "readyz"):
        return RequestInfo(cluster, "discovery", discovery="health")
    if head == "api":
        if len(segs) == 1:
            return RequestInfo(cluster, "discovery", discovery="api")
        group, version, rest = "", segs[1], segs[2:]
    elif head == "apis":
        if len(segs) == 1:
            return RequestInfo(cluster, "discovery", discovery="apis")
        if len(segs) == 2:
            return RequestInfo(cluster, "discovery", discovery="group", group=segs[1])
        group, version, rest = segs[1], segs[2], segs[3:]
    else:
        return RequestInfo(cluster, "discovery", unknown=True)
    if not rest:
        return RequestInfo(
            cluster, "discovery", discovery="groupversion", group=group, version=version
        )
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
        namespace, rest = rest[1], rest[2:]
    if len(rest) > 3:
        return RequestInfo(cluster, "get", group=group, version=version, unknown=True)
    plural = rest[0]
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else ""
    verb = _verb(method, name, query, ctype)
    return RequestInfo(cluster, verb, "", group, version, plural, namespace, name, sub)


def truthy(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true", "yes")


def _verb(method: str, name: str | None, query: Mapping[str, str], ctype: str) -> str:
    if method == "GET":
        if name is None:
            return "watch" if truthy(query.get("watch")) else "list"
        return "watch" if truthy(query.get("watch")) else "get"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "apply" if ctype.startswith("application/apply-patch") else "patch"
    if method == "DELETE":
        return "deletecollection" if name is None else "delete"
    return method.lower()


def manager_from_user_agent(user_agent: str) -> str:
    """The default field manager, as the real server derives it (the agent up to its first /)."""
    return (user_agent.split("/", 1)[0] or "unknown")[:128] if user_agent else "unknown"


_INFO_KEY: web.RequestKey[RequestInfo] = web.RequestKey("sim_request_info", RequestInfo)


def _port_cluster(request: web.Request) -> str | None:
    """The cluster whose own port ``request`` arrived on, if any."""
    ports = request.app.get(CLUSTER_PORTS)
    if not ports or request.transport is None:
        return None
    sockname = request.transport.get_extra_info("sockname")
    if not sockname:
        return None
    return ports.get(int(sockname[1]))


def cluster_prefix(request: web.Request) -> str:
    """The path prefix of the cluster root ``request`` came through: ``/clusters/<name>`` on the
    main port, empty on the cluster's own port."""
    cluster = request.match_info.get("cluster")
    if cluster is not None and request.path.startswith("/clusters/"):
        return f"/clusters/{cluster}"
    return ""


def request_info(request: web.Request) -> RequestInfo | None:
    """What a cluster request is about (cached on the request); None for a request that is not
    for a cluster (admin routes, or the main port's root)."""
    cached = request.get(_INFO_KEY)
    if isinstance(cached, RequestInfo):
        return cached
    cluster = request.match_info.get("cluster")
    if cluster is None or not request.path.startswith("/clusters/"):
        if "tail" not in request.match_info:
            return None  # an admin route
        cluster = _port_cluster(request)
        if cluster is None:
            return None
    info = parse_request(
        cluster,
        request.match_info.get("tail", ""),
        request.method,
        request.query,
        request.content_type,
    )
    request[_INFO_KEY] = info
    return info
