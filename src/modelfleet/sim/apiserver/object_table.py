"""The object table of a simulated cluster: stored objects by kind and key, the uid and
owner-reference indexes, and the resource-version counter. :class:`~.store.ClusterStore` is built
on it; the write modules (:mod:`.writes`, :mod:`.deletion` ...) change it through these methods.

Development/test emulator only: product code never imports ``modelfleet.sim``. In memory; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from modelfleet.sim.apiserver import status_errors
from modelfleet.sim.apiserver.field_management import ManagerEntry, ManagerKey
from modelfleet.sim.apiserver.registry import ResourceType

__all__ = ["Key", "ObjectTable", "PatchType", "StoredObject", "now_rfc3339", "owner_uids"]

# (namespace, or "" for cluster-scoped kinds; name)
Key = tuple[str, str]
PatchType = Literal["merge", "json", "strategic"]


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def owner_uids(obj: Mapping[str, Any] | None) -> set[str]:
    """The uids ``obj``'s ownerReferences name."""
    if not obj:
        return set()
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return {str(r["uid"]) for r in refs if isinstance(r, dict) and r.get("uid")}


@dataclass
class StoredObject:
    """An object and who manages which of its fields."""

    obj: dict[str, Any]
    managers: dict[ManagerKey, ManagerEntry]


class ObjectTable:
    """Objects by kind and key, found also by uid; dependents by owner uid."""

    def __init__(self) -> None:
        self._rv = 0
        self._objects: dict[str, dict[Key, StoredObject]] = {}
        # uid -> where the object is; owner uid -> its dependents' uids (garbage collection)
        self.by_uid: dict[str, tuple[ResourceType, Key]] = {}
        self.dependents: dict[str, set[str]] = {}

    @property
    def resource_version(self) -> str:
        """The cluster's current resourceVersion (the last one handed out)."""
        return str(self._rv)

    @property
    def object_count(self) -> int:
        return sum(len(b) for b in self._objects.values())

    def next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def bucket(self, rt: ResourceType) -> dict[Key, StoredObject]:
        return self._objects.setdefault(rt.key, {})

    def key(self, rt: ResourceType, namespace: str | None, name: str) -> Key:
        return ((namespace or "") if rt.namespaced else "", name)

    def lookup(self, rt: ResourceType, namespace: str | None, name: str) -> StoredObject:
        stored = self.bucket(rt).get(self.key(rt, namespace, name))
        if stored is None:
            raise status_errors.not_found(rt, name)
        return stored

    def peek(self, rt: ResourceType, namespace: str | None, name: str) -> StoredObject | None:
        return self.bucket(rt).get(self.key(rt, namespace, name))

    def find_uid(self, uid: str) -> tuple[ResourceType, Key, StoredObject] | None:
        located = self.by_uid.get(uid)
        if located is None:
            return None
        rt, key = located
        stored = self.bucket(rt).get(key)
        return None if stored is None else (rt, key, stored)

    def iter_objects(self, rt: ResourceType, namespace: str | None) -> list[StoredObject]:
        """The objects of ``rt`` (in ``namespace``, or all), sorted by namespace and name."""
        return [s for _, s in self.iter_keyed(rt, namespace)]

    def iter_keyed(self, rt: ResourceType, namespace: str | None) -> list[tuple[Key, StoredObject]]:
        bucket = self.bucket(rt)
        keys = sorted(bucket)
        if namespace is not None and rt.namespaced:
            keys = [k for k in keys if k[0] == namespace]
        return [(k, bucket[k]) for k in keys]

    def put(
        self,
        rt: ResourceType,
        key: Key,
        stored: StoredObject,
        old: dict[str, Any] | None,
    ) -> None:
        """Store ``stored`` under ``key`` and keep the uid and owner indexes current (``old`` is
        the version it replaces)."""
        self.bucket(rt)[key] = stored
        uid = str(stored.obj["metadata"]["uid"])
        self.by_uid[uid] = (rt, key)
        old_owners = owner_uids(old)
        new_owners = owner_uids(stored.obj)
        for owner in old_owners - new_owners:
            self.unlink_dependent(owner, uid)
        for owner in new_owners - old_owners:
            self.dependents.setdefault(owner, set()).add(uid)

    def pop(self, rt: ResourceType, key: Key) -> StoredObject | None:
        """Take an object out of its bucket (the indexes are the caller's to update)."""
        return self.bucket(rt).pop(key, None)

    def unlink_dependent(self, owner: str, uid: str) -> None:
        deps = self.dependents.get(owner)
        if deps is not None:
            deps.discard(uid)
            if not deps:
                del self.dependents[owner]
