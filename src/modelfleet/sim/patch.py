"""Patch engines for the simulated Kubernetes API server.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure functions over
JSON-like values, no I/O. Inputs are never mutated; every function returns a new document.

* :func:`merge_patch` is RFC 7386 (``application/merge-patch+json``).
* :func:`json_patch` is RFC 6902 (``application/json-patch+json``): add, remove, replace, move, copy
  and test.
* :func:`strategic_merge_patch` is a simplification of ``application/strategic-merge-patch+json``:
  a merge patch in which lists named in :data:`modelfleet.sim.registry.LIST_MAP_KEYS` are merged
  item by item on their keys (``containers``/``env`` by name, ``ports`` by containerPort and
  protocol ...), ``$patch: delete`` on such an item removes it, ``$patch: replace`` on a map
  replaces it, and every other list is replaced.
"""

from __future__ import annotations

import copy
from typing import Any

from modelfleet.sim.errors import ApiError, bad_request
from modelfleet.sim.registry import LIST_MAP_KEY_DEFAULTS, LIST_MAP_KEYS

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


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"invalid JSON pointer {path!r}")
    return [_unescape(t) for t in path[1:].split("/")]


def _parent(doc: Any, tokens: list[str], path: str) -> Any:
    cur = doc
    for tok in tokens[:-1]:
        cur = _child(cur, tok, path)
    return cur


def _child(cur: Any, tok: str, path: str) -> Any:
    if isinstance(cur, dict):
        if tok not in cur:
            raise _unprocessable(f"path {path!r} does not exist")
        return cur[tok]
    if isinstance(cur, list):
        idx = _index(cur, tok, path, allow_end=False)
        return cur[idx]
    raise _unprocessable(f"path {path!r} traverses a scalar")


def _index(lst: list[Any], tok: str, path: str, *, allow_end: bool) -> int:
    if tok == "-" and allow_end:
        return len(lst)
    if not tok.isdigit() or (len(tok) > 1 and tok.startswith("0")):
        raise _unprocessable(f"invalid array index {tok!r} in {path!r}")
    idx = int(tok)
    limit = len(lst) if allow_end else len(lst) - 1
    if idx > limit:
        raise _unprocessable(f"array index {idx} out of range in {path!r}")
    return idx


def _unprocessable(message: str) -> ApiError:
    return ApiError(422, "Invalid", f"the server rejected our request due to an error: {message}")


def _get(doc: Any, path: str) -> Any:
    cur = doc
    for tok in _pointer(path):
        cur = _child(cur, tok, path)
    return cur


def _add(doc: Any, path: str, value: Any) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, allow_end=True), value)
    else:
        raise _unprocessable(f"cannot add at {path!r}")
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    tokens = _pointer(path)
    if not tokens:
        raise _unprocessable("cannot remove the document root")
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _unprocessable(f"path {path!r} does not exist")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, path, allow_end=False))
    raise _unprocessable(f"cannot remove at {path!r}")


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch; raises ApiError 422 when an operation cannot apply."""
    if not isinstance(operations, list):
        raise bad_request("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request(f"invalid JSON patch operation {op!r}")
        kind, path = op["op"], str(op["path"])
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            doc, _ = _remove(doc, path) if _pointer(path) else (doc, None)
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "move":
            src = str(op.get("from", ""))
            doc, value = _remove(doc, src)
            doc = _add(doc, path, value)
        elif kind == "copy":
            value = copy.deepcopy(_get(doc, str(op.get("from", ""))))
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise _unprocessable(f"test operation failed at {path!r}")
        else:
            raise bad_request(f"unknown JSON patch operation {kind!r}")
    return doc


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
