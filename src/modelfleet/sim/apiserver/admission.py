"""Admission of an object body by the simulated API server: apiVersion/kind checks, defaulting,
the initial status of new objects, and validation (names, labels, required fields).

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure functions over
JSON-like dicts and :class:`~.registry.ResourceType`; no I/O, no store access. They raise
:class:`~.status_errors.ApiError` with the Status the real server sends (400 BadRequest,
422 Invalid with causes).

A new kind's defaults and required fields are declared on its ResourceType in :mod:`.registry`
(``defaults``, ``required``); this module applies them.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from modelfleet.sim.apiserver import crd_objects, status_errors
from modelfleet.sim.apiserver.api_defaults import default_object
from modelfleet.sim.apiserver.registry import ResourceType

__all__ = [
    "SERVER_ASSIGNED_METADATA",
    "apply_defaults",
    "check_type",
    "get_path",
    "name_required",
    "prepare_new",
    "validate",
]

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

# Metadata only the server sets: a client's values are dropped on create and kept on update.
SERVER_ASSIGNED_METADATA = (
    "uid",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)


def get_path(obj: Any, dotted: str) -> Any:
    """The value at ``a.b.c`` in nested dicts, or None."""
    cur = obj
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def name_required(rt: ResourceType) -> status_errors.ApiError:
    return status_errors.invalid(
        rt,
        "",
        [{"reason": "FieldValueRequired", "message": "Required value", "field": "metadata.name"}],
    )


def check_type(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """Default or check apiVersion/kind; returns the object with them as its first keys."""
    api_version = obj.get("apiVersion")
    kind = obj.get("kind")
    if api_version in (None, ""):
        obj["apiVersion"] = rt.api_version
    elif api_version != rt.api_version:
        raise status_errors.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API "
            f"version ({rt.api_version})"
        )
    if kind in (None, ""):
        obj["kind"] = rt.kind
    elif kind != rt.kind:
        raise status_errors.bad_request(
            f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
        )
    if not isinstance(obj.get("metadata", {}), dict):
        raise status_errors.bad_request("metadata must be an object")
    if list(obj)[:2] == ["apiVersion", "kind"]:
        return obj
    rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], **rest}


def validate(rt: ResourceType, obj: Mapping[str, Any]) -> None:
    causes: list[dict[str, Any]] = []
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    if not name:
        causes.append(
            {
                "reason": "FieldValueRequired",
                "message": "name or generateName is required",
                "field": "metadata.name",
            }
        )
    else:
        pattern = _DNS_LABEL if rt.kind == "Namespace" else _DNS_SUBDOMAIN
        limit = 63 if rt.kind == "Namespace" else 253
        if len(name) > limit or not pattern.match(name):
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "message": f"Invalid value: {name!r}: a lowercase RFC 1123 name must "
                    "consist of lower case alphanumeric characters, '-' or '.'",
                    "field": "metadata.name",
                }
            )
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is not None and (
            not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values())
        ):
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "message": "Invalid value: values must be strings",
                    "field": f"metadata.{key}",
                }
            )
    for req in rt.required:
        missing: tuple[Any, ...] = (None,) if req.allow_empty else (None, "", [], {})
        if all(get_path(obj, p) in missing for p in req.paths()):
            causes.append(
                {"reason": "FieldValueRequired", "message": "Required value", "field": req.path}
            )
    if crd_objects.is_crd(rt):
        causes.extend(crd_objects.crd_causes(obj))
    if causes:
        raise status_errors.invalid(rt, name, causes)


def apply_defaults(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Fill the kind's declared defaults where the parent exists and the field is absent."""
    for path, value in rt.defaults:
        *parents, leaf = path.split(".")
        cur: Any = obj
        for part in parents:
            if not isinstance(cur, dict) or not isinstance(cur.get(part), dict):
                cur = None
                break
            cur = cur[part]
        if isinstance(cur, dict) and leaf not in cur:
            cur[leaf] = copy.deepcopy(value)
    default_object(rt, obj)


def _initial_status(rt: ResourceType) -> dict[str, Any] | None:
    if rt.kind == "Pod" and rt.group == "":
        return {"phase": "Pending"}
    if rt.kind == "Namespace" and rt.group == "":
        return {"phase": "Active"}
    return None


def prepare_new(rt: ResourceType, obj: dict[str, Any]) -> str:
    """Make a client's object a new stored object's body, in place: server-owned metadata
    dropped, initial status, defaults; then validated. Returns its name."""
    meta = obj["metadata"]
    for k in (*SERVER_ASSIGNED_METADATA, "resourceVersion", "managedFields", "selfLink"):
        meta.pop(k, None)
    if rt.status_subresource and not rt.create_keeps_status:
        obj.pop("status", None)
        status = _initial_status(rt)
        if status is not None:
            obj["status"] = status
    if rt.kind == "Namespace":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    apply_defaults(rt, obj)
    crd_objects.prepare(rt, obj)
    validate(rt, obj)
    crd_objects.check(rt, obj, None)
    return str(meta["name"])
