"""The store of one simulated Kubernetes cluster: the async API the rest of the simulator uses
(reads, lists, writes, subscriptions), on the cluster's object table.

Development/test emulator only: product code never imports ``modelfleet.sim``. This module holds
state in memory and touches nothing outside the process: no files, no network. It is not
thread-safe; it is *async-safe* on a single event loop because no write awaits anything part way
through (every public coroutine runs its write to completion before yielding).

:class:`ClusterStore` is the API the rest of the simulator uses (the HTTP layer in
:mod:`.resource_handlers` calls the same write modules), so in-process writes and writes made over
HTTP share one resource-version counter, one event history and the same semantics. The semantics
live in one module each, working on the table (:mod:`.object_table`) through its primitives
(``lookup``, ``peek``, ``put``, ``emit`` ...):

* :mod:`.admission`: apiVersion/kind checks, defaults, initial status, validation;
* :mod:`.writes`: create, update and patch (metadata, generation, resourceVersion, managedFields);
* :mod:`.server_side_apply`: apply, on the field ownership of :mod:`.field_management`;
* :mod:`.deletion`: finalizers, owner-reference garbage collection, namespace termination;
* :mod:`.scale` and :mod:`.crds`: the scale subresource, and kinds that CRDs add;
* :mod:`.watch`: the bounded event history and the subscriptions (one event shared by all).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Literal

from modelfleet.sim.apiserver import deletion, listing, server_side_apply, status_errors, writes
from modelfleet.sim.apiserver.admission import name_required
from modelfleet.sim.apiserver.field_management import Scope
from modelfleet.sim.apiserver.listing import ObjectList
from modelfleet.sim.apiserver.object_table import ObjectTable, PatchType, now_rfc3339
from modelfleet.sim.apiserver.registry import ResourceRegistry, ResourceType
from modelfleet.sim.apiserver.selectors import (
    FieldSelector,
    LabelSelector,
)
from modelfleet.sim.apiserver.watch import EventType, Subscription, WatchEvent, WatchHub

__all__ = [
    "DEFAULT_NAMESPACES",
    "ClusterStore",
    "EventType",
    "ObjectList",
    "PatchType",
    "Subscription",
    "WatchEvent",
    "now_rfc3339",
]

DEFAULT_NAMESPACES: tuple[str, ...] = ("default", "kube-system", "kube-public", "kube-node-lease")

_Objects = list[dict[str, Any]]
_Events = list[WatchEvent]


class ClusterStore(ObjectTable):
    """Objects, resource versions, events and subscriptions of one simulated cluster.

    Objects are plain JSON-like dicts. Every method returns copies; mutating them does not change
    the store. Errors are raised as :class:`.status_errors.ApiError` with the Status the
    HTTP layer would send (``.code``, ``.reason``, ``.status``).
    """

    def __init__(
        self,
        name: str,
        *,
        registry: ResourceRegistry | None = None,
        history_limit: int = 10_000,
        subscriber_queue_limit: int = 100_000,
        namespaces: Iterable[str] = DEFAULT_NAMESPACES,
        default_field_manager: str = "modelfleet-sim",
    ) -> None:
        super().__init__()
        self.name = name
        self.registry = registry or ResourceRegistry()
        self.watches = WatchHub(history_limit=history_limit, queue_limit=subscriber_queue_limit)
        self.rng = random.Random()
        self.default_field_manager = default_field_manager
        self.writes = 0
        for ns in namespaces:
            writes.create(
                self,
                self.resource_type("v1", "Namespace"),
                {"metadata": {"name": ns}},
                namespace=None,
                field_manager="kube-apiserver",
            )

    # ---------------------------------------------------------------- properties and lookups

    @property
    def oldest_watchable_resource_version(self) -> int:
        return self.watches.floor

    def resource_type(self, api_version: str, kind: str) -> ResourceType:
        """The registered type for ``apiVersion``/``kind`` (ApiError 404 if not served)."""
        rt = self.registry.by_kind(api_version, kind)
        if rt is None:
            raise status_errors.ApiError(
                404,
                "NotFound",
                f'the server could not find the requested resource (kind "{kind}" in '
                f'"{api_version}")',
            )
        return rt

    def scope(self, rt: ResourceType, subresource: str) -> Scope:
        """Which fields a write through ``subresource`` manages."""
        if subresource == "status":
            return "status"
        return "main" if rt.status_subresource else "all"

    def emit(
        self,
        etype: EventType,
        rt: ResourceType,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
    ) -> None:
        self.writes += 1
        self.watches.publish(WatchEvent(etype, obj, rt, self._rv, old))

    # ---------------------------------------------------------------- subscriptions

    def subscribe(
        self,
        kinds: Iterable[tuple[str, str]] | None = None,
        *,
        namespace: str | None = None,
        callback: Callable[[WatchEvent], Awaitable[None] | None] | None = None,
        maxsize: int | None = None,
    ) -> Subscription:
        """Subscribe to changes of ``kinds`` (``(apiVersion, kind)`` pairs; None means all).

        Events carry objects detached from the store, one copy shared by every subscriber:
        treat them as read-only. Without ``callback`` consume the returned
        :class:`Subscription`; with one, a task (on the running loop) awaits the callback for
        every event in order, logging and skipping callback exceptions. ``close()`` stops it.
        """
        keys = None if kinds is None else {self.resource_type(av, k).key for av, k in kinds}

        def predicate(ev: WatchEvent) -> bool:
            if keys is not None and ev.resource.key not in keys:
                return False
            return namespace is None or ev.namespace == namespace

        sub = self.watches.subscribe(predicate, maxsize=maxsize, detach=True)
        if callback is not None:
            sub.run_callback(callback, name=f"sim-subscriber-{self.name}")
        return sub

    async def wait_for(
        self,
        api_version: str,
        kind: str,
        name: str,
        predicate: Callable[[dict[str, Any] | None], bool],
        *,
        namespace: str | None = None,
    ) -> dict[str, Any] | None:
        """Wait until ``predicate(object)`` holds and return that object (a copy).

        The predicate sees ``None`` while the object does not exist (so ``lambda o: o is None``
        waits for a deletion). Checks the current state first, then every change. Bound it with
        ``async with asyncio.timeout(...)``; ``TimeoutError`` is also raised if the store drops
        the subscription (it fell too far behind).
        """
        rt = self.resource_type(api_version, kind)
        ns = self._ns(rt, namespace)
        sub = self.subscribe([(api_version, kind)], namespace=ns)
        try:
            current = self.peek(rt, ns, name)
            obj = copy.deepcopy(current.obj) if current is not None else None
            if predicate(obj):
                return obj
            async for event in sub:
                if event.name != name:
                    continue
                obj = None if event.type == "DELETED" else event.object
                if predicate(obj):
                    # the event's object is shared with other subscribers; the caller owns this
                    return copy.deepcopy(obj)
        finally:
            sub.close()
        raise TimeoutError(f"{kind} {name!r}: subscription closed before the condition held")

    def open_watch(
        self,
        rt: ResourceType,
        *,
        namespace: str | None,
        resource_version: str | None,
        maxsize: int | None = None,
    ) -> tuple[_Events, Subscription]:
        """Start a watch on ``rt``: the events to replay first, and the live subscription.

        With no resourceVersion (or "0") the replay is a synthetic ADDED per existing object;
        otherwise it is the history after that version, or ApiError 410 Expired if it is gone.
        Registration and replay happen atomically, so no event falls in between.
        """
        if resource_version in (None, "", "0"):
            initial = [
                WatchEvent("ADDED", s.obj, rt, self._rv) for s in self.iter_objects(rt, namespace)
            ]
        else:
            try:
                since = int(str(resource_version))
            except ValueError:
                bad = f"invalid resourceVersion {resource_version!r}"
                raise status_errors.bad_request(bad) from None
            initial = [
                ev
                for ev in self.watches.since(since)
                if ev.resource.key == rt.key and (namespace is None or ev.namespace == namespace)
            ]

        def predicate(ev: WatchEvent) -> bool:
            return ev.resource.key == rt.key and (namespace is None or ev.namespace == namespace)

        return initial, self.watches.subscribe(predicate, maxsize=maxsize, detach=False)

    def close_subscriptions(self) -> None:
        self.watches.close_all()

    # ---------------------------------------------------------------- reads

    def get_object(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        """The stored object itself (read-only; the HTTP layer serialises it)."""
        return self.lookup(rt, namespace, name).obj

    def list_objects(
        self,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | LabelSelector | None = None,
        field_selector: str | FieldSelector | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> ObjectList:
        """Matching stored objects (read-only), sorted by namespace and name."""
        return listing.list_objects(
            self,
            rt,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=limit,
            continue_token=continue_token,
        )

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any]:
        """A copy of one object (ApiError 404 if absent)."""
        rt = self.resource_type(api_version, kind)
        return copy.deepcopy(self.get_object(rt, self._ns(rt, namespace), name))

    async def list(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> _Objects:
        """Copies of matching objects; ``namespace=None`` lists all namespaces."""
        rt = self.resource_type(api_version, kind)
        result = self.list_objects(
            rt,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
        )
        return copy.deepcopy(result.items)

    def _ns(self, rt: ResourceType, namespace: str | None) -> str | None:
        """The namespace a call means: ``default`` when a namespaced kind is given none."""
        if not rt.namespaced:
            return None
        return namespace or "default"

    # ---------------------------------------------------------------- public writes

    async def create(
        self,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        """Create ``obj`` (namespace from the argument, the object, or ``default``)."""
        rt = self.resource_type(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        ns = namespace or (obj.get("metadata") or {}).get("namespace")
        created = writes.create(
            self, rt, obj, namespace=self._ns(rt, ns), field_manager=field_manager
        )
        return copy.deepcopy(created)

    async def update(
        self, obj: Mapping[str, Any], *, field_manager: str | None = None
    ) -> dict[str, Any]:
        """Replace an object (PUT semantics; a set resourceVersion must match, else 409)."""
        rt, ns, name = self._identify(obj)
        return copy.deepcopy(
            writes.update(self, rt, obj, namespace=ns, name=name, field_manager=field_manager)
        )

    async def update_status(
        self, obj: Mapping[str, Any], *, field_manager: str | None = None
    ) -> dict[str, Any]:
        """Replace ``.status`` through the status subresource (PUT .../status)."""
        rt, ns, name = self._identify(obj)
        return copy.deepcopy(
            writes.update(
                self,
                rt,
                obj,
                namespace=ns,
                name=name,
                field_manager=field_manager,
                subresource="status",
            )
        )

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        field_manager: str | None = None,
        subresource: str = "",
    ) -> dict[str, Any]:
        """Patch an object (merge, json or strategic), optionally through ``status``."""
        rt = self.resource_type(api_version, kind)
        return copy.deepcopy(
            writes.patch(
                self,
                rt,
                patch,
                namespace=self._ns(rt, namespace),
                name=name,
                patch_type=patch_type,
                field_manager=field_manager,
                subresource=subresource,
            )
        )

    async def patch_status(
        self,
        api_version: str,
        kind: str,
        name: str,
        status: Mapping[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        """JSON-merge ``status`` into ``.status`` through the status subresource."""
        return await self.patch(
            api_version,
            kind,
            name,
            {"status": dict(status)},
            namespace=namespace,
            patch_type="merge",
            field_manager=field_manager,
            subresource="status",
        )

    async def apply(
        self,
        obj: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = False,
        subresource: str = "",
    ) -> dict[str, Any]:
        """Server-side apply ``obj`` as ``field_manager`` (creates when absent)."""
        rt, ns, name = self._identify(obj)
        result, _ = server_side_apply.apply_to_store(
            self,
            rt,
            obj,
            namespace=ns,
            name=name,
            field_manager=field_manager,
            force=force,
            subresource=subresource,
        )
        return copy.deepcopy(result)

    async def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: Literal["Background", "Foreground", "Orphan"] | None = None,
    ) -> dict[str, Any] | None:
        """Delete an object. Returns it while finalizers hold it, None once it is gone."""
        rt = self.resource_type(api_version, kind)
        obj, gone = deletion.delete(
            self, rt, namespace=self._ns(rt, namespace), name=name, propagation=propagation_policy
        )
        return None if gone else copy.deepcopy(obj)

    async def ensure_namespace(self, name: str) -> dict[str, Any]:
        """Create namespace ``name`` unless it exists; return it."""
        rt = self.resource_type("v1", "Namespace")
        existing = self.peek(rt, None, name)
        if existing is not None:
            return copy.deepcopy(existing.obj)
        return copy.deepcopy(
            writes.create(
                self, rt, {"metadata": {"name": name}}, namespace=None, field_manager=None
            )
        )

    def _identify(self, obj: Mapping[str, Any]) -> tuple[ResourceType, str | None, str]:
        rt = self.resource_type(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        if not name:
            raise name_required(rt)
        return rt, self._ns(rt, meta.get("namespace")), name

    async def delete_collection(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> _Objects:
        rt = self.resource_type(api_version, kind)
        return copy.deepcopy(
            deletion.delete_collection(
                self,
                rt,
                namespace=self._ns(rt, namespace) if namespace else None,
                label_selector=label_selector,
                field_selector=field_selector,
            )
        )
