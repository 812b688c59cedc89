"""CustomResourceDefinitions in the simulated API server: a stored CRD registers a served
ResourceType per version (subresources included); deleting it unregisters them and removes
their objects.

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

__all__ = ["register", "unregister"]


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
