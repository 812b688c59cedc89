"""The OpenAPI v3 schemas of CustomResourceDefinitions, as the real apiextensions-apiserver
treats them: a CRD whose schema is not *structural* is refused, and a custom object is pruned
(unknown fields dropped), defaulted and validated against its version's schema before it is
stored, with the field errors the real server reports.

* :func:`structural_causes`: what makes a schema non-structural (the rules of "Specifying a
  structural schema" in the Kubernetes documentation, plus the v1 restrictions: no ``$ref``,
  no ``uniqueItems: true``, no ``additionalProperties: false``, not both ``properties`` and
  ``additionalProperties``),
  each a 422 cause with the real server's field path and wording;
* :func:`prune`, :func:`apply_defaults`: in place, in the real server's order (prune, then
  default; a ``null`` in a non-nullable field is dropped first, so a default replaces it);
* :func:`validate`: the OpenAPI value validations (type, nullable, enum, bounds, lengths,
  pattern, items, properties, ``x-kubernetes-int-or-string``, list types ``set``/``map``),
  with kube-openapi's messages
  (``spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal
  to 0``).

CEL rules (``x-kubernetes-validations``) are :mod:`.crd_cel`'s.

Development/test emulator only: product code never imports ``modelfleet.sim``, and this module
imports nothing of the product. Pure: JSON-like values in, causes out; no I/O.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

__all__ = [
    "apply_defaults",
    "field_path",
    "go_value",
    "prune",
    "structural_causes",
    "validate",
]

Schema = Mapping[str, Any]
Cause = dict[str, str]

_JUNCTORS = ("allOf", "anyOf", "oneOf", "not")
# What a value validation inside a junctor may not set (structural rule 3).
_NOT_IN_JUNCTORS = ("description", "type", "default", "additionalProperties", "nullable")
# Keys apiextensions/v1 refuses in a schema at all (a schema is inlined: nothing to refer to).
_FORBIDDEN_KEYS = {"$ref": "$ref is not supported"}
_TYPES = ("object", "array", "string", "integer", "number", "boolean")


def field_path(parent: str, key: str | int) -> str:
    """A child of a Kubernetes field path: ``spec.x``, ``spec.items[0]``, ``labels[a/b]``."""
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def _map_key(parent: str, key: str) -> str:
    return f"{parent}[{key}]"


def go_value(value: Any) -> str:
    """A value as Go's field errors print it (``%#v``-like: strings quoted)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    return json.dumps(_type_name(value))


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _cause(field: str, message: str, reason: str = "FieldValueInvalid") -> Cause:
    return {"reason": reason, "message": message, "field": field}


# --- structural ------------------------------------------------------------------------------


def structural_causes(schema: Any, path: str) -> list[Cause]:
    """Why ``schema`` (a CRD version's ``openAPIV3Schema``, at ``path``) is not a structural
    schema the v1 API accepts; empty when it is one."""
    if not isinstance(schema, Mapping):
        return [_cause(path, "Required value: schemas are required", "FieldValueRequired")]
    causes: list[Cause] = []
    _check_node(schema, path, "root", causes)
    props = schema.get("properties")
    if isinstance(props, Mapping) and isinstance(props.get("metadata"), Mapping):
        meta = props["metadata"]
        mpath = f"{path}.properties[metadata]"
        if meta.get("type") not in (None, "object"):
            causes.append(
                _cause(f"{mpath}.type", f"Invalid value: {go_value(meta['type'])}: must be object")
            )
        for key in meta.get("properties") or {}:
            if key not in ("name", "generateName"):
                causes.append(
                    _cause(
                        f"{mpath}.properties[{key}]",
                        "Forbidden: must not be specified",
                        "FieldValueForbidden",
                    )
                )
    return causes


