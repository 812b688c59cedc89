"""The event recorder of a simulated cluster: core/v1 Events about objects, written the way
client-go's recorder writes them (one Event per object, reason and message; a repeat bumps
``count`` and ``lastTimestamp``), so ``kubectl describe`` and ``kubectl get events`` show what
the scheduler, kubelet and controllers did.

Development/test emulator only: product code never imports ``modelfleet.sim``. Writes Events
through the cluster's store in process; an Event that cannot be written (its namespace is
terminating, the cluster is closing) is dropped, as the real recorder drops it.
"""

from __future__ import annotations

import contextlib
import itertools
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Literal

from modelfleet.sim.apiserver.object_table import now_rfc3339
from modelfleet.sim.apiserver.status_errors import ApiError
from modelfleet.sim.apiserver.store import ClusterStore

__all__ = ["EventRecorder", "EventType"]

EventType = Literal["Normal", "Warning"]
# Repeats are folded into one Event while its key is remembered; bounded like the real
# recorder's LRU cache.
_CACHE_SIZE = 4096


class EventRecorder:
    """Records Events about objects of one cluster."""

    def __init__(self, store: ClusterStore) -> None:
        self._store = store
        self._names: OrderedDict[tuple[str, ...], str] = OrderedDict()
        self._counter = itertools.count(1)

    async def record(
        self,
        obj: Mapping[str, Any],
        event_type: EventType,
        reason: str,
        message: str,
        *,
        component: str,
        host: str = "",
        field_path: str = "",
    ) -> None:
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        uid = str(meta.get("uid") or "")
        key = (namespace, uid, reason, message, component, field_path)
        now = now_rfc3339()
        known = self._names.get(key)
        if known is not None:
            self._names.move_to_end(key)
            with contextlib.suppress(ApiError):
                current = await self._store.get("v1", "Event", known, namespace=namespace)
                await self._store.patch(
                    "v1",
                    "Event",
                    known,
                    {"count": int(current.get("count") or 1) + 1, "lastTimestamp": now},
                    namespace=namespace,
                    field_manager=component,
                )
                return
        name = f"{meta.get('name', 'object')}.{next(self._counter):016x}"
        source: dict[str, str] = {"component": component}
        if host:
            source["host"] = host
        involved: dict[str, Any] = {
            "kind": obj.get("kind", ""),
            "namespace": meta.get("namespace", ""),
            "name": meta.get("name", ""),
            "uid": uid,
            "apiVersion": obj.get("apiVersion", ""),
            "resourceVersion": str(meta.get("resourceVersion", "")),
        }
        if field_path:
            involved["fieldPath"] = field_path
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "source": source,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "type": event_type,
            "eventTime": None,
            "reportingComponent": component,
            "reportingInstance": host or component,
        }
        with contextlib.suppress(ApiError):
            await self._store.create(event, namespace=namespace, field_manager=component)
            self._names[key] = name
            while len(self._names) > _CACHE_SIZE:
                self._names.popitem(last=False)
