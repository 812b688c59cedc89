"""Field management of the simulated Kubernetes API server: which manager owns which field,
how an update moves ownership, and ``metadata.managedFields`` (FieldsV1) in and out.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure functions over
JSON-like values, no I/O and no asyncio; the store's writes call them. Server-side apply's merge
(:mod:`.server_side_apply`) builds on these paths.

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

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from modelfleet.sim.apiserver.patch_formats import list_map_key
from modelfleet.sim.apiserver.registry import LIST_MAP_KEYS, SET_LISTS

__all__ = [
    "IDENTITY_METADATA",
    "MISSING",
    "SERVER_METADATA",
    "ManagerEntry",
    "ManagerKey",
    "Path",
    "Scope",
    "copy_managers",
    "fields_v1_to_paths",
    "find_item",
    "format_path",
    "is_list_map",
    "is_node_marker",
    "key_json",
    "paths_to_fields_v1",
    "record_update",
    "render_managed_fields",
    "tracked_paths",
    "value_at",
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
IDENTITY_METADATA = frozenset({"name", "namespace"})


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


def key_json(key: tuple[tuple[str, Any], ...]) -> str:
    return json.dumps(dict(sorted(key)), separators=(",", ":"), sort_keys=True)


def _value_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def is_list_map(field_name: str, value: list[Any]) -> bool:
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
        if value and is_list_map(field_name, value):
            for item in value:
                key = list_map_key(field_name, item)
                assert key is not None
                item_path = (*prefix, ("k", key_json(key)))
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
                if mk not in SERVER_METADATA and mk not in IDENTITY_METADATA
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


def find_item(lst: list[Any], field_name: str, kj: str) -> int | None:
    for i, item in enumerate(lst):
        key = list_map_key(field_name, item)
        if key is not None and key_json(key) == kj:
            return i
    return None


MISSING = object()


def value_at(obj: Any, path: Path) -> Any:
    """The value at ``path`` or the sentinel ``MISSING``."""
    cur = obj
    field_name = ""
    for kind, ident in path:
        if kind == "f":
            if not isinstance(cur, dict) or ident not in cur:
                return MISSING
            cur = cur[ident]
            field_name = ident
        elif kind == "k":
            if not isinstance(cur, list):
                return MISSING
            idx = find_item(cur, field_name, ident)
            if idx is None:
                return MISSING
            cur = cur[idx]
        else:  # "v"
            if not isinstance(cur, list):
                return MISSING
            want = json.loads(ident)
            if want not in cur:
                return MISSING
            cur = want
    return cur


def is_node_marker(path: Path) -> bool:
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
        if p not in old_paths or (not is_node_marker(p) and value_at(old, p) != value_at(new, p)):
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


def copy_managers(
    managers: Mapping[ManagerKey, ManagerEntry],
) -> dict[ManagerKey, ManagerEntry]:
    """A copy a write can change without touching the stored ownership."""
    return {k: ManagerEntry(set(v.paths), v.time, v.api_version) for k, v in managers.items()}


def iter_paths(managers: Mapping[ManagerKey, ManagerEntry]) -> Iterator[tuple[ManagerKey, Path]]:
    for key, entry in managers.items():
        for p in entry.paths:
            yield key, p
