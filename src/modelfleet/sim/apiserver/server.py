"""A Kubernetes API server emulator serving many simulated clusters from one aiohttp process.

Development/test emulator only: product code never imports ``modelfleet.sim``. This module binds
a TCP listener (callers should use 127.0.0.1 and port 0) and otherwise keeps all state in memory;
it reads no files and talks to no other host. ``write_kubeconfig`` writes the one file it is
asked to write.

Layout of the HTTP surface (``/clusters/<name>`` is one cluster's apiserver root)::

    /clusters/<c>/version | /api | /apis | /api/v1 | /apis/<g> | /apis/<g>/<v>    discovery
    /clusters/<c>/api/v1/[namespaces/<ns>/]<plural>[/<name>[/status|/scale]]      core
    /clusters/<c>/apis/<g>/<v>/[namespaces/<ns>/]<plural>[/<name>[/status|/scale]]
    /_admin/clusters                           GET list, POST {"name", "faults"} adds a cluster
    /_admin/clusters/<c>                       GET info, DELETE removes the cluster
    /_admin/clusters/<c>/faults                GET, PUT (replace), PATCH (JSON merge)
    /_admin/clusters/<c>/stats                 GET counters, DELETE resets them

Unmodified clients (the official ``kubernetes`` client, its DynamicClient, lightkube,
kubernetes_asyncio) work against ``server: http://127.0.0.1:PORT/clusters/<c>`` with ``user: {}``.
Semantics live in :mod:`.store`; this module maps HTTP onto it (routing, content
types, query parameters, watch streaming, discovery) and applies :mod:`modelfleet.sim.faults` as
middleware on cluster routes only.

Python entry points: :func:`start_fleet_server` (async, returns :class:`RunningServer`) and
:func:`serve_in_thread` (a context manager running the server on its own loop in a background
thread, for synchronous tests and clients).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from aiohttp import web
from multidict import MultiMapping
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from modelfleet.sim.apiserver import deletion, server_side_apply, status_errors, writes
from modelfleet.sim.apiserver.patch_formats import json_patch, merge_patch
from modelfleet.sim.apiserver.registry import ResourceType
from modelfleet.sim.apiserver.responses import error_response, json_response
from modelfleet.sim.apiserver.scale import get_scale, set_scale
from modelfleet.sim.apiserver.selectors import (
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
)
from modelfleet.sim.apiserver.status_errors import ApiError
from modelfleet.sim.apiserver.store import DEFAULT_NAMESPACES, ClusterStore, PatchType, WatchEvent
from modelfleet.sim.faults import FaultConfig, FaultInjector, FaultStats, FaultTarget
from modelfleet.sim.faults import fault_middleware as _fault_middleware
from modelfleet.sim.kubeconfig import write_kubeconfig_file
from modelfleet.sim.loop_thread import start_on_loop_thread

__all__ = [
    "AddClusterRequest",
    "ClusterInfo",
    "Fleet",
    "RunningServer",
    "ServerSettings",
    "SimCluster",
    "ThreadedFleetServer",
    "serve_in_thread",
    "start_fleet_server",
]

T = TypeVar("T")

_CLUSTER_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


class ServerSettings(BaseModel):
    """Knobs of the emulator (not of any one cluster)."""

    model_config = ConfigDict(extra="forbid")

    history_limit: int = Field(default=10_000, ge=1)
    watch_queue_limit: int = Field(default=100_000, ge=1)
    bookmark_interval_seconds: float = Field(default=30.0, gt=0)
    default_watch_timeout_seconds: float = Field(default=1800.0, gt=0)
    shutdown_timeout_seconds: float = Field(default=1.0, ge=0)
    kubernetes_version: str = "v1.34.0"


class AddClusterRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=_CLUSTER_NAME.pattern, max_length=63)
    faults: FaultConfig | None = None


class ClusterInfo(BaseModel):
    name: str
    server: str
    resource_version: str
    objects: int
    faults: FaultConfig


@dataclass
class SimCluster:
    """One simulated cluster: its store (objects, events) and its fault injector."""

    name: str
    store: ClusterStore
    faults: FaultInjector


@dataclass(frozen=True)
class RequestInfo:
    cluster: str
    verb: str
    discovery: str = ""  # "version", "api", "apis", "group", "groupversion", "root", "health"
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


_INFO_KEY: web.RequestKey[RequestInfo] = web.RequestKey("sim_request_info", RequestInfo)


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


def _truthy(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true", "yes")


def _verb(method: str, name: str | None, query: Mapping[str, str], ctype: str) -> str:
    if method == "GET":
        if name is None:
            return "watch" if _truthy(query.get("watch")) else "list"
        return "watch" if _truthy(query.get("watch")) else "get"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "apply" if ctype.startswith("application/apply-patch") else "patch"
    if method == "DELETE":
        return "deletecollection" if name is None else "delete"
    return method.lower()


def _manager_from_user_agent(user_agent: str) -> str:
    """The default field manager, as the real server derives it (the agent up to its first /)."""
    return (user_agent.split("/", 1)[0] or "unknown")[:128] if user_agent else "unknown"


_PATCH_TYPES: dict[str, PatchType] = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/strategic-merge-patch+json": "strategic",
}


class Fleet:
    """All simulated clusters of one server, plus the aiohttp application serving them."""

    def __init__(self, settings: ServerSettings | None = None) -> None:
        self.settings = settings or ServerSettings()
        self.clusters: dict[str, SimCluster] = {}
        self.base_url = ""

    # ------------------------------------------------------------------ cluster management

    def add_cluster(
        self,
        name: str,
        faults: FaultConfig | Mapping[str, Any] | None = None,
        *,
        namespaces: Iterable[str] = DEFAULT_NAMESPACES,
        history_limit: int | None = None,
    ) -> SimCluster:
        """Create an empty cluster (with the usual namespaces); ValueError if the name is taken.

        ``history_limit`` overrides the server's watch-history length for this cluster.
        """
        if not _CLUSTER_NAME.match(name) or len(name) > 63:
            raise ValueError(f"invalid cluster name {name!r}")
        if name in self.clusters:
            raise ValueError(f"cluster {name!r} already exists")
        cfg = (
            faults
            if isinstance(faults, FaultConfig)
            else FaultConfig.model_validate(dict(faults or {}))
        )
        cluster = SimCluster(
            name=name,
            store=ClusterStore(
                name,
                history_limit=history_limit or self.settings.history_limit,
                subscriber_queue_limit=self.settings.watch_queue_limit,
                namespaces=namespaces,
            ),
            faults=FaultInjector(cfg),
        )
        self.clusters[name] = cluster
        return cluster

    def remove_cluster(self, name: str) -> None:
        cluster = self.clusters.pop(name)
        cluster.store.close_subscriptions()
        cluster.faults.stop()

    def cluster(self, name: str) -> SimCluster:
        try:
            return self.clusters[name]
        except KeyError:
            raise KeyError(f"no simulated cluster named {name!r}") from None

    def cluster_url(self, name: str) -> str:
        return f"{self.base_url}/clusters/{name}"

    def info(self, cluster: SimCluster) -> ClusterInfo:
        return ClusterInfo(
            name=cluster.name,
            server=self.cluster_url(cluster.name),
            resource_version=cluster.store.resource_version,
            objects=cluster.store.object_count,
            faults=cluster.faults.config,
        )

    def shutdown(self) -> None:
        for cluster in self.clusters.values():
            cluster.store.close_subscriptions()
            cluster.faults.stop()

    # ------------------------------------------------------------------ application

    def build_app(self) -> web.Application:
        app = web.Application(
            middlewares=[_fault_middleware(self._resolve_faults)],
            client_max_size=64 * 1024 * 1024,
        )
        app.router.add_route("GET", "/_admin/clusters", self._admin_list)
        app.router.add_route("POST", "/_admin/clusters", self._admin_add)
        app.router.add_route("GET", "/_admin/clusters/{cluster}", self._admin_get)
        app.router.add_route("DELETE", "/_admin/clusters/{cluster}", self._admin_delete)
        app.router.add_route("GET", "/_admin/clusters/{cluster}/faults", self._admin_faults_get)
        app.router.add_route("PUT", "/_admin/clusters/{cluster}/faults", self._admin_faults_put)
        app.router.add_route("PATCH", "/_admin/clusters/{cluster}/faults", self._admin_faults_patch)
        app.router.add_route("GET", "/_admin/clusters/{cluster}/stats", self._admin_stats)
        app.router.add_route("DELETE", "/_admin/clusters/{cluster}/stats", self._admin_stats_reset)
        app.router.add_route("*", "/clusters/{cluster}", self._handle)
        app.router.add_route("*", "/clusters/{cluster}/{tail:.*}", self._handle)
        return app

    def _request_info(self, request: web.Request) -> RequestInfo | None:
        cached = request.get(_INFO_KEY)
        if isinstance(cached, RequestInfo):
            return cached
        cluster = request.match_info.get("cluster")
        if cluster is None or not request.path.startswith("/clusters/"):
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

    def _resolve_faults(self, request: web.Request) -> FaultTarget | None:
        info = self._request_info(request)
        if info is None:
            return None
        cluster = self.clusters.get(info.cluster)
        if cluster is None:
            return None
        return FaultTarget(cluster.faults, info.verb, info.resource)

    # ------------------------------------------------------------------ admin handlers

    def _admin_cluster(self, request: web.Request) -> SimCluster:
        name = request.match_info["cluster"]
        cluster = self.clusters.get(name)
        if cluster is None:
            raise ApiError(404, "NotFound", f'cluster "{name}" not found')
        return cluster

    async def _admin_json(self, request: web.Request) -> Any:
        try:
            return await request.json(loads=json.loads)
        except ValueError as exc:
            raise status_errors.bad_request(f"invalid JSON body: {exc}") from None

    async def _admin_list(self, request: web.Request) -> web.StreamResponse:
        infos = [self.info(c).model_dump(mode="json") for c in self.clusters.values()]
        return json_response({"clusters": infos})

    async def _admin_add(self, request: web.Request) -> web.StreamResponse:
        try:
            body = AddClusterRequest.model_validate(await self._admin_json(request))
            if body.name in self.clusters:
                raise ApiError(409, "AlreadyExists", f'cluster "{body.name}" already exists')
            cluster = self.add_cluster(body.name, body.faults)
        except ValidationError as exc:
            return error_response(status_errors.bad_request(str(exc)))
        except ApiError as err:
            return error_response(err)
        return json_response(self.info(cluster).model_dump(mode="json"), status=201)

    async def _admin_get(self, request: web.Request) -> web.StreamResponse:
        try:
            return json_response(self.info(self._admin_cluster(request)).model_dump(mode="json"))
        except ApiError as err:
            return error_response(err)

    async def _admin_delete(self, request: web.Request) -> web.StreamResponse:
        try:
            cluster = self._admin_cluster(request)
        except ApiError as err:
            return error_response(err)
        self.remove_cluster(cluster.name)
        return json_response(
            status_errors.status_object(200, "", f'cluster "{cluster.name}" removed')
        )

    async def _admin_faults_get(self, request: web.Request) -> web.StreamResponse:
        try:
            cluster = self._admin_cluster(request)
        except ApiError as err:
            return error_response(err)
        return json_response(cluster.faults.config.model_dump(mode="json"))

    async def _admin_faults_put(self, request: web.Request) -> web.StreamResponse:
        return await self._admin_faults_write(request, replace=True)

    async def _admin_faults_patch(self, request: web.Request) -> web.StreamResponse:
        return await self._admin_faults_write(request, replace=False)

    async def _admin_faults_write(
        self, request: web.Request, *, replace: bool
    ) -> web.StreamResponse:
        try:
            cluster = self._admin_cluster(request)
            body = await self._admin_json(request)
            if not isinstance(body, dict):
                raise status_errors.bad_request("the faults body must be a JSON object")
            cfg = cluster.faults.set_config(body) if replace else cluster.faults.update_config(body)
        except ValidationError as exc:
            return error_response(
                ApiError(
                    422,
                    "Invalid",
                    f"invalid fault config: {exc.error_count()} error(s)",
                    details={
                        "causes": [
                            {
                                "reason": "FieldValueInvalid",
                                "message": e["msg"],
                                "field": ".".join(str(x) for x in e["loc"]),
                            }
                            for e in exc.errors()
                        ]
                    },
                )
            )
        except ApiError as err:
            return error_response(err)
        return json_response(cfg.model_dump(mode="json"))

    async def _admin_stats(self, request: web.Request) -> web.StreamResponse:
        try:
            cluster = self._admin_cluster(request)
        except ApiError as err:
            return error_response(err)
        stats = cluster.faults.stats.model_dump(mode="json")
        stats["resource_version"] = cluster.store.resource_version
        stats["writes"] = cluster.store.writes
        return json_response(stats)

    async def _admin_stats_reset(self, request: web.Request) -> web.StreamResponse:
        try:
            cluster = self._admin_cluster(request)
        except ApiError as err:
            return error_response(err)
        cluster.faults.reset_stats()
        return json_response(cluster.faults.stats.model_dump(mode="json"))

    # ------------------------------------------------------------------ cluster API

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        info = self._request_info(request)
        assert info is not None
        cluster = self.clusters.get(info.cluster)
        if cluster is None:
            return error_response(
                ApiError(404, "NotFound", f'simulated cluster "{info.cluster}" not found')
            )
        try:
            if info.discovery or info.unknown:
                return self._discovery(request, cluster, info)
            return await self._resource(request, cluster, info)
        except ApiError as err:
            return error_response(err)

    # discovery ---------------------------------------------------------------------------

    def _discovery(
        self, request: web.Request, cluster: SimCluster, info: RequestInfo
    ) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            raise status_errors.method_not_allowed(request.method, request.path)
        registry = cluster.store.registry
        kind = info.discovery
        if info.unknown:
            raise _no_resource()
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
            return json_response(self._version())
        if kind == "api":
            host = request.host
            return json_response(
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": host}
                    ],
                }
            )
        if kind == "apis":
            groups = [_api_group(g, versions) for g, versions in registry.groups().items() if g]
            return json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        if kind == "group":
            group_versions = registry.groups().get(info.group)
            if not info.group or not group_versions:
                raise _no_resource()
            group_doc = _api_group(info.group, group_versions)
            group_doc.update({"kind": "APIGroup", "apiVersion": "v1"})
            return json_response(group_doc)
        # groupversion
        types = registry.in_group_version(info.group, info.version)
        if not types:
            raise _no_resource()
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

    def _version(self) -> dict[str, str]:
        v = self.settings.kubernetes_version
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

    async def _resource(
        self, request: web.Request, cluster: SimCluster, info: RequestInfo
    ) -> web.StreamResponse:
        store = cluster.store
        rt = store.registry.by_path(info.group, info.version, info.plural)
        if rt is None:
            raise _no_resource()
        if info.namespace is not None and not rt.namespaced:
            raise _no_resource()
        if info.name is not None and rt.namespaced and info.namespace is None:
            raise _no_resource()
        if info.subresource and info.subresource not in ("status", "scale"):
            raise _no_resource()
        if info.subresource == "status" and not rt.status_subresource:
            raise _no_resource()
        if info.subresource == "scale" and not rt.scale_subresource:
            raise _no_resource()
        query = request.query
        method = request.method
        if info.name is None:
            if method == "GET":
                if info.verb == "watch":
                    return await self._watch(request, cluster, rt, info)
                return self._list(store, rt, info, query)
            if method == "POST":
                if rt.namespaced and info.namespace is None:
                    raise status_errors.method_not_allowed(method, request.path)
                body = await _read_body(request, allow_yaml=True)
                obj = writes.create(
                    store,
                    rt,
                    _expect_object(body),
                    namespace=info.namespace,
                    field_manager=self._field_manager(request),
                    dry_run=_dry_run(query),
                )
                return json_response(obj, status=201)
            if method == "DELETE":
                options = await _delete_options(request)
                deleted = deletion.delete_collection(
                    store,
                    rt,
                    namespace=info.namespace,
                    label_selector=query.get("labelSelector"),
                    field_selector=query.get("fieldSelector"),
                    propagation=_propagation(query, options),
                )
                return json_response(
                    {
                        "kind": rt.list_kind,
                        "apiVersion": rt.api_version,
                        "metadata": {"resourceVersion": store.resource_version},
                        "items": deleted,
                    }
                )
            raise status_errors.method_not_allowed(method, request.path)
        name = info.name
        ns = info.namespace
        if info.subresource == "scale":
            return await self._scale(request, store, rt, ns, name)
        if method in ("GET", "HEAD"):
            if info.verb == "watch":
                return await self._watch(request, cluster, rt, info)
            return json_response(store.get_object(rt, ns, name))
        if method == "PUT":
            body = _expect_object(await _read_body(request, allow_yaml=True))
            obj = writes.update(
                store,
                rt,
                body,
                namespace=ns,
                name=name,
                field_manager=self._field_manager(request),
                subresource=info.subresource,
                dry_run=_dry_run(query),
            )
            return json_response(obj)
        if method == "PATCH":
            return await self._patch(request, store, rt, info)
        if method == "DELETE":
            if info.subresource:
                raise status_errors.method_not_allowed(method, request.path)
            options = await _delete_options(request)
            policy = _propagation(query, options)
            obj, gone = deletion.delete(
                store,
                rt,
                namespace=ns,
                name=name,
                propagation=policy,
                preconditions=options.get("preconditions") or {},
                dry_run=_dry_run(query) or "All" in (options.get("dryRun") or []),
            )
            if not gone:
                # Like the real handler: 202 only when the caller explicitly asked for
                # cascading deletion with orphanDependents=false; otherwise 200.
                orphan = query.get("orphanDependents", options.get("orphanDependents"))
                explicit_cascade = orphan is False or str(orphan).lower() == "false"
                return json_response(obj, status=202 if explicit_cascade else 200)
            if rt.return_deleted_object:
                return json_response(obj)
            meta = obj["metadata"]
            details: dict[str, Any] = {"name": name, "kind": rt.plural, "uid": meta.get("uid")}
            if rt.group:
                details["group"] = rt.group
            return json_response(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "details": details,
                }
            )
        raise status_errors.method_not_allowed(method, request.path)

    def _field_manager(self, request: web.Request) -> str:
        manager = request.query.get("fieldManager")
        if manager:
            return manager
        return _manager_from_user_agent(request.headers.get("User-Agent", ""))

    def _list(
        self,
        store: ClusterStore,
        rt: ResourceType,
        info: RequestInfo,
        query: Mapping[str, str],
    ) -> web.StreamResponse:
        limit_raw = query.get("limit")
        try:
            limit = int(limit_raw) if limit_raw else None
        except ValueError:
            raise status_errors.bad_request(f"invalid limit {limit_raw!r}") from None
        result = store.list_objects(
            rt,
            namespace=info.namespace,
            label_selector=query.get("labelSelector"),
            field_selector=query.get("fieldSelector"),
            limit=limit,
            continue_token=query.get("continue") or None,
        )
        meta: dict[str, Any] = {"resourceVersion": result.resource_version}
        if result.continue_token:
            meta["continue"] = result.continue_token
        if result.remaining is not None:
            meta["remainingItemCount"] = result.remaining
        return json_response(
            {
                "kind": rt.list_kind,
                "apiVersion": rt.api_version,
                "metadata": meta,
                "items": result.items,
            }
        )

    async def _patch(
        self, request: web.Request, store: ClusterStore, rt: ResourceType, info: RequestInfo
    ) -> web.StreamResponse:
        assert info.name is not None
        ctype = request.content_type
        query = request.query
        if ctype.startswith("application/apply-patch"):
            if ctype != "application/apply-patch+yaml":
                raise status_errors.unsupported_media_type(ctype)
            manager = query.get("fieldManager")
            if not manager:
                raise status_errors.bad_request(
                    "PATCH requests must have a fieldManager query parameter when the content "
                    "type is application/apply-patch+yaml"
                )
            body = _expect_object(await _read_body(request, allow_yaml=True, force_yaml=True))
            obj, created = server_side_apply.apply_to_store(
                store,
                rt,
                body,
                namespace=info.namespace,
                name=info.name,
                field_manager=manager,
                force=_truthy(query.get("force")),
                subresource=info.subresource,
                dry_run=_dry_run(query),
            )
            return json_response(obj, status=201 if created else 200)
        patch_type = _PATCH_TYPES.get(ctype)
        if patch_type is None:
            raise status_errors.unsupported_media_type(ctype)
        if patch_type == "strategic" and not rt.strategic_merge_allowed:
            raise status_errors.unsupported_media_type(ctype)
        body = await _read_body(request, allow_yaml=False)
        obj = writes.patch(
            store,
            rt,
            body,
            namespace=info.namespace,
            name=info.name,
            patch_type=patch_type,
            field_manager=self._field_manager(request),
            subresource=info.subresource,
            dry_run=_dry_run(query),
        )
        return json_response(obj)

    async def _scale(
        self,
        request: web.Request,
        store: ClusterStore,
        rt: ResourceType,
        ns: str | None,
        name: str,
    ) -> web.StreamResponse:
        method = request.method
        if method == "GET":
            return json_response(get_scale(store, rt, ns, name))
        if method in ("PUT", "PATCH"):
            current = get_scale(store, rt, ns, name)
            if method == "PUT":
                body = _expect_object(await _read_body(request, allow_yaml=True))
            else:
                ctype = request.content_type
                patch = await _read_body(request, allow_yaml=False)
                if ctype == "application/json-patch+json":
                    body = json_patch(current, patch)
                elif ctype in _PATCH_TYPES:
                    body = merge_patch(current, patch)
                else:
                    raise status_errors.unsupported_media_type(ctype)
            replicas = (body.get("spec") or {}).get("replicas")
            if not isinstance(replicas, int) or replicas < 0:
                raise status_errors.invalid(
                    rt,
                    name,
                    [
                        {
                            "reason": "FieldValueInvalid",
                            "message": "must be a non-negative integer",
                            "field": "spec.replicas",
                        }
                    ],
                )
            rv = (body.get("metadata") or {}).get("resourceVersion")
            scale = set_scale(
                store,
                rt,
                ns,
                name,
                replicas,
                resource_version=str(rv) if rv and method == "PUT" else None,
                field_manager=self._field_manager(request),
            )
            return json_response(scale)
        raise status_errors.method_not_allowed(method, request.path)

    # watch -------------------------------------------------------------------------------

    async def _watch(
        self, request: web.Request, cluster: SimCluster, rt: ResourceType, info: RequestInfo
    ) -> web.StreamResponse:
        query = request.query
        store = cluster.store
        lsel = parse_label_selector(query.get("labelSelector"))
        fsel = parse_field_selector(query.get("fieldSelector"), rt.plural)
        if info.name is not None:
            fsel = FieldSelector(
                (
                    *fsel.requirements,
                    *parse_field_selector(f"metadata.name={info.name}", rt.plural).requirements,
                )
            )
        timeout_raw = query.get("timeoutSeconds")
        try:
            timeout = (
                float(timeout_raw) if timeout_raw else self.settings.default_watch_timeout_seconds
            )
        except ValueError:
            raise status_errors.bad_request(f"invalid timeoutSeconds {timeout_raw!r}") from None
        bookmarks = _truthy(query.get("allowWatchBookmarks"))
        send_initial = _truthy(query.get("sendInitialEvents"))
        rv = query.get("resourceVersion")
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        try:
            initial, sub = store.open_watch(
                rt,
                namespace=info.namespace,
                resource_version=None if send_initial else rv,
            )
        except ApiError as err:
            if err.code != 410:
                raise
            await response.prepare(request)
            frame = {"type": "ERROR", "object": err.status}
            await response.write(json.dumps(frame).encode() + b"\n")
            await response.write_eof()
            return response
        try:
            await response.prepare(request)
            chunk = bytearray()
            for ev in initial:
                etype = _translate(ev, lsel, fsel)
                if etype is not None:
                    chunk += ev.encode(etype)
            if send_initial and bookmarks:
                chunk += _bookmark(rt, store.resource_version, initial_end=True)
            if chunk:
                await response.write(bytes(chunk))
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            interval = self.settings.bookmark_interval_seconds
            next_bookmark = loop.time() + interval
            while True:
                now = loop.time()
                if now >= deadline:
                    break
                wait = min(deadline, next_bookmark) - now if bookmarks else deadline - now
                try:
                    event = await asyncio.wait_for(sub.get(), timeout=max(wait, 0.0))
                except TimeoutError:
                    if bookmarks and loop.time() >= next_bookmark:
                        if not await cluster.faults.dark_gate(request):
                            break
                        await response.write(_bookmark(rt, store.resource_version))
                        next_bookmark = loop.time() + interval
                    continue
                if event is None:
                    break
                if not await cluster.faults.dark_gate(request):
                    break
                chunk = bytearray()
                while event is not None:
                    etype = _translate(event, lsel, fsel)
                    if etype is not None:
                        chunk += event.encode(etype)
                    event = sub.get_nowait()
                if chunk:
                    await response.write(bytes(chunk))
            with contextlib.suppress(ConnectionError):
                await response.write_eof()
        finally:
            sub.close()
        return response


def _bookmark(rt: ResourceType, rv: str, *, initial_end: bool = False) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": rv}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    frame = {
        "type": "BOOKMARK",
        "object": {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta},
    }
    return json.dumps(frame, separators=(",", ":")).encode() + b"\n"


def _translate(ev: WatchEvent, lsel: LabelSelector, fsel: FieldSelector) -> str | None:
    """The event type a filtered watcher sees (selector transitions become ADDED/DELETED)."""
    if lsel.empty and fsel.empty:
        return ev.type

    def matches(obj: Mapping[str, Any] | None) -> bool:
        if obj is None:
            return False
        labels = (obj.get("metadata") or {}).get("labels")
        return lsel.matches(labels) and fsel.matches(obj)

    now = matches(ev.object)
    if ev.type == "MODIFIED":
        before = matches(ev.old_object)
        if before and now:
            return "MODIFIED"
        if now:
            return "ADDED"
        if before:
            return "DELETED"
        return None
    return ev.type if now else None


def _api_group(group: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def _no_resource() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource")


def _dry_run(query: MultiMapping[str]) -> bool:
    return "All" in query.getall("dryRun", [])


def _propagation(query: Mapping[str, str], options: Mapping[str, Any]) -> str | None:
    """The propagation policy from the query or DeleteOptions (orphanDependents is legacy)."""
    policy = query.get("propagationPolicy") or options.get("propagationPolicy")
    if policy:
        return str(policy)
    orphan = query.get("orphanDependents", options.get("orphanDependents"))
    if orphan is True or _truthy(str(orphan) if orphan is not None else None):
        return "Orphan"
    if orphan is False or str(orphan).lower() == "false":
        return "Background"
    return None


async def _delete_options(request: web.Request) -> dict[str, Any]:
    if not request.can_read_body:
        return {}
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except ValueError:
        raise status_errors.bad_request("invalid DeleteOptions body") from None
    return body if isinstance(body, dict) else {}


_JSON_TYPES = ("application/json", "")
_YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")


async def _read_body(request: web.Request, *, allow_yaml: bool, force_yaml: bool = False) -> Any:
    ctype = request.content_type if request.headers.get("Content-Type") else ""
    if (
        not force_yaml
        and request.method != "PATCH"
        and ctype not in _JSON_TYPES
        and not (allow_yaml and ctype in _YAML_TYPES)
    ):
        raise status_errors.unsupported_media_type(ctype)
    raw = await request.read()
    if not raw.strip():
        raise status_errors.bad_request("the request body is empty")
    try:
        return json.loads(raw)
    except ValueError:
        if not (allow_yaml and (force_yaml or ctype in _YAML_TYPES)):
            raise status_errors.bad_request("the request body is not valid JSON") from None
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise status_errors.bad_request(f"the request body is not valid YAML: {exc}") from None


def _expect_object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise status_errors.bad_request("the request body must be an object")
    return body


# ---------------------------------------------------------------------- running the server


class RunningServer:
    """A started fleet server on the current event loop."""

    def __init__(self, fleet: Fleet, runner: web.AppRunner, host: str, port: int) -> None:
        self.fleet = fleet
        self._runner = runner
        self.host = host
        self.port = port
        self.base_url = f"http://{host}:{port}"
        fleet.base_url = self.base_url

    def cluster_url(self, name: str) -> str:
        """The apiserver URL of cluster ``name`` (the kubeconfig ``server``)."""
        return self.fleet.cluster_url(name)

    def add_cluster(
        self,
        name: str,
        faults: FaultConfig | Mapping[str, Any] | None = None,
        *,
        namespaces: Iterable[str] = DEFAULT_NAMESPACES,
        history_limit: int | None = None,
    ) -> SimCluster:
        """Add a cluster (see :meth:`Fleet.add_cluster`)."""
        return self.fleet.add_cluster(
            name, faults, namespaces=namespaces, history_limit=history_limit
        )

    def remove_cluster(self, name: str) -> None:
        self.fleet.remove_cluster(name)

    def cluster(self, name: str) -> SimCluster:
        return self.fleet.cluster(name)

    def store(self, name: str) -> ClusterStore:
        return self.fleet.cluster(name).store

    def set_faults(self, name: str, faults: FaultConfig | Mapping[str, Any]) -> FaultConfig:
        return self.fleet.cluster(name).faults.set_config(faults)

    def update_faults(self, name: str, changes: Mapping[str, Any]) -> FaultConfig:
        return self.fleet.cluster(name).faults.update_config(changes)

    def stats(self, name: str) -> FaultStats:
        return self.fleet.cluster(name).faults.stats.model_copy(deep=True)

    def write_kubeconfig(
        self, cluster: str | Iterable[str], path: str | Path, *, namespace: str = "default"
    ) -> Path:
        """Write a kubeconfig for one cluster (or several; the first is current) to ``path``."""
        names = [cluster] if isinstance(cluster, str) else list(cluster)
        for n in names:
            self.fleet.cluster(n)
        return write_kubeconfig_file(
            path, {n: self.cluster_url(n) for n in names}, namespace=namespace
        )

    async def stop(self) -> None:
        """End watches and held requests, then close the listener."""
        self.fleet.shutdown()
        await self._runner.cleanup()


async def start_fleet_server(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    clusters: Iterable[str] = (),
    settings: ServerSettings | None = None,
) -> RunningServer:
    """Start serving on ``host:port`` (0 picks a free port) and return the running server."""
    fleet = Fleet(settings)
    runner = web.AppRunner(
        fleet.build_app(),
        access_log=None,
        handler_cancellation=True,
        shutdown_timeout=fleet.settings.shutdown_timeout_seconds,
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    await site.start()
    server = site._server
    assert isinstance(server, asyncio.Server)
    assert server.sockets
    bound_port = int(server.sockets[0].getsockname()[1])
    running = RunningServer(fleet, runner, host, bound_port)
    for name in clusters:
        running.add_cluster(name)
    return running


class ThreadedFleetServer:
    """A fleet server running on its own event loop in a daemon thread.

    Methods are safe to call from any thread: they run on the server's loop and wait for the
    result. Use :meth:`run` for store coroutines, e.g.
    ``srv.run(srv.store("a").create({...}))``.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, server: RunningServer, thread: threading.Thread
    ) -> None:
        self._loop = loop
        self._server = server
        self._thread = thread
        self.host = server.host
        self.port = server.port
        self.base_url = server.base_url
        self._stopped = False

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    @property
    def server(self) -> RunningServer:
        return self._server

    def call(self, fn: Callable[[], T], timeout: float | None = 30.0) -> T:
        """Run ``fn()`` on the server loop and return its result."""

        async def wrapper() -> T:
            return fn()

        return self.run(wrapper(), timeout=timeout)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = 30.0) -> T:
        """Run a coroutine on the server loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def cluster_url(self, name: str) -> str:
        return self._server.cluster_url(name)

    def add_cluster(
        self,
        name: str,
        faults: FaultConfig | Mapping[str, Any] | None = None,
        *,
        history_limit: int | None = None,
    ) -> str:
        """Add a cluster; returns its server URL."""
        self.call(lambda: self._server.add_cluster(name, faults, history_limit=history_limit))
        return self.cluster_url(name)

    def store(self, name: str) -> ClusterStore:
        """The cluster's store. Only touch it through :meth:`run`/:meth:`call`."""
        return self.call(lambda: self._server.store(name))

    def set_faults(self, name: str, faults: FaultConfig | Mapping[str, Any]) -> FaultConfig:
        return self.call(lambda: self._server.set_faults(name, faults))

    def update_faults(self, name: str, changes: Mapping[str, Any]) -> FaultConfig:
        return self.call(lambda: self._server.update_faults(name, changes))

    def stats(self, name: str) -> FaultStats:
        return self.call(lambda: self._server.stats(name))

    def write_kubeconfig(
        self, cluster: str | Iterable[str], path: str | Path, *, namespace: str = "default"
    ) -> Path:
        return self.call(lambda: self._server.write_kubeconfig(cluster, path, namespace=namespace))

    def stop(self, timeout: float = 10.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        try:
            self.run(self._server.stop(), timeout=timeout)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)


@contextlib.contextmanager
def serve_in_thread(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    clusters: Iterable[str] = (),
    settings: ServerSettings | None = None,
) -> Iterator[ThreadedFleetServer]:
    """Run a fleet server in a background thread for the duration of the ``with`` block."""
    names = list(clusters)
    server, loop, thread = start_on_loop_thread(
        lambda: start_fleet_server(host, port, clusters=names, settings=settings),
        name="modelfleet-sim-apiserver",
        timeout=30.0,
    )
    threaded = ThreadedFleetServer(loop, server, thread)
    try:
        yield threaded
    finally:
        threaded.stop()
