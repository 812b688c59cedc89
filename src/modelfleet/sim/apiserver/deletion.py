"""Deletion in the simulated API server: preconditions, finalizers and ``deletionTimestamp``,
owner-reference garbage collection (Background, Foreground, Orphan), namespace termination (the
namespace controller's part), and deleting a collection.

Development/test emulator only: product code never imports ``modelfleet.sim``. Works on a
:class:`~.store.ClusterStore` in memory, synchronously: a deletion and every cascade it starts
finish before the caller's coroutine yields. No I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from modelfleet.sim.apiserver import crds, status_errors, writes
from modelfleet.sim.apiserver.field_management import render_managed_fields
from modelfleet.sim.apiserver.object_table import StoredObject, now_rfc3339, owner_uids
from modelfleet.sim.apiserver.registry import ResourceType

if TYPE_CHECKING:
    from modelfleet.sim.apiserver.object_table import Key
    from modelfleet.sim.apiserver.store import ClusterStore

__all__ = ["delete", "delete_collection", "remove"]

_Objects = list[dict[str, Any]]


def delete(
    store: ClusterStore,
    rt: ResourceType,
    *,
    namespace: str | None,
    name: str,
    propagation: str | None = None,
    preconditions: Mapping[str, Any] | None = None,
    dry_run: bool = False,
) -> tuple[dict[str, Any], bool]:
    """Delete; returns (object, gone) where gone means it no longer exists."""
    stored = store.lookup(rt, namespace, name)
    obj = stored.obj
    meta = obj["metadata"]
    pre = preconditions or {}
    if pre.get("uid") and pre["uid"] != meta.get("uid"):
        raise status_errors.conflict(
            rt,
            name,
            f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: "
            f"{meta.get('uid')}",
        )
    if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
        raise status_errors.conflict(
            rt,
            name,
            f"Precondition failed: ResourceVersion in precondition: "
            f"{pre['resourceVersion']}, ResourceVersion in object meta: "
            f"{meta.get('resourceVersion')}",
        )
    policy = propagation or "Background"
    if policy not in ("Background", "Foreground", "Orphan"):
        raise status_errors.bad_request(f"invalid propagationPolicy {policy!r}")
    if dry_run:
        return obj, False
    uid = str(meta["uid"])
    if policy == "Orphan":
        orphan_dependents(store, uid)
    if rt.kind == "Namespace" and rt.group == "":
        return delete_namespace(store, stored, name)
    finalizers = list(meta.get("finalizers") or [])
    dependents = store.dependents.get(uid, set())
    if policy == "Foreground" and dependents and "foregroundDeletion" not in finalizers:
        finalizers.append("foregroundDeletion")
    if finalizers:
        if meta.get("deletionTimestamp") and finalizers == list(meta.get("finalizers") or []):
            return obj, False
        new = copy.deepcopy(obj)
        new_meta = new["metadata"]
        new_meta["finalizers"] = finalizers
        new_meta.setdefault("deletionTimestamp", now_rfc3339())
        new_meta.setdefault("deletionGracePeriodSeconds", 0)
        committed = commit_deletion_marker(store, rt, stored, new)
        if "foregroundDeletion" in finalizers:
            for dep_rt, dep_key, _ in _dependents(store, uid, forget=False):
                delete(
                    store,
                    dep_rt,
                    namespace=dep_key[0] or None,
                    name=dep_key[1],
                    propagation="Foreground",
                )
            check_foreground_owner(store, uid)
        current = store.find_uid(uid)
        if current is None:
            return committed, True
        return current[2].obj, False
    key = store.key(rt, namespace, name)
    deleted = remove(store, rt, key, obj, bump=True)
    return deleted, True


def commit_deletion_marker(
    store: ClusterStore, rt: ResourceType, stored: StoredObject, new: dict[str, Any]
) -> dict[str, Any]:
    meta = new["metadata"]
    meta["generation"] = int(stored.obj["metadata"].get("generation", 1)) + 1
    meta["resourceVersion"] = str(store.next_rv())
    meta["managedFields"] = render_managed_fields(stored.managers)
    key = store.key(rt, meta.get("namespace"), str(meta["name"]))
    managers = stored.managers
    store.put(rt, key, StoredObject(new, managers), stored.obj)
    store.emit("MODIFIED", rt, new, stored.obj)
    return new


def remove(
    store: ClusterStore, rt: ResourceType, key: Key, obj: dict[str, Any], *, bump: bool
) -> dict[str, Any]:
    """Drop an object for good: DELETED event, then garbage collection and bookkeeping."""
    stored = store.pop(rt, key)
    if stored is None:
        return obj
    final = stored.obj
    if bump:
        final = dict(stored.obj)
        final["metadata"] = dict(stored.obj["metadata"])
        final["metadata"]["resourceVersion"] = str(store.next_rv())
    meta = final["metadata"]
    uid = str(meta["uid"])
    store.by_uid.pop(uid, None)
    for owner in owner_uids(final):
        store.unlink_dependent(owner, uid)
    store.emit("DELETED", rt, final, stored.obj)
    collect_dependents(store, uid)
    for owner in owner_uids(final):
        check_foreground_owner(store, owner)
    if rt.namespaced and key[0]:
        maybe_finish_namespace(store, key[0])
    if rt.kind == "CustomResourceDefinition":
        crds.unregister(store, final)
    return final


def _dependents(
    store: ClusterStore, owner_uid: str, *, forget: bool
) -> Iterator[tuple[ResourceType, Key, StoredObject]]:
    """The objects that still exist among ``owner_uid``'s dependents (``forget``: and drop the
    owner's entry from the index). Each is looked up when reached, so cascades in between count."""
    deps = store.dependents.pop(owner_uid, set()) if forget else store.dependents.get(owner_uid)
    for dep_uid in sorted(deps or ()):
        found = store.find_uid(dep_uid)
        if found is not None:
            yield found


