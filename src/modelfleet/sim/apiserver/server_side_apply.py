"""Server-side apply in the simulated API server: merging an apply configuration into the live
object under field ownership (conflicts, force, removal of fields an applier dropped), and the
store write that creates or updates the object with it.

Development/test emulator only: product code never imports ``modelfleet.sim``. :func:`apply_config`
is pure; :func:`apply_to_store` works on a :class:`~.store.ClusterStore` in memory, without
awaiting. Field paths and ownership come from :mod:`.field_management`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from modelfleet.sim.apiserver import admission, status_errors, writes
from modelfleet.sim.apiserver.field_management import (
    IDENTITY_METADATA,
    MISSING,
    SERVER_METADATA,
    ManagerEntry,
    ManagerKey,
    Path,
    PathElement,
    Scope,
    copy_managers,
    find_item,
    format_path,
    is_list_map,
    is_node_marker,
    key_json,
    render_managed_fields,
    tracked_paths,
    value_at,
)
from modelfleet.sim.apiserver.object_table import now_rfc3339
from modelfleet.sim.apiserver.patch_formats import list_map_key
from modelfleet.sim.apiserver.registry import SET_LISTS, ResourceType

if TYPE_CHECKING:
    from modelfleet.sim.apiserver.store import ClusterStore

__all__ = ["ApplyResult", "apply_config", "apply_to_store"]


# The apply merge -----------------------------------------------------------------------------


def _owned_below(paths: Iterable[Path], root: Path) -> bool:
    n = len(root)
    return any(p[:n] == root for p in paths)


def _merge_applied(live: Any, applied: Any, field_name: str) -> Any:
    if isinstance(applied, dict):
        out: dict[str, Any] = copy.deepcopy(live) if isinstance(live, dict) else {}
        for k, v in applied.items():
            if v is None:
                continue
            out[k] = _merge_applied(out.get(k), v, str(k))
        return out
    if isinstance(applied, list):
        if isinstance(live, list) and applied and is_list_map(field_name, applied):
            if not is_list_map(field_name, live):
                return copy.deepcopy(applied)
            merged = copy.deepcopy(live)
            for item in applied:
                key = list_map_key(field_name, item)
                assert key is not None
                idx = find_item(merged, field_name, key_json(key))
                if idx is None:
                    merged.append(_merge_applied(None, item, ""))
                else:
                    merged[idx] = _merge_applied(merged[idx], item, "")
            return merged
        if isinstance(live, list) and field_name in SET_LISTS:
            merged = copy.deepcopy(live)
            for item in applied:
                if item not in merged:
                    merged.append(copy.deepcopy(item))
            return merged
        return copy.deepcopy(applied)
    return copy.deepcopy(applied)


def _remove_path(obj: dict[str, Any], path: Path) -> None:
    """Remove ``path`` from ``obj`` in place, pruning emptied containers below the top level."""
    parents: list[tuple[Any, PathElement]] = []
    cur: Any = obj
    field_name = ""
    for elem in path[:-1]:
        parents.append((cur, elem))
        nxt = value_at_step(cur, elem, field_name)
        if nxt is MISSING:
            return
        if elem[0] == "f":
            field_name = elem[1]
        cur = nxt
    kind, ident = path[-1]
    if kind == "f":
        if not isinstance(cur, dict) or ident not in cur:
            return
        del cur[ident]
    elif kind == "k":
        if not isinstance(cur, list):
            return
        idx = find_item(cur, field_name, ident)
        if idx is None:
            return
        cur.pop(idx)
    else:
        want = json.loads(ident)
        if not isinstance(cur, list) or want not in cur:
            return
        cur.remove(want)
    # Prune containers emptied by the removal, but never a top-level field or list item.
    container = cur
    while parents and len(parents) > 1 and container in ({}, []):
        parent, elem = parents.pop()
        if elem[0] != "f":
            break
        if isinstance(parent, dict):
            parent.pop(elem[1], None)
        container = parent


def value_at_step(cur: Any, elem: PathElement, field_name: str) -> Any:
    kind, ident = elem
    if kind == "f":
        if isinstance(cur, dict) and ident in cur:
            return cur[ident]
        return MISSING
    if kind == "k":
        if isinstance(cur, list):
            idx = find_item(cur, field_name, ident)
            if idx is not None:
                return cur[idx]
        return MISSING
    return MISSING


@dataclass
class ApplyResult:
    obj: dict[str, Any]
    conflicts: list[tuple[str, Path]]


def _strip_config(config: Mapping[str, Any], scope: Scope) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in config.items():
        if k == "status" and scope == "main":
            continue
        if k not in ("status", "apiVersion", "kind", "metadata") and scope == "status":
            continue
        if k == "metadata" and isinstance(v, dict):
            meta = {mk: mv for mk, mv in v.items() if mk not in SERVER_METADATA}
            if scope == "status":
                meta = {mk: mv for mk, mv in meta.items() if mk in IDENTITY_METADATA}
            out[k] = meta
            continue
        out[k] = v
    return out


def apply_config(
    managers: dict[ManagerKey, ManagerEntry],
    live: Mapping[str, Any] | None,
    config: Mapping[str, Any],
    *,
    manager: str,
    subresource: str,
    scope: Scope,
    force: bool,
    now: str,
    api_version: str,
) -> ApplyResult:
    """Server-side apply ``config`` by ``manager`` onto ``live`` (None when absent).

    ``managers`` is updated in place only when there are no unforced conflicts. The returned
    object is a fresh document; on conflicts it is the unchanged live object.
    """
    config = _strip_config(config, scope)
    live_obj: dict[str, Any] = copy.deepcopy(dict(live)) if live is not None else {}
    me = ManagerKey(manager, "Apply", subresource)
    applied_paths = tracked_paths(config, scope)

    conflicts: list[tuple[str, Path]] = []
    for p in sorted(applied_paths):
        if is_node_marker(p):
            continue
        have = value_at(live_obj, p)
        if have is MISSING or have == value_at(config, p):
            continue
        for key, entry in sorted(managers.items()):
            if key.manager == manager or key.subresource != subresource:
                continue
            if p in entry.paths:
                conflicts.append((key.manager, p))
    if conflicts and not force:
        return ApplyResult(live_obj, conflicts)

    previous = managers.get(me, ManagerEntry()).paths
    if force:
        for owner, p in conflicts:
            for key, entry in managers.items():
                if key.manager == owner:
                    entry.paths.discard(p)
    others = [entry.paths for key, entry in managers.items() if key != me]

    new_obj = live_obj
    for p in sorted(previous - applied_paths, key=len, reverse=True):
        if any(_owned_below(paths, p) for paths in others):
            continue
        _remove_path(new_obj, p)
    new_obj = _merge_applied(new_obj, config, "")

    for key in [k for k, e in managers.items() if not e.paths]:
        del managers[key]
    entry = managers.setdefault(me, ManagerEntry())
    if entry.paths != applied_paths or not entry.time:
        entry.time = now
    entry.paths = set(applied_paths)
    entry.api_version = api_version
    if not entry.paths:
        del managers[me]
    return ApplyResult(new_obj, conflicts)


# The store write ---------------------------------------------------------------------------


def apply_to_store(
    store: ClusterStore,
    rt: ResourceType,
    body: Mapping[str, Any],
    *,
    namespace: str | None,
    name: str,
    field_manager: str | None,
    force: bool,
    subresource: str = "",
    dry_run: bool = False,
) -> tuple[dict[str, Any], bool]:
    """Server-side apply; returns (object, created)."""
    if not field_manager:
        raise status_errors.bad_request(
            "PATCH requests must have a fieldManager when the content type is "
            "application/apply-patch+yaml"
        )
    writes.check_subresource(rt, subresource)
    if not isinstance(body, Mapping):
        raise status_errors.bad_request("an apply configuration must be an object")
    config = copy.deepcopy(dict(body))
    if not config.get("apiVersion"):
        raise status_errors.bad_request("apiVersion must be set in an apply configuration")
    if not config.get("kind"):
        raise status_errors.bad_request("kind must be set in an apply configuration")
    config = admission.check_type(rt, config)
    meta = config.get("metadata") or {}
    writes.check_identity(rt, meta, namespace=namespace, name=name)
    stored = store.peek(rt, namespace, name)
    now = now_rfc3339()
    scope = store.scope(rt, subresource)
    if stored is None:
        if subresource:
            raise status_errors.not_found(rt, name)
        fresh: dict[ManagerKey, ManagerEntry] = {}
        result = apply_config(
            fresh,
            None,
            config,
            manager=field_manager,
            subresource="",
            scope=scope,
            force=force,
            now=now,
            api_version=rt.api_version,
        )
        obj = result.obj
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        obj_meta = obj.setdefault("metadata", {})
        obj_meta["name"] = name
        if rt.namespaced:
            obj_meta["namespace"] = namespace
        return create_applied(store, rt, obj, fresh, namespace, dry_run=dry_run), True
    writes.check_resource_version(rt, name, meta.get("resourceVersion"), stored.obj)
    managers = copy_managers(stored.managers)
    result = apply_config(
        managers,
        stored.obj,
        config,
        manager=field_manager,
        subresource=subresource,
        scope=scope,
        force=force,
        now=now,
        api_version=rt.api_version,
    )
    if result.conflicts and not force:
        raise status_errors.apply_conflict(
            rt, name, [(m, format_path(p)) for m, p in result.conflicts]
        )
    new = writes.compose(rt, stored.obj, result.obj, subresource)
    committed = writes.commit(
        store,
        rt,
        stored,
        new,
        manager=field_manager,
        subresource=subresource,
        dry_run=dry_run,
        managers=managers,
    )
    return committed, False


def create_applied(
    store: ClusterStore,
    rt: ResourceType,
    obj: dict[str, Any],
    managers: dict[ManagerKey, ManagerEntry],
    namespace: str | None,
    *,
    dry_run: bool,
) -> dict[str, Any]:
    meta = obj["metadata"]
    name = writes.prepare_new(store, rt, obj, namespace)
    now = now_rfc3339()
    writes.stamp_identity(meta, now)
    meta["managedFields"] = render_managed_fields(managers)
    if dry_run:
        return obj
    return writes.store_new(store, rt, store.key(rt, namespace, name), obj, managers)
