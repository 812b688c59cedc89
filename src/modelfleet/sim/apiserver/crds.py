"""CustomResourceDefinitions in the simulated API server: a stored CRD registers a served
ResourceType per version (subresources, schema and printer columns included; storing it again
registers it again); deleting it unregisters them and removes their objects. What a CRD must be
to be stored, and what its objects must be, is :mod:`.crd_objects`'.

Development/test emulator only: product code never imports ``modelfleet.sim``. Works on a
:class:`~.store.ClusterStore` and its registry in memory; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from modelfleet.sim.apiserver import deletion
from modelfleet.sim.apiserver.registry import ResourceType

if TYPE_CHECKING:
    from modelfleet.sim.apiserver.store import ClusterStore

__all__ = ["register", "status", "unregister"]

# The conditions the real server's naming and establishing controllers set on a CRD it serves.
_CONDITIONS = (
    ("NamesAccepted", "NoConflicts", "no conflicts found"),
    ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
)


def status(crd: Mapping[str, Any], old: Mapping[str, Any] | None, now: str) -> dict[str, Any]:
    """The status the server gives a stored CRD: its names accepted, Established, its storage
    version recorded. Condition times are kept while the condition holds (so storing the same
    CRD again changes nothing)."""
    spec = crd.get("spec") or {}
    previous = {c.get("type"): c for c in (old or {}).get("conditions") or []}
    conditions = []
    for kind, reason, message in _CONDITIONS:
        since = previous.get(kind, {})
        conditions.append(
            {
                "type": kind,
                "status": "True",
                "lastTransitionTime": since.get("lastTransitionTime") or now
                if since.get("status") == "True"
                else now,
                "reason": reason,
                "message": message,
            }
        )
    stored = list((old or {}).get("storedVersions") or [])
    for version in spec.get("versions") or []:
        if version.get("storage") and version.get("name") not in stored:
            stored.append(version.get("name"))
    return {
        "conditions": conditions,
        "acceptedNames": dict(spec.get("names") or {}),
        "storedVersions": stored,
    }


def _json_path_to_dotted(path: str) -> str:
    return path.lstrip(".")


def register(store: ClusterStore, crd: Mapping[str, Any]) -> None:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = str(spec.get("group", ""))
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or {}
        rt = ResourceType(
            group=group,
            version=str(version.get("name")),
            plural=str(names.get("plural", "")),
            kind=str(names.get("kind", "")),
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            singular=str(names.get("singular", "")),
            short_names=tuple(names.get("shortNames") or ()),
            categories=tuple(names.get("categories") or ()),
            status_subresource="status" in subresources,
            scale_subresource="scale" in subresources,
            scale_replicas_path=_json_path_to_dotted(
                (subresources.get("scale") or {}).get("specReplicasPath", ".spec.replicas")
            ),
            scale_status_replicas_path=_json_path_to_dotted(
                (subresources.get("scale") or {}).get("statusReplicasPath", ".status.replicas")
            ),
            scale_selector_path=_json_path_to_dotted(
                (subresources.get("scale") or {}).get("labelSelectorPath", "")
            ),
            builtin=False,
            return_deleted_object=True,
            schema=(version.get("schema") or {}).get("openAPIV3Schema"),
            printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
        )
        existing = store.registry.by_path(rt.group, rt.version, rt.plural)
        if existing is not None and existing.builtin is False and existing.required:
            # Keep the richer built-in description (validation) of well-known CRDs.
            continue
        store.registry.add(rt)


def unregister(store: ClusterStore, crd: Mapping[str, Any]) -> None:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    for version in spec.get("versions") or []:
        rt = store.registry.by_path(
            str(spec.get("group", "")), str(version.get("name")), str(names.get("plural", ""))
        )
        if rt is None:
            continue
        for s in store.iter_objects(rt, None):
            m = s.obj["metadata"]
            deletion.remove(
                store, rt, store.key(rt, m.get("namespace"), str(m["name"])), s.obj, bump=True
            )
        store.registry.remove(rt.group, rt.version, rt.plural)
