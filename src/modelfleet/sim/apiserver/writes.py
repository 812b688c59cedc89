"""Create, update (PUT) and patch of the simulated API server, and the commit every write ends in:
server metadata (uid, generation, resourceVersion, managedFields), no-op detection, events.

Development/test emulator only: product code never imports ``modelfleet.sim``. Works on a
:class:`~.store.ClusterStore` in memory, synchronously (no awaits, so a write is atomic on the
loop); no I/O.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from modelfleet.sim.apiserver import admission, crd_objects, crds, deletion, status_errors
from modelfleet.sim.apiserver.admission import SERVER_ASSIGNED_METADATA
from modelfleet.sim.apiserver.field_management import (
    ManagerEntry,
    ManagerKey,
    Path,
    record_update,
    render_managed_fields,
)
from modelfleet.sim.apiserver.object_table import StoredObject, now_rfc3339
from modelfleet.sim.apiserver.patch_formats import json_patch, merge_patch, strategic_merge_patch
from modelfleet.sim.apiserver.registry import ResourceType

if TYPE_CHECKING:
    from modelfleet.sim.apiserver.object_table import Key, PatchType
    from modelfleet.sim.apiserver.store import ClusterStore

__all__ = [
    "check_identity",
    "check_resource_version",
    "commit",
    "compose",
    "create",
    "patch",
    "prepare_new",
    "store_new",
    "update",
]

_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def prepare_new(
    store: ClusterStore, rt: ResourceType, obj: dict[str, Any], namespace: str | None
) -> str:
    """Admit a new object's body (see :func:`.admission.prepare_new`) into an existing,
    non-terminating namespace; returns its name."""
    name = admission.prepare_new(rt, obj)
    check_namespace(store, rt, namespace, name)
    return name


def check_identity(
    rt: ResourceType, meta: Mapping[str, Any], *, namespace: str | None, name: str
) -> None:
    """The body names the object the URL names (or leaves name/namespace out)."""
    if meta.get("name") not in (None, name):
        raise status_errors.bad_request(
            f"the name of the object ({meta.get('name')}) does not match the name on the URL "
            f"({name})"
        )
    if rt.namespaced and meta.get("namespace") not in (None, "", namespace):
        raise status_errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )


def check_resource_version(
    rt: ResourceType, name: str, wanted: Any, current: Mapping[str, Any]
) -> None:
    """Optimistic concurrency: a set resourceVersion must be the stored one (409 otherwise)."""
    if wanted not in (None, "") and str(wanted) != current["metadata"]["resourceVersion"]:
        raise status_errors.conflict(
            rt,
            name,
            "the object has been modified; please apply your changes to the latest version "
            "and try again",
        )


def _spec_part(obj: Mapping[str, Any], rt: ResourceType) -> dict[str, Any]:
    """What generation tracks: everything but metadata (and status with a status subresource)."""
    skip = {"metadata", "apiVersion", "kind"}
    if rt.status_subresource:
        skip.add("status")
    return {k: v for k, v in obj.items() if k not in skip}


def _comparable(obj: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    for k in ("resourceVersion", "managedFields", "generation"):
        meta.pop(k, None)
    out["metadata"] = meta
    return out


def _ownership(managers: Mapping[ManagerKey, ManagerEntry]) -> dict[ManagerKey, frozenset[Path]]:
    return {k: frozenset(v.paths) for k, v in managers.items()}


def create(
    store: ClusterStore,
    rt: ResourceType,
    body: Mapping[str, Any],
    *,
    namespace: str | None,
    field_manager: str | None,
    dry_run: bool = False,
) -> dict[str, Any]:
    obj = copy.deepcopy(dict(body))
    obj = admission.check_type(rt, obj)
    meta = obj.setdefault("metadata", {})
    if rt.namespaced:
        body_ns = meta.get("namespace")
        if namespace and body_ns and body_ns != namespace:
            raise status_errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        meta["namespace"] = namespace or body_ns or "default"
    else:
        meta.pop("namespace", None)
    ns = meta.get("namespace")
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = generate_name(store, rt, ns, str(meta["generateName"]))
    name = prepare_new(store, rt, obj, ns)
    key = store.key(rt, ns, name)
    if key in store.bucket(rt):
        raise status_errors.already_exists(rt, name)
    now = now_rfc3339()
    stamp_identity(meta, now)
    managers: dict[ManagerKey, ManagerEntry] = {}
    record_update(
        managers,
        {},
        obj,
        manager=field_manager or store.default_field_manager,
        subresource="",
        scope="all" if rt.create_keeps_status else store.scope(rt, ""),
        now=now,
        api_version=rt.api_version,
    )
    meta["managedFields"] = render_managed_fields(managers)
    if dry_run:
        return obj
    return store_new(store, rt, key, obj, managers)


def generate_name(store: ClusterStore, rt: ResourceType, namespace: str | None, prefix: str) -> str:
    for _ in range(100):
        suffix = "".join(store.rng.choice(_GENERATE_ALPHABET) for _ in range(5))
        candidate = f"{prefix}{suffix}"
        if store.key(rt, namespace, candidate) not in store.bucket(rt):
            return candidate
    raise status_errors.ApiError(
        409, "AlreadyExists", f"could not generate a unique name from {prefix!r}"
    )


def store_new(
    store: ClusterStore,
    rt: ResourceType,
    key: Key,
    obj: dict[str, Any],
    managers: dict[ManagerKey, ManagerEntry],
) -> dict[str, Any]:
    obj["metadata"]["resourceVersion"] = str(store.next_rv())
    if crd_objects.is_crd(rt):
        obj["status"] = crds.status(obj, None, now_rfc3339())
    store.put(rt, key, StoredObject(obj, managers), None)
    store.emit("ADDED", rt, obj, None)
    if rt.kind == "CustomResourceDefinition":
        crds.register(store, obj)
    return obj


def stamp_identity(meta: dict[str, Any], now: str) -> None:
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = now
    meta["generation"] = 1


def merge_server_metadata(current: Mapping[str, Any], new: dict[str, Any]) -> None:
    cur_meta = current["metadata"]
    meta = new.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise status_errors.bad_request("metadata must be an object")
    for k in (*SERVER_ASSIGNED_METADATA, "name", "namespace"):
        if k in cur_meta:
            meta[k] = cur_meta[k]
        else:
            meta.pop(k, None)
    meta["resourceVersion"] = cur_meta["resourceVersion"]
    meta.pop("managedFields", None)


def update(
    store: ClusterStore,
    rt: ResourceType,
    body: Mapping[str, Any],
    *,
    namespace: str | None,
    name: str,
    field_manager: str | None,
    subresource: str = "",
    dry_run: bool = False,
) -> dict[str, Any]:
    check_subresource(rt, subresource)
    stored = store.lookup(rt, namespace, name)
    obj = copy.deepcopy(dict(body))
    obj = admission.check_type(rt, obj)
    meta = obj.get("metadata") or {}
    check_identity(rt, meta, namespace=namespace, name=name)
    check_resource_version(rt, name, meta.get("resourceVersion"), stored.obj)
    return _commit_body(store, rt, stored, obj, subresource, field_manager, dry_run=dry_run)


def compose(
    rt: ResourceType,
    current: Mapping[str, Any],
    incoming: dict[str, Any],
    subresource: str,
) -> dict[str, Any]:
    """The object a write would store: status and server metadata come from the right side."""
    if subresource == "status":
        new = copy.deepcopy(dict(current))
        if "status" in incoming:
            new["status"] = incoming["status"]
        else:
            new.pop("status", None)
        crd_objects.prepare(rt, new)
        return new
    new = incoming
    merge_server_metadata(current, new)
    if rt.status_subresource:
        if "status" in current:
            new["status"] = copy.deepcopy(current["status"])
        else:
            new.pop("status", None)
    admission.apply_defaults(rt, new)
    crd_objects.prepare(rt, new)
    return new


def check_subresource(rt: ResourceType, subresource: str) -> None:
    if subresource == "status" and not rt.status_subresource:
        raise status_errors.not_found(rt, f"{rt.plural}/status", what="")
    if subresource not in ("", "status"):
        raise status_errors.not_found(rt, subresource)


def commit(
    store: ClusterStore,
    rt: ResourceType,
    stored: StoredObject,
    new: dict[str, Any],
    *,
    manager: str,
    subresource: str,
    dry_run: bool,
    managers: dict[ManagerKey, ManagerEntry] | None = None,
) -> dict[str, Any]:
    """Write ``new`` over ``stored`` (no-op when nothing changed); return what is stored."""
    old = stored.obj
    if subresource != "status":
        admission.validate(rt, new)
    crd_objects.check(rt, new, old)
    now = now_rfc3339()
    if crd_objects.is_crd(rt) and not new["metadata"].get("deletionTimestamp"):
        new["status"] = crds.status(new, old.get("status"), now)
    if managers is None:
        managers = {
            k: ManagerEntry(set(v.paths), v.time, v.api_version) for k, v in stored.managers.items()
        }
        record_update(
            managers,
            old,
            new,
            manager=manager,
            subresource=subresource,
            scope=store.scope(rt, subresource),
            now=now,
            api_version=rt.api_version,
        )
    if _comparable(new) == _comparable(old) and _ownership(managers) == _ownership(stored.managers):
        return old
    meta = new["metadata"]
    generation = int(old["metadata"].get("generation", 1))
    if _spec_part(new, rt) != _spec_part(old, rt):
        generation += 1
    meta["generation"] = generation
    meta["managedFields"] = render_managed_fields(managers)
    if dry_run:
        return new
    finishing = bool(meta.get("deletionTimestamp")) and not meta.get("finalizers")
    if finishing and rt.kind == "Namespace" and rt.group == "":
        finishing = deletion.namespace_empty(store, str(meta["name"]))
    meta["resourceVersion"] = str(store.next_rv())
    key = store.key(rt, meta.get("namespace"), str(meta["name"]))
    if finishing:
        meta.pop("finalizers", None)
        store.put(rt, key, StoredObject(new, managers), old)
        deletion.remove(store, rt, key, new, bump=False)
        return new
    store.put(rt, key, StoredObject(new, managers), old)
    store.emit("MODIFIED", rt, new, old)
    if crd_objects.is_crd(rt):
        crds.register(store, new)
    return new


def patch(
    store: ClusterStore,
    rt: ResourceType,
    patch: Any,
    *,
    namespace: str | None,
    name: str,
    patch_type: PatchType,
    field_manager: str | None,
    subresource: str = "",
    dry_run: bool = False,
) -> dict[str, Any]:
    check_subresource(rt, subresource)
    stored = store.lookup(rt, namespace, name)
    current = stored.obj
    if patch_type == "merge":
        if not isinstance(patch, dict):
            raise status_errors.bad_request("a merge patch must be a JSON object")
        patched = merge_patch(current, patch)
    elif patch_type == "json":
        patched = json_patch(current, patch)
    elif patch_type == "strategic":
        if not rt.strategic_merge_allowed:
            raise status_errors.unsupported_media_type("application/strategic-merge-patch+json")
        if not isinstance(patch, dict):
            raise status_errors.bad_request("a strategic merge patch must be a JSON object")
        patched = strategic_merge_patch(current, patch)
    else:  # pragma: no cover - guarded by the type
        raise status_errors.bad_request(f"unknown patch type {patch_type!r}")
    if not isinstance(patched, dict):
        raise status_errors.bad_request("the patch did not produce an object")
    patched_meta = patched.get("metadata") or {}
    check_resource_version(rt, name, patched_meta.get("resourceVersion"), current)
    if patched_meta.get("name") != name:
        raise status_errors.bad_request("the name of the object cannot be changed by a patch")
    patched = admission.check_type(rt, patched)
    return _commit_body(store, rt, stored, patched, subresource, field_manager, dry_run=dry_run)


def _commit_body(
    store: ClusterStore,
    rt: ResourceType,
    stored: StoredObject,
    body: dict[str, Any],
    subresource: str,
    field_manager: str | None,
    *,
    dry_run: bool,
) -> dict[str, Any]:
    """Commit a client's full body (PUT, or a patch's result) over ``stored``."""
    new = compose(rt, stored.obj, body, subresource)
    return commit(
        store,
        rt,
        stored,
        new,
        manager=field_manager or store.default_field_manager,
        subresource=subresource,
        dry_run=dry_run,
    )


def check_namespace(
    store: ClusterStore, rt: ResourceType, namespace: str | None, name: str
) -> None:
    if not rt.namespaced:
        return
    ns_rt = store.resource_type("v1", "Namespace")
    ns = store.peek(ns_rt, None, namespace or "")
    if ns is None:
        raise status_errors.namespace_not_found(namespace or "")
    if ns.obj["metadata"].get("deletionTimestamp"):
        raise status_errors.forbidden(
            rt,
            name,
            f'{rt.plural} "{name}" is forbidden: unable to create new content in namespace '
            f"{namespace} because it is being terminated",
        )