def collect_dependents(store: ClusterStore, owner_uid: str) -> None:
    """Background garbage collection after ``owner_uid`` is gone."""
    for dep_rt, dep_key, dep in _dependents(store, owner_uid, forget=True):
        refs = dep.obj["metadata"].get("ownerReferences") or []
        alive = [r for r in refs if r.get("uid") in store.by_uid and r.get("uid") != owner_uid]
        if alive:
            rewrite_owner_refs(store, dep_rt, dep, alive)
        else:
            delete(
                store,
                dep_rt,
                namespace=dep_key[0] or None,
                name=dep_key[1],
                propagation="Background",
            )


def rewrite_owner_refs(
    store: ClusterStore, rt: ResourceType, stored: StoredObject, refs: _Objects
) -> None:
    new = copy.deepcopy(stored.obj)
    if refs:
        new["metadata"]["ownerReferences"] = refs
    else:
        new["metadata"].pop("ownerReferences", None)
    writes.commit(
        store,
        rt,
        stored,
        new,
        manager="garbage-collector",
        subresource="",
        dry_run=False,
    )


def orphan_dependents(store: ClusterStore, owner_uid: str) -> None:
    for dep_rt, _, dep in _dependents(store, owner_uid, forget=False):
        refs = [
            r for r in dep.obj["metadata"].get("ownerReferences") or [] if r.get("uid") != owner_uid
        ]
        rewrite_owner_refs(store, dep_rt, dep, refs)


def check_foreground_owner(store: ClusterStore, owner_uid: str) -> None:
    found = store.find_uid(owner_uid)
    if found is None:
        return
    rt, _, stored = found
    meta = stored.obj["metadata"]
    finalizers = list(meta.get("finalizers") or [])
    if "foregroundDeletion" not in finalizers or store.dependents.get(owner_uid):
        return
    new = copy.deepcopy(stored.obj)
    finalizers.remove("foregroundDeletion")
    if finalizers:
        new["metadata"]["finalizers"] = finalizers
    else:
        new["metadata"].pop("finalizers", None)
    writes.commit(
        store, rt, stored, new, manager="garbage-collector", subresource="", dry_run=False
    )


def delete_namespace(
    store: ClusterStore, stored: StoredObject, name: str
) -> tuple[dict[str, Any], bool]:
    rt = store.resource_type("v1", "Namespace")
    obj = stored.obj
    if not obj["metadata"].get("deletionTimestamp"):
        new = copy.deepcopy(obj)
        new["metadata"]["deletionTimestamp"] = now_rfc3339()
        new["metadata"]["deletionGracePeriodSeconds"] = 0
        new["status"] = {"phase": "Terminating"}
        obj = commit_deletion_marker(store, rt, stored, new)
        for other in list(store.registry):
            if not other.namespaced:
                continue
            for s in store.iter_objects(other, name):
                m = s.obj["metadata"]
                if store.peek(other, name, str(m["name"])) is not None:
                    delete(store, other, namespace=name, name=str(m["name"]))
    maybe_finish_namespace(store, name)
    current = store.peek(rt, None, name)
    if current is None:
        return obj, True
    return current.obj, False


def namespace_empty(store: ClusterStore, namespace: str) -> bool:
    return not any(
        other.namespaced and any(k[0] == namespace for k in store.bucket(other))
        for other in store.registry
    )


def maybe_finish_namespace(store: ClusterStore, namespace: str) -> None:
    """Finish a terminating namespace once its content is gone (the namespace controller)."""
    rt = store.resource_type("v1", "Namespace")
    stored = store.peek(rt, None, namespace)
    if stored is None or not stored.obj["metadata"].get("deletionTimestamp"):
        return
    if not namespace_empty(store, namespace):
        return
    if stored.obj["metadata"].get("finalizers"):
        if (stored.obj.get("spec") or {}).get("finalizers"):
            new = copy.deepcopy(stored.obj)
            new["spec"]["finalizers"] = []
            writes.commit(
                store,
                rt,
                stored,
                new,
                manager="namespace-controller",
                subresource="",
                dry_run=False,
            )
        return
    remove(store, rt, ("", namespace), stored.obj, bump=True)


def delete_collection(
    store: ClusterStore,
    rt: ResourceType,
    *,
    namespace: str | None,
    label_selector: str | None,
    field_selector: str | None,
    propagation: str | None = None,
) -> _Objects:
    matched = store.list_objects(
        rt, namespace=namespace, label_selector=label_selector, field_selector=field_selector
    ).items
    out: _Objects = []
    for obj in list(matched):
        meta = obj["metadata"]
        if store.peek(rt, meta.get("namespace"), str(meta["name"])) is None:
            continue
        result, _ = delete(
            store,
            rt,
            namespace=meta.get("namespace"),
            name=str(meta["name"]),
            propagation=propagation,
        )
        out.append(result)
    return out
