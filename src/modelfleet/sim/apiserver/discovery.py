"""API discovery of a simulated cluster: ``/version``, ``/api``, ``/apis``, the group and
group-version resource lists (from the cluster's registry, CRDs included), and health checks.

Development/test emulator only: product code never imports ``modelfleet.sim``. Builds aiohttp
responses from in-memory state; no other I/O.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from aiohttp import web

from modelfleet.sim.apiserver import openapi, status_errors
from modelfleet.sim.apiserver.request_info import RequestInfo, cluster_prefix
from modelfleet.sim.apiserver.responses import json_response
from modelfleet.sim.apiserver.status_errors import ApiError

if TYPE_CHECKING:
    from modelfleet.sim.apiserver.server import SimCluster

__all__ = ["no_resource", "serve_discovery"]


def serve_discovery(
    request: web.Request, cluster: SimCluster, info: RequestInfo, kubernetes_version: str
) -> web.StreamResponse:
    """Discovery documents (root, version, /api, /apis, groups, group versions) and health."""
    if request.method not in ("GET", "HEAD"):
        raise status_errors.method_not_allowed(request.method, request.path)
    registry = cluster.store.registry
    kind = info.discovery
    if info.unknown:
        raise no_resource()
    if kind == "openapi":
        return _openapi(request, cluster, info.name or "", kubernetes_version)
    if kind == "health":
        return web.Response(text="ok", content_type="text/plain")
    if kind == "root":
        paths = ["/api", "/api/v1", "/apis", "/version", "/healthz"]
        for group, versions in registry.groups().items():
            if group:
                paths.append(f"/apis/{group}")
                paths += [f"/apis/{group}/{v}" for v in versions]
        return json_response({"paths": sorted(paths)})
    if kind == "version":
        return json_response(_version(kubernetes_version))
    if kind == "api":
        host = request.host
        return json_response(
            {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
            }
        )
    if kind == "apis":
        groups = [_api_group(g, versions) for g, versions in registry.groups().items() if g]
        return json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    if kind == "group":
        group_versions = registry.groups().get(info.group)
        if not info.group or not group_versions:
            raise no_resource()
        group_doc = _api_group(info.group, group_versions)
        group_doc.update({"kind": "APIGroup", "apiVersion": "v1"})
        return json_response(group_doc)
    # groupversion
    types = registry.in_group_version(info.group, info.version)
    if not types:
        raise no_resource()
    resources: list[dict[str, object]] = []
    for rt in types:
        resources += rt.discovery_entries()
    return json_response(
        {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": types[0].group_version,
            "resources": resources,
        }
    )


def _openapi(
    request: web.Request, cluster: SimCluster, path: str, kube_version: str
) -> web.StreamResponse:
    registry = cluster.store.registry
    if "protobuf" in request.headers.get("Accept", "") and "json" not in request.headers.get(
        "Accept", ""
    ):
        raise ApiError(406, "NotAcceptable", "only application/json is served")
    if path == "v2":
        return json_response(openapi.v2_document(registry, kube_version))
    if path == "v3":
        # The relative URLs clients follow (with the server's root) must match the root the
        # client used: the cluster's own port, or /clusters/<name> on the main port.
        prefix = cluster_prefix(request)
        return json_response(openapi.v3_root(registry, prefix, kube_version))
    segs = path.split("/")
    doc = None
    if len(segs) == 3 and segs[:2] == ["v3", "api"]:
        doc = openapi.v3_document(registry, "", segs[2], kube_version)
    elif len(segs) == 4 and segs[:2] == ["v3", "apis"]:
        doc = openapi.v3_document(registry, segs[2], segs[3], kube_version)
    if doc is None:
        raise no_resource()
    return json_response(doc)


def _version(v: str) -> dict[str, str]:
    m = re.match(r"^v(\d+)\.(\d+)", v)
    major, minor = (m.group(1), m.group(2)) if m else ("1", "34")
    return {
        "major": major,
        "minor": minor,
        "gitVersion": v,
        "gitCommit": "modelfleet-sim",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


# resources ---------------------------------------------------------------------------


def _api_group(group: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def no_resource() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource")
