"""Admission of CustomResourceDefinitions and of their objects, as the real
apiextensions-apiserver does it:

* a CRD is refused (422) unless each served version's schema is structural and its CEL rules
  compile (:func:`crd_causes`);
* a custom object is pruned and defaulted against its version's schema on every write
  (:func:`prepare`), then validated: the OpenAPI value validations, then, unless a type error
  blocks them, the ``x-kubernetes-validations`` rules with ``oldSelf`` on updates
  (:func:`check`). A write to the status subresource is checked the same way; what it may
  change (status only) is :mod:`.writes`'.

Kinds registered without a schema (the well-known CRDs the simulator describes by hand) are
left alone. Development/test emulator only: product code never imports ``modelfleet.sim``.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modelfleet.sim.apiserver import status_errors
from modelfleet.sim.apiserver.crd_cel import compile_causes, rule_causes
from modelfleet.sim.apiserver.crd_schema import (
    Cause,
    apply_defaults,
    prune,
    structural_causes,
    validate,
)
from modelfleet.sim.apiserver.registry import ResourceType

__all__ = ["check", "crd_causes", "is_crd", "prepare"]

_BLOCKED = (
    "some validation rules were not checked because the object was invalid; correct the "
    "existing errors to complete validation"
)


def is_crd(rt: ResourceType) -> bool:
    return rt.kind == "CustomResourceDefinition" and rt.group == "apiextensions.k8s.io"


def crd_causes(crd: Mapping[str, Any]) -> list[Cause]:
    """Why ``crd`` (an apiextensions.k8s.io/v1 CustomResourceDefinition) cannot be stored."""
    spec = crd.get("spec")
    if not isinstance(spec, Mapping):
        return []
    causes: list[Cause] = []
    for i, version in enumerate(spec.get("versions") or []):
        if not isinstance(version, Mapping):
            continue
        path = f"spec.versions[{i}].schema.openAPIV3Schema"
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        found = structural_causes(schema, path)
        if not found:
            found = compile_causes(schema, path)
        causes.extend(found)
    return causes


def prepare(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Prune and default ``obj`` against ``rt``'s schema, in place."""
    if not isinstance(rt.schema, Mapping):
        return
    prune(rt.schema, obj, root=True)
    apply_defaults(rt.schema, obj, root=True)


def check(rt: ResourceType, obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> None:
    """422 Invalid with every cause when ``obj`` breaks ``rt``'s schema or rules."""
    if not isinstance(rt.schema, Mapping):
        return
    causes = validate(rt.schema, obj)
    if any(c["message"].endswith('"') and "must be of type" in c["message"] for c in causes):
        causes.append({"reason": "FieldValueInvalid", "message": _BLOCKED, "field": "<nil>"})
    else:
        causes.extend(rule_causes(rt.schema, obj, old))
    if causes:
        name = str((obj.get("metadata") or {}).get("name") or "")
        raise status_errors.invalid(rt, name, causes)
