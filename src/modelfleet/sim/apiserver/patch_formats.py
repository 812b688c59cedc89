"""Patch engines for the simulated Kubernetes API server.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure functions over
JSON-like values, no I/O. Inputs are never mutated; every function returns a new document.

* :func:`merge_patch` is RFC 7386 (``application/merge-patch+json``).
* :func:`json_patch` is RFC 6902 (``application/json-patch+json``), applied by the ``jsonpatch``
  library.
* :func:`strategic_merge_patch` is a simplification of ``application/strategic-merge-patch+json``:
  a merge patch in which lists named in :data:`.registry.LIST_MAP_KEYS` are merged
  item by item on their keys (``containers``/``env`` by name, ``ports`` by containerPort and
  protocol ...), ``$patch: delete`` on such an item removes it, ``$patch: replace`` on a map
  replaces it, and every other list is replaced.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import jsonpointer

from modelfleet.sim.apiserver.registry import LIST_MAP_KEY_DEFAULTS, LIST_MAP_KEYS
from modelfleet.sim.apiserver.status_errors import ApiError, bad_request

__all__ = ["json_patch", "list_map_key", "merge_patch", "strategic_merge_patch"]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out: dict[str, Any] = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


# RFC 6902 ---------------------------------------------------------------------------------


def _unprocessable(message: str) -> ApiError:
    return ApiError(422, "Invalid", f"the server rejected our request due to an error: {message}")


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch (the ``jsonpatch`` library); ApiError 400 for a malformed patch, 422
    when an operation cannot apply (missing path, failed test), as the real server answers."""
    if not isinstance(operations, list):
        raise bad_request("a JSON patch must be a list of operations")
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request(f"invalid JSON patch operation {op!r}")
    try:
        return jsonpatch.JsonPatch(operations).apply(target, in_place=False)
    except jsonpatch.InvalidJsonPatch as exc:
        raise bad_request(f"invalid JSON patch: {exc}") from None
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
        raise _unprocessable(str(exc)) from None


# Strategic merge (simplified) -------------------------------------------------------------


def list_map_key(field_name: str, item: Any) -> tuple[tuple[str, Any], ...] | None:
    """The identity of ``item`` inside the list-map ``field_name``, or None if not a list-map."""
    candidates = LIST_MAP_KEYS.get(field_name)
    if not candidates or not isinstance(item, dict):
        return None
    for keys in candidates:
        if all(k in item or k in LIST_MAP_KEY_DEFAULTS for k in keys) and keys[0] in item:
            return tuple((k, item.get(k, LIST_MAP_KEY_DEFAULTS.get(k))) for k in keys)
    return None


def _merge_list(field_name: str, current: Any, patch: list[Any]) -> list[Any]:
    if field_name not in LIST_MAP_KEYS or not isinstance(current, list):
        return [_strip_directives(v) for v in patch]
    if not all(list_map_key(field_name, p) is not None for p in patch):
        return [_strip_directives(v) for v in patch]
    out = copy.deepcopy(current)
    for item in patch:
        key = list_map_key(field_name, item)
        idx = next((i for i, c in enumerate(out) if list_map_key(field_name, c) == key), None)
        directive = item.get("$patch") if isinstance(item, dict) else None
        if directive == "delete":
            if idx is not None:
                out.pop(idx)
            continue
        if idx is None:
            out.append(_strip_directives(item))
        else:
            out[idx] = strategic_merge_patch(out[idx], item)
    return out


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return copy.deepcopy(value)


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Simplified strategic merge patch (see module docstring)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return _strip_directives(patch)
    if patch.get("$patch") == "delete":
        return None
    out: dict[str, Any] = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            out.pop(key, None)
        elif isinstance(value, list):
            out[key] = _merge_list(key, out.get(key), value)
        elif isinstance(value, dict):
            merged = strategic_merge_patch(out.get(key), value)
            if merged is None:
                out.pop(key, None)
            else:
                out[key] = merged
        else:
            out[key] = value
    return out
