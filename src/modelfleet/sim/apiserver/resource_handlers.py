"""The resource endpoints of a simulated cluster: HTTP verbs, content types, query parameters and
DeleteOptions mapped onto the store's write modules (:mod:`.writes`, :mod:`.server_side_apply`,
:mod:`.deletion`, :mod:`.scale`), with the status codes and bodies the real server returns.

Development/test emulator only: product code never imports ``modelfleet.sim``. Reads request
bodies and builds aiohttp responses; all state is the cluster's store in memory.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import yaml
from aiohttp import web
from multidict import MultiMapping

from modelfleet.sim.apiserver import deletion, server_side_apply, status_errors, writes
from modelfleet.sim.apiserver.discovery import no_resource
from modelfleet.sim.apiserver.object_table import PatchType
from modelfleet.sim.apiserver.patch_formats import json_patch, merge_patch
from modelfleet.sim.apiserver.registry import ResourceType
from modelfleet.sim.apiserver.request_info import RequestInfo, manager_from_user_agent, truthy
from modelfleet.sim.apiserver.responses import json_response
from modelfleet.sim.apiserver.scale import get_scale, set_scale
from modelfleet.sim.apiserver.store import ClusterStore
from modelfleet.sim.apiserver.watch_stream import serve_watch

if TYPE_CHECKING:
    from modelfleet.sim.apiserver.server import ServerSettings, SimCluster

__all__ = ["serve_resource"]

_PATCH_TYPES: dict[str, PatchType] = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/strategic-merge-patch+json": "strategic",
}


async def serve_resource(
    request: web.Request, cluster: SimCluster, info: RequestInfo, settings: ServerSettings
) -> web.StreamResponse:
    """A request for objects: list, watch, create, get, update, patch, apply, delete, scale."""
    store = cluster.store
    rt = store.registry.by_path(info.group, info.version, info.plural)
    if rt is None:
        raise no_resource()
    if info.namespace is not None and not rt.namespaced:
        raise no_resource()
    if info.name is not None and rt.namespaced and info.namespace is None:
        raise no_resource()
    if info.subresource and info.subresource not in ("status", "scale"):
        raise no_resource()
    if info.subresource == "status" and not rt.status_subresource:
        raise no_resource()
    if info.subresource == "scale" and not rt.scale_subresource:
        raise no_resource()
    query = request.query
    method = request.method
    if info.name is None:
        if method == "GET":
            if info.verb == "watch":
                return await serve_watch(request, cluster, rt, info, settings)
            return _list(store, rt, info, query)
        if method == "POST":
            if rt.namespaced and info.namespace is None:
                raise status_errors.method_not_allowed(method, request.path)
            body = await _read_body(request, allow_yaml=True)
            obj = writes.create(
                store,
                rt,
                _expect_object(body),
                namespace=info.namespace,
                field_manager=_field_manager(request),
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
        return await _scale(request, store, rt, ns, name)
    if method in ("GET", "HEAD"):
        if info.verb == "watch":
            return await serve_watch(request, cluster, rt, info, settings)
        return json_response(store.get_object(rt, ns, name))
    if method == "PUT":
        body = _expect_object(await _read_body(request, allow_yaml=True))
        obj = writes.update(
            store,
            rt,
            body,
            namespace=ns,
            name=name,
            field_manager=_field_manager(request),
            subresource=info.subresource,
            dry_run=_dry_run(query),
        )
        return json_response(obj)
    if method == "PATCH":
        return await _patch(request, store, rt, info)
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


def _field_manager(request: web.Request) -> str:
    manager = request.query.get("fieldManager")
    if manager:
        return manager
    return manager_from_user_agent(request.headers.get("User-Agent", ""))


def _list(
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
    request: web.Request, store: ClusterStore, rt: ResourceType, info: RequestInfo
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
            force=truthy(query.get("force")),
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
        field_manager=_field_manager(request),
        subresource=info.subresource,
        dry_run=_dry_run(query),
    )
    return json_response(obj)


async def _scale(
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
            field_manager=_field_manager(request),
        )
        return json_response(scale)
    raise status_errors.method_not_allowed(method, request.path)


# watch -------------------------------------------------------------------------------


def _dry_run(query: MultiMapping[str]) -> bool:
    return "All" in query.getall("dryRun", [])


def _propagation(query: Mapping[str, str], options: Mapping[str, Any]) -> str | None:
    """The propagation policy from the query or DeleteOptions (orphanDependents is legacy)."""
    policy = query.get("propagationPolicy") or options.get("propagationPolicy")
    if policy:
        return str(policy)
    orphan = query.get("orphanDependents", options.get("orphanDependents"))
    if orphan is True or truthy(str(orphan) if orphan is not None else None):
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
