"""Server-side apply and field ownership for the simulated Kubernetes API server.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure functions over
JSON-like values, no I/O and no asyncio; the store calls them inside its single-threaded writes.

Model (a leaf-path approximation of structured-merge-diff):

* A *path* is a tuple of elements ``("f", field)``, ``("k", key-json)`` (an item of a list-map,
  keyed as in :data:`.registry.LIST_MAP_KEYS`) or ``("v", value-json)`` (an item of a
  set list such as ``metadata.finalizers``). Scalars, atomic lists and empty maps are leaves. A
  list-map item is owned as a node of its own (``"."`` in ``fieldsV1``) plus its leaves.
* Every manager entry ``(manager, operation, subresource)`` owns a set of paths. Apply replaces the
  applying manager's set with the paths of its config; an update (create/PUT/PATCH) gives the
  updating manager every path whose value it changed and takes those paths from everyone else.
* Apply conflicts: a leaf in the config whose live value differs and that another manager owns.
  Without ``force`` that is a 409 naming field and manager; with ``force`` ownership moves.
* A path that an applier drops from its config is removed from the object unless another manager
  still owns it (or anything below it).

Server-maintained metadata (uid, resourceVersion, generation, timestamps, managedFields ...) is
never tracked, as in the real server.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from modelfleet.sim.apiserver.patch_formats import list_map_key
from modelfleet.sim.apiserver.registry import LIST_MAP_KEYS, SET_LISTS

__all__ = [
    "ManagerEntry",
    "ManagerKey",
    "Path",
    "Scope",
    "apply_config",
    "fields_v1_to_paths",
    "format_path",
    "paths_to_fields_v1",
    "record_update",
    "tracked_paths",
]

PathElement = tuple[str, str]
Path = tuple[PathElement, ...]
Scope = Literal["main", "status", "all"]

SERVER_METADATA: frozenset[str] = frozenset(
    {
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
    }
)
_IDENTITY_METADATA = frozenset({"name", "namespace"})


@dataclass(frozen=True, order=True)
class ManagerKey:
    manager: str
    operation: Literal["Apply", "Update"]
    subresource: str = ""


@dataclass
class ManagerEntry:
    paths: set[Path] = field(default_factory=set)
    time: str = ""
    api_version: str = ""


# Walking values ---------------------------------------------------------------------------


def _key_json(key: tuple[tuple[str, Any], ...]) -> str:
    return json.dumps(dict(sorted(key)), separators=(",", ":"), sort_keys=True)


def _value_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _is_list_map(field_name: str, value: list[Any]) -> bool:
    return field_name in LIST_MAP_KEYS and all(
        list_map_key(field_name, item) is not None for item in value
    )


def _walk(value: Any, prefix: Path, field_name: str, out: set[Path]) -> None:
    if isinstance(value, dict):
        if not value:
            out.add(prefix)
            return
        for k, v in value.items():
            if v is None:
                continue
            _walk(v, (*prefix, ("f", str(k))), str(k), out)
    elif isinstance(value, list):
        if value and _is_list_map(field_name, value):
            for item in value:
                key = list_map_key(field_name, item)
                assert key is not None
                item_path = (*prefix, ("k", _key_json(key)))
                out.add(item_path)
                for k, v in item.items():
                    if v is None:
                        continue
                    _walk(v, (*item_path, ("f", str(k))), str(k), out)
        elif value and field_name in SET_LISTS:
            for item in value:
                out.add((*prefix, ("v", _value_json(item))))
        else:
            out.add(prefix)
    else:
        out.add(prefix)


def _scoped(obj: Mapping[str, Any], scope: Scope) -> dict[str, Any]:
    """The part of ``obj`` whose fields are tracked in ``scope``."""
    out: dict[str, Any] = {}
    for k, v in obj.items():
        if k in ("apiVersion", "kind"):
            continue
        if k == "status" and scope == "main":
            continue
        if k != "status" and scope == "status":
            continue
        if k == "metadata" and isinstance(v, dict):
            meta = {
                mk: mv
                for mk, mv in v.items()
                if mk not in SERVER_METADATA and mk not in _IDENTITY_METADATA
            }
            if meta:
                out[k] = meta
            continue
        out[k] = v
    return out


def tracked_paths(obj: Mapping[str, Any], scope: Scope) -> set[Path]:
    """All owned-able paths of ``obj`` within ``scope``."""
    out: set[Path] = set()
    for k, v in _scoped(obj, scope).items():
        if v is None:
            continue
        _walk(v, (("f", k),), k, out)
    return out


def _find_item(lst: list[Any], field_name: str, kj: str) -> int | None:
    for i, item in enumerate(lst):
        key = list_map_key(field_name, item)
        if key is not None and _key_json(key) == kj:
            return i
    return None


_MISSING = object()


def value_at(obj: Any, path: Path) -> Any:
    """The value at ``path`` or the sentinel ``_MISSING``."""
    cur = obj
    field_name = ""
    for kind, ident in path:
        if kind == "f":
            if not isinstance(cur, dict) or ident not in cur:
                return _MISSING
            cur = cur[ident]
            field_name = ident
        elif kind == "k":
            if not isinstance(cur, list):
                return _MISSING
            idx = _find_item(cur, field_name, ident)
            if idx is None:
                return _MISSING
            cur = cur[idx]
        else:  # "v"
            if not isinstance(cur, list):
                return _MISSING
            want = json.loads(ident)
            if want not in cur:
                return _MISSING
            cur = want
    return cur


def _is_node_marker(path: Path) -> bool:
    return bool(path) and path[-1][0] in ("k", "v")


# Rendering ----------------------------------------------------------------------------------


def format_path(path: Path) -> str:
    """Human form used in conflict messages, e.g. ``.spec.containers[name="app"].image``."""
    out: list[str] = []
    for kind, ident in path:
        if kind == "f":
            out.append(f".{ident}")
        elif kind == "k":
            parts = ",".join(f"{k}={json.dumps(v)}" for k, v in json.loads(ident).items())
            out.append(f"[{parts}]")
        else:
            out.append(f"[={ident}]")
    return "".join(out)


def paths_to_fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    """Encode a path set as a ``FieldsV1`` trie (owned inner nodes carry ``"."``)."""
    root: dict[str, Any] = {}
    all_paths = set(paths)
    for path in sorted(all_paths):
        node = root
        for kind, ident in path:
            node = node.setdefault(f"{kind}:{ident}", {})
    for path in all_paths:
        node = root
        for kind, ident in path:
            node = node[f"{kind}:{ident}"]
        if node and "." not in node:
            node["."] = {}
    return root


def fields_v1_to_paths(fields: Mapping[str, Any], prefix: Path = ()) -> set[Path]:
    """Decode a ``FieldsV1`` trie into a path set."""
    out: set[Path] = set()
    for k, child in fields.items():
        if k == ".":
            out.add(prefix)
            continue
        kind, _, ident = k.partition(":")
        path = (*prefix, (kind, ident))
        if isinstance(child, Mapping) and child:
            out |= fields_v1_to_paths(child, path)
        else:
            out.add(path)
    return out


# Update operations ------------------------------------------------------------------------


def _changed_paths(old: Mapping[str, Any], new: Mapping[str, Any], scope: Scope) -> set[Path]:
    old_paths = tracked_paths(old, scope)
    new_paths = tracked_paths(new, scope)
    changed: set[Path] = set()
    for p in new_paths:
        if p not in old_paths or (not _is_node_marker(p) and value_at(old, p) != value_at(new, p)):
            changed.add(p)
    return changed


def record_update(
    managers: dict[ManagerKey, ManagerEntry],
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    *,
    manager: str,
    subresource: str,
    scope: Scope,
    now: str,
    api_version: str,
) -> bool:
    """Update ownership after a create/update/patch by ``manager``; True if anything changed."""
    changed = _changed_paths(old, new, scope)
    gone = tracked_paths(old, scope) - tracked_paths(new, scope)
    touched = False
    me = ManagerKey(manager, "Update", subresource)
    for key, entry in list(managers.items()):
        before = len(entry.paths)
        entry.paths -= gone
        if key != me:
            entry.paths -= changed
        if len(entry.paths) != before:
            touched = True
            entry.time = now if key == me else entry.time
        if not entry.paths and key != me:
            del managers[key]
    if changed:
        entry = managers.setdefault(me, ManagerEntry())
        entry.paths |= changed
        entry.time = now
        entry.api_version = api_version
        touched = True
    if me in managers and not managers[me].paths:
        del managers[me]
    return touched


# Apply --------------------------------------------------------------------------------------


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
        if isinstance(live, list) and applied and _is_list_map(field_name, applied):
            if not _is_list_map(field_name, live):
                return copy.deepcopy(applied)
            merged = copy.deepcopy(live)
            for item in applied:
                key = list_map_key(field_name, item)
                assert key is not None
                idx = _find_item(merged, field_name, _key_json(key))
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
        if nxt is _MISSING:
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
        idx = _find_item(cur, field_name, ident)
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
        return _MISSING
    if kind == "k":
        if isinstance(cur, list):
            idx = _find_item(cur, field_name, ident)
            if idx is not None:
                return cur[idx]
        return _MISSING
    return _MISSING


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
                meta = {mk: mv for mk, mv in meta.items() if mk in _IDENTITY_METADATA}
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
        if _is_node_marker(p):
            continue
        have = value_at(live_obj, p)
        if have is _MISSING or have == value_at(config, p):
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


def render_managed_fields(managers: Mapping[ManagerKey, ManagerEntry]) -> list[dict[str, Any]]:
    """``metadata.managedFields`` for the given ownership map."""
    out: list[dict[str, Any]] = []
    for key, entry in sorted(managers.items(), key=lambda kv: (kv[1].time, kv[0])):
        item: dict[str, Any] = {
            "manager": key.manager,
            "operation": key.operation,
            "apiVersion": entry.api_version,
            "time": entry.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": paths_to_fields_v1(entry.paths),
        }
        if key.subresource:
            item["subresource"] = key.subresource
        out.append(item)
    return out


def iter_paths(managers: Mapping[ManagerKey, ManagerEntry]) -> Iterator[tuple[ManagerKey, Path]]:
    for key, entry in managers.items():
        for p in entry.paths:
            yield key, p