def _check_node(node: Schema, path: str, level: str, causes: list[Cause]) -> None:
    for key, why in _FORBIDDEN_KEYS.items():
        if key in node:
            causes.append(_cause(f"{path}.{key}", f"Forbidden: {why}", "FieldValueForbidden"))
    if node.get("uniqueItems") is True:
        causes.append(
            _cause(
                f"{path}.uniqueItems",
                "Forbidden: uniqueItems cannot be set to true since the runtime complexity "
                "becomes quadratic",
                "FieldValueForbidden",
            )
        )
    kind = node.get("type", "")
    if kind and kind not in _TYPES:
        causes.append(
            _cause(
                f"{path}.type",
                f"Unsupported value: {go_value(kind)}: supported values: "
                + ", ".join(f'"{t}"' for t in _TYPES),
                "FieldValueNotSupported",
            )
        )
    preserve = node.get("x-kubernetes-preserve-unknown-fields")
    int_or_string = node.get("x-kubernetes-int-or-string") is True
    if preserve is False:
        causes.append(
            _cause(
                f"{path}.x-kubernetes-preserve-unknown-fields",
                "Invalid value: false: must be true or undefined",
            )
        )
    if int_or_string and kind:
        causes.append(
            _cause(
                f"{path}.type",
                f"Invalid value: {go_value(kind)}: must be empty if x-kubernetes-int-or-string "
                "is true",
            )
        )
    if not kind and not int_or_string and preserve is not True:
        where = {
            "root": "at the root",
            "items": "for specified array items",
            "field": "for specified object fields",
        }[level]
        causes.append(
            _cause(
                f"{path}.type", f"Required value: must not be empty {where}", "FieldValueRequired"
            )
        )
    extra = node.get("additionalProperties")
    props = node.get("properties")
    if extra is False:
        causes.append(
            _cause(
                f"{path}.additionalProperties",
                "Forbidden: additionalProperties cannot be set to false",
                "FieldValueForbidden",
            )
        )
    elif extra is not None and props is not None:
        causes.append(
            _cause(
                f"{path}.additionalProperties",
                "Forbidden: additionalProperties and properties are mutual exclusive",
                "FieldValueForbidden",
            )
        )
    if kind == "array" and not isinstance(node.get("items"), Mapping):
        causes.append(
            _cause(f"{path}.items", "Required value: must be specified", "FieldValueRequired")
        )
    for name, child in (props or {}).items():
        if isinstance(child, Mapping):
            _check_node(child, f"{path}.properties[{name}]", "field", causes)
    if isinstance(node.get("items"), Mapping):
        _check_node(node["items"], f"{path}.items", "items", causes)
    if isinstance(extra, Mapping):
        _check_node(extra, f"{path}.additionalProperties", "field", causes)
    for junctor in _JUNCTORS:
        branches = node.get(junctor)
        if branches is None:
            continue
        for i, branch in enumerate([branches] if junctor == "not" else branches):
            where = f"{path}.{junctor}" if junctor == "not" else f"{path}.{junctor}[{i}]"
            if isinstance(branch, Mapping):
                _check_junctor(branch, node, where, causes)


def _check_junctor(branch: Schema, outer: Schema, path: str, causes: list[Cause]) -> None:
    """Structural rules 2 and 3 inside ``allOf``/``anyOf``/``oneOf``/``not``."""
    int_or_string = outer.get("x-kubernetes-int-or-string") is True
    for key in _NOT_IN_JUNCTORS:
        if key not in branch:
            continue
        if key == "type" and int_or_string and branch.get("type") in ("integer", "string"):
            continue  # the two-branch int-or-string pattern
        causes.append(
            _cause(
                f"{path}.{key}", "Forbidden: must be empty to be structural", "FieldValueForbidden"
            )
        )
    outer_props = outer.get("properties") or {}
    for name, child in (branch.get("properties") or {}).items():
        if name not in outer_props:
            causes.append(
                _cause(
                    f"{path}.properties[{name}]",
                    "Required value: must be specified outside of the junctor",
                    "FieldValueRequired",
                )
            )
        elif isinstance(child, Mapping) and isinstance(outer_props[name], Mapping):
            _check_junctor(child, outer_props[name], f"{path}.properties[{name}]", causes)
    if isinstance(branch.get("items"), Mapping):
        if not isinstance(outer.get("items"), Mapping):
            causes.append(
                _cause(
                    f"{path}.items",
                    "Required value: must be specified outside of the junctor",
                    "FieldValueRequired",
                )
            )
        else:
            _check_junctor(branch["items"], outer["items"], f"{path}.items", causes)


