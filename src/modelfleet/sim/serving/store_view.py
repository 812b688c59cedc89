"""Reads of one simulated cluster's in-process store for the serving plane: a kind's objects
(absent kinds read as none) and one object by name (None when it or its kind is absent).

Development/test emulator only. Reads the store; writes nothing.
"""

from __future__ import annotations

from typing import Any

from modelfleet.sim.apiserver.status_errors import ApiError
from modelfleet.sim.apiserver.store import ClusterStore

__all__ = ["get", "objects"]


def objects(
    store: ClusterStore,
    api_version: str,
    kind: str,
    namespace: str | None = None,
    selector: Any = None,
) -> list[dict[str, Any]]:
    try:
        rt = store.resource_type(api_version, kind)
    except ApiError:
        return []
    return list(store.list_objects(rt, namespace=namespace, label_selector=selector).items)


def get(
    store: ClusterStore, api_version: str, kind: str, namespace: str, name: str
) -> dict[str, Any] | None:
    try:
        return store.get_object(store.resource_type(api_version, kind), namespace, name)
    except ApiError:
        return None
