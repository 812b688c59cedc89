"""The ``/scale`` subresource of the simulated API server (``autoscaling/v1`` Scale), for kinds
whose ResourceType (or CRD) declares one.

Development/test emulator only: product code never imports ``modelfleet.sim``. Works on a
:class:`~.store.ClusterStore` in memory; no I/O.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from modelfleet.sim.apiserver import status_errors, writes
from modelfleet.sim.apiserver.admission import get_path
from modelfleet.sim.apiserver.registry import ResourceType
from modelfleet.sim.apiserver.selectors import label_selector_from_object, selector_to_string

if TYPE_CHECKING:
    from modelfleet.sim.apiserver.store import ClusterStore

__all__ = ["get_scale", "set_scale"]


def get_scale(
    store: ClusterStore, rt: ResourceType, namespace: str | None, name: str
) -> dict[str, Any]:
    if not rt.scale_subresource:
        raise status_errors.not_found(rt, f"{name}/scale")
    obj = store.lookup(rt, namespace, name).obj
    meta = obj["metadata"]
    selector: Any = get_path(obj, rt.scale_selector_path) if rt.scale_selector_path else None
    if isinstance(selector, dict):
        selector = selector_to_string(label_selector_from_object(selector))
    scale_meta = {
        k: meta[k]
        for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
        if k in meta
    }
    status: dict[str, Any] = {"replicas": get_path(obj, rt.scale_status_replicas_path) or 0}
    if selector:
        status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": scale_meta,
        "spec": {"replicas": get_path(obj, rt.scale_replicas_path) or 0},
        "status": status,
    }


def set_scale(
    store: ClusterStore,
    rt: ResourceType,
    namespace: str | None,
    name: str,
    replicas: int,
    *,
    resource_version: str | None,
    field_manager: str | None,
) -> dict[str, Any]:
    if not rt.scale_subresource:
        raise status_errors.not_found(rt, f"{name}/scale")
    stored = store.lookup(rt, namespace, name)
    writes.check_resource_version(rt, name, resource_version, stored.obj)
    new = copy.deepcopy(stored.obj)
    *parents, leaf = rt.scale_replicas_path.split(".")
    cur = new
    for part in parents:
        cur = cur.setdefault(part, {})
    cur[leaf] = int(replicas)
    writes.commit(
        store,
        rt,
        stored,
        new,
        manager=field_manager or store.default_field_manager,
        subresource="scale",
        dry_run=False,
    )
    return get_scale(store, rt, namespace, name)