# --- pruning and defaulting -------------------------------------------------------------------


def prune(schema: Schema, value: Any, *, root: bool = False) -> Any:
    """``value`` without the fields ``schema`` does not specify (in place; returns it). At the
    root, apiVersion, kind and metadata are the apiserver's and always kept."""
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        keep_unknown = schema.get("x-kubernetes-preserve-unknown-fields") is True
        for key in list(value):
            if root and key in ("apiVersion", "kind", "metadata"):
                continue
            if isinstance(props, Mapping) and key in props:
                prune(props[key], value[key])
            elif isinstance(extra, Mapping):
                prune(extra, value[key])
            elif not keep_unknown and extra is not True:
                del value[key]
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            prune(schema["items"], item)
    return value


def apply_defaults(schema: Schema, value: Any, *, root: bool = False) -> None:
    """Fill ``default`` of absent fields where their object exists, deepest last, in place.
    A ``null`` in a field that is not nullable is dropped first (then defaulted)."""
    if isinstance(value, dict):
        props = schema.get("properties")
        if isinstance(props, Mapping):
            for key, child in props.items():
                if root and key == "metadata":
                    continue
                if key in value and value[key] is None and not child.get("nullable"):
                    del value[key]
                if key not in value and "default" in child:
                    value[key] = copy.deepcopy(child["default"])
                if key in value:
                    apply_defaults(child, value[key])
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            for item in value.values():
                apply_defaults(extra, item)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            apply_defaults(schema["items"], item)


# --- validation -------------------------------------------------------------------------------


def validate(schema: Schema, value: Any, path: str = "") -> list[Cause]:
    """Every OpenAPI value validation ``value`` fails (metadata excepted: the apiserver's)."""
    return list(_validate(schema, value, path, root=True))


def _type_ok(kind: str, value: Any) -> bool:
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return True


def _validate(schema: Schema, value: Any, path: str, *, root: bool = False) -> Iterator[Cause]:
    shown = path or "<root>"
    if value is None:
        if schema.get("nullable") or schema.get("x-kubernetes-preserve-unknown-fields"):
            return
        kind = schema.get("type") or "object"
        yield _cause(path, f'Invalid value: "null": {shown} in body must be of type {kind}: "null"')
        return
    int_or_string = _type_ok("integer", value) or isinstance(value, str)
    if schema.get("x-kubernetes-int-or-string") and not int_or_string:
        yield _cause(
            path,
            f"Invalid value: {go_value(value)}: {shown} in body must be of type "
            f'integer,string: "{_type_name(value)}"',
        )
        return
    kind = schema.get("type")
    if kind and not _type_ok(kind, value):
        actual = _type_name(value)
        yield _cause(
            path,
            f'Invalid value: "{actual}": {shown} in body must be of type {kind}: "{actual}"',
        )
        return
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        yield _cause(
            path,
            f"Unsupported value: {go_value(value)}: supported values: "
            + ", ".join(go_value(v) for v in enum),
            "FieldValueNotSupported",
        )
    yield from _bounds(schema, value, path, shown)
    if isinstance(value, dict):
        yield from _object(schema, value, path, root=root)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                yield from _validate(items, item, field_path(path, i))
        yield from _list_type(schema, value, path)


