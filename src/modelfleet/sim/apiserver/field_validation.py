"""Server-side field validation (the ``fieldValidation`` query parameter kubectl sends as
``Strict`` by default, since the OpenAPI documents advertise it): fields a request body sets that
the kind's schema does not declare are refused (``Strict``, 400) or reported in a ``Warning``
header (``Warn``); ``Ignore`` and absent leave them alone, as before.

Checked where the schemas are complete: the CRD kinds modelfleet renders (from tests/schemas),
the top level of every kind, ObjectMeta, label selectors, pod templates and DeploymentSpec. The
hand-kept core schemas below those (PodSpec, Container...) describe only what modelfleet renders,
so they are not checked.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modelfleet.sim.apiserver import status_errors
from modelfleet.sim.apiserver.openapi import kind_schema
from modelfleet.sim.apiserver.openapi_schemas import CORE_SCHEMAS, OBJECT_META
from modelfleet.sim.apiserver.registry import ResourceType

__all__ = ["check_fields", "unknown_fields"]

_CLOSED = frozenset(
    {
        OBJECT_META,
        "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
        "io.k8s.api.core.v1.PodTemplateSpec",
        "io.k8s.api.apps.v1.DeploymentSpec",
    }
)


def _walk(schema: Mapping[str, Any], value: Any, path: str, out: list[str]) -> None:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[1]
        if name not in _CLOSED:
            return
        schema = CORE_SCHEMAS[name]
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if key.startswith("$"):
                continue  # strategic-merge directives ($patch, $setElementOrder/...)
            where = f"{path}.{key}" if path else key
            if isinstance(props, Mapping) and key in props:
                _walk(props[key], item, where, out)
            elif isinstance(extra, Mapping):
                _walk(extra, item, where, out)
            elif isinstance(props, Mapping) and extra is not True:
                out.append(where)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            _walk(schema["items"], item, f"{path}[{i}]", out)


def unknown_fields(rt: ResourceType, body: Mapping[str, Any]) -> list[str]:
    """Dotted paths of the fields ``body`` sets that ``rt``'s schema does not declare."""
    out: list[str] = []
    _walk(kind_schema(rt), body, "", out)
    return out


def check_fields(rt: ResourceType, body: Any, directive: str | None) -> str | None:
    """Apply ``fieldValidation``: raise 400 under Strict; the Warning text under Warn."""
    if directive not in ("Strict", "Warn") or not isinstance(body, Mapping):
        return None
    unknown = unknown_fields(rt, body)
    if not unknown:
        return None
    text = ", ".join(f'unknown field "{f}"' for f in unknown)
    if directive == "Strict":
        raise status_errors.bad_request(f"strict decoding error: {text}")
    return text