def _bounds(schema: Schema, value: Any, path: str, shown: str) -> Iterator[Cause]:
    if isinstance(value, int | float) and not isinstance(value, bool):
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None:
            exclusive = schema.get("exclusiveMinimum") is True
            if value < low or (exclusive and value == low):
                word = "greater than" if exclusive else "greater than or equal to"
                yield _cause(
                    path,
                    f"Invalid value: {go_value(value)}: {shown} in body should be {word} "
                    f"{go_value(low)}",
                )
        if high is not None:
            exclusive = schema.get("exclusiveMaximum") is True
            if value > high or (exclusive and value == high):
                word = "less than" if exclusive else "less than or equal to"
                yield _cause(
                    path,
                    f"Invalid value: {go_value(value)}: {shown} in body should be {word} "
                    f"{go_value(high)}",
                )
    if isinstance(value, str):
        length = len(value)
        if "maxLength" in schema and length > schema["maxLength"]:
            yield _cause(
                path,
                f"Too long: may not be more than {schema['maxLength']} bytes",
                "FieldValueTooLong",
            )
        if "minLength" in schema and length < schema["minLength"]:
            yield _cause(
                path,
                f"Invalid value: {go_value(value)}: {shown} in body should be at least "
                f"{schema['minLength']} chars long",
            )
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and re.search(pattern, value) is None:
            yield _cause(
                path, f"Invalid value: {go_value(value)}: {shown} in body should match '{pattern}'"
            )
        if schema.get("format") == "date-time" and not _is_datetime(value):
            yield _cause(
                path,
                f"Invalid value: {go_value(value)}: {shown} in body must be of type date-time: "
                f"{go_value(value)}",
            )
    if isinstance(value, list):
        yield from _count_bounds(schema, len(value), path, shown, "Items", "items")
    if isinstance(value, dict):
        yield from _count_bounds(schema, len(value), path, shown, "Properties", "properties")


def _count_bounds(
    schema: Schema, count: int, path: str, shown: str, suffix: str, noun: str
) -> Iterator[Cause]:
    """``max<suffix>`` / ``min<suffix>`` on an array's items or an object's properties (upstream
    says "items" in the too-many message of both)."""
    most, least = schema.get(f"max{suffix}"), schema.get(f"min{suffix}")
    if most is not None and count > most:
        yield _cause(
            path, f"Too many: {count}: must have at most {most} items", "FieldValueTooMany"
        )
    if least is not None and count < least:
        yield _cause(
            path, f"Invalid value: {count}: {shown} in body should have at least {least} {noun}"
        )


def _list_type(schema: Schema, value: list[Any], path: str) -> Iterator[Cause]:
    """``x-kubernetes-list-type`` ``set`` and ``map``: no two items (or map keys) alike."""
    kind = schema.get("x-kubernetes-list-type")
    keys = schema.get("x-kubernetes-list-map-keys") or []
    seen: set[str] = set()
    for i, item in enumerate(value):
        if kind == "set":
            identity = json.dumps(item, sort_keys=True)
            shown = go_value(item)
        elif kind == "map" and isinstance(item, Mapping):
            picked = {k: item.get(k) for k in keys}
            identity = json.dumps(picked, sort_keys=True)
            shown = (
                "map[string]interface {}{"
                + ", ".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in picked.items())
                + "}"
            )
        else:
            return
        if identity in seen:
            yield _cause(field_path(path, i), f"Duplicate value: {shown}", "FieldValueDuplicate")
        seen.add(identity)


def _object(schema: Schema, value: dict[str, Any], path: str, *, root: bool) -> Iterator[Cause]:
    for name in schema.get("required") or []:
        if name not in value:
            yield _cause(field_path(path, name), "Required value", "FieldValueRequired")
    props = schema.get("properties")
    extra = schema.get("additionalProperties")
    for key, item in value.items():
        if root and key == "metadata":
            continue
        if isinstance(props, Mapping) and key in props:
            yield from _validate(props[key], item, field_path(path, key))
        elif isinstance(extra, Mapping):
            yield from _validate(extra, item, _map_key(path, key))


def _is_datetime(text: str) -> bool:
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True
