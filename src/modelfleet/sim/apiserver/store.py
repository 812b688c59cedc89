"""In-memory object store of one simulated Kubernetes cluster.

Development/test emulator only: product code never imports ``modelfleet.sim``. This module holds
state in memory and touches nothing outside the process: no files, no network. It is not
thread-safe; it is *async-safe* on a single event loop because no write awaits anything part way
through (every public coroutine runs its write to completion before yielding).

:class:`ClusterStore` is the API the rest of the simulator uses (the HTTP layer in
:mod:`.server` calls the same methods), so in-process writes and writes made over
HTTP share one resource-version counter, one event history and the same semantics:

* metadata: uid, creationTimestamp, string resourceVersion from the per-cluster counter,
  generation (1 on create, +1 when anything but metadata/status changes), managedFields,
  namespace defaulting, generateName;
* status subresource separation, finalizers with deletionTimestamp, owner-reference garbage
  collection (Background, Foreground, Orphan), namespace termination;
* server-side apply through :mod:`.field_management`, patches through :mod:`.patch_formats`;
* a bounded per-cluster event history for watches from a resourceVersion (older is 410 Expired),
  and subscriptions (an asyncio queue per subscriber, or a callback run in its own task).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import inspect
import json
import logging
import random
import re
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from modelfleet.sim.apiserver import status_errors
from modelfleet.sim.apiserver.field_management import (
    ManagerEntry,
    ManagerKey,
    Path,
    Scope,
    apply_config,
    format_path,
    record_update,
    render_managed_fields,
)
from modelfleet.sim.apiserver.patch_formats import json_patch, merge_patch, strategic_merge_patch
from modelfleet.sim.apiserver.registry import ResourceRegistry, ResourceType
from modelfleet.sim.apiserver.selectors import (
    FieldSelector,
    LabelSelector,
    label_selector_from_object,
    parse_field_selector,
    parse_label_selector,
    selector_to_string,
)
from modelfleet.sim.apiserver.status_errors import ApiError

__all__ = [
    "DEFAULT_NAMESPACES",
    "ClusterStore",
    "EventType",
    "ObjectList",
    "PatchType",
    "Subscription",
    "WatchEvent",
]

log = logging.getLogger(__name__)

EventType = Literal["ADDED", "MODIFIED", "DELETED"]
PatchType = Literal["merge", "json", "strategic"]
DEFAULT_NAMESPACES: tuple[str, ...] = ("default", "kube-system", "kube-public", "kube-node-lease")

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SERVER_META = (
    "uid",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)


_Objects = list[dict[str, Any]]
_Events = list["WatchEvent"]


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class WatchEvent:
    """One change. ``object`` is the stored snapshot: treat it as read-only."""

    type: EventType
    object: dict[str, Any]
    resource: ResourceType
    resource_version: int
    old_object: dict[str, Any] | None = None
    _encoded: dict[str, bytes] = field(default_factory=dict, repr=False, compare=False)

    @property
    def namespace(self) -> str:
        return str(self.object.get("metadata", {}).get("namespace", ""))

    @property
    def name(self) -> str:
        return str(self.object.get("metadata", {}).get("name", ""))

    def encode(self, as_type: str | None = None) -> bytes:
        """The newline-terminated JSON watch frame, cached per event type."""
        t = as_type or self.type
        cached = self._encoded.get(t)
        if cached is None:
            frame = {"type": t, "object": self.object}
            cached = json.dumps(frame, separators=(",", ":")).encode() + b"\n"
            self._encoded[t] = cached
        return cached


@dataclass
class ObjectList:
    items: list[dict[str, Any]]
    resource_version: str
    continue_token: str = ""
    remaining: int | None = None


@dataclass
class _Stored:
    obj: dict[str, Any]
    managers: dict[ManagerKey, ManagerEntry]


_CLOSED = object()


class Subscription:
    """A stream of :class:`WatchEvent` for one subscriber.

    Iterate with ``async for event in sub`` (ends when the subscription is closed) or ``await
    sub.get()`` (``None`` once closed). A subscriber that falls more than ``maxsize`` events behind
    is closed with ``overflowed = True``, like a real apiserver dropping a slow watcher.
    """

    def __init__(
        self,
        store: ClusterStore,
        predicate: Callable[[WatchEvent], bool],
        *,
        maxsize: int,
        copy_objects: bool,
    ) -> None:
        self._store = store
        self._predicate = predicate
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._maxsize = maxsize
        self._copy = copy_objects
        self.closed = False
        self.overflowed = False
        self._task: asyncio.Task[None] | None = None

    def _offer(self, event: WatchEvent) -> None:
        if self.closed or not self._predicate(event):
            return
        if self._maxsize and self._queue.qsize() >= self._maxsize:
            self.overflowed = True
            self.close()
            return
        if self._copy:
            event = WatchEvent(
                event.type,
                copy.deepcopy(event.object),
                event.resource,
                event.resource_version,
                copy.deepcopy(event.old_object),
            )
        self._queue.put_nowait(event)

    async def get(self) -> WatchEvent | None:
        if self.closed and self._queue.empty():
            return None
        item = await self._queue.get()
        if item is _CLOSED:
            self._queue.put_nowait(_CLOSED)  # keep later get() calls returning None
            return None
        assert isinstance(item, WatchEvent)
        return item

    def get_nowait(self) -> WatchEvent | None:
        """The next queued event, or None if there is none right now (or closed)."""
        if self._queue.empty():
            return None
        item = self._queue.get_nowait()
        if item is _CLOSED:
            self._queue.put_nowait(_CLOSED)
            return None
        assert isinstance(item, WatchEvent)
        return item

    def pending(self) -> int:
        return self._queue.qsize()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._store._unsubscribe(self)
        self._queue.put_nowait(_CLOSED)
        if self._task is not None and not self._task.done():
            current = asyncio.current_task() if _loop_running() else None
            if current is not self._task:
                self._task.cancel()

    def __aiter__(self) -> AsyncIterator[WatchEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[WatchEvent]:
        while True:
            event = await self.get()
            if event is None:
                return
            yield event

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _get_path(obj: Any, dotted: str) -> Any:
    cur = obj
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _spec_part(obj: Mapping[str, Any], rt: ResourceType) -> dict[str, Any]:
    """What generation tracks: everything but metadata (and status with a status subresource)."""
    skip = {"metadata", "apiVersion", "kind"}
    if rt.status_subresource:
        skip.add("status")
    return {k: v for k, v in obj.items() if k not in skip}


def _comparable(obj: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    for k in ("resourceVersion", "managedFields", "generation"):
        meta.pop(k, None)
    out["metadata"] = meta
    return out


def _ownership(managers: Mapping[ManagerKey, ManagerEntry]) -> dict[ManagerKey, frozenset[Path]]:
    return {k: frozenset(v.paths) for k, v in managers.items()}


class ClusterStore:
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
        self.name = name
        self.registry = registry or ResourceRegistry()
        self._rv = 0
        self._objects: dict[str, dict[tuple[str, str], _Stored]] = {}
        self._by_uid: dict[str, tuple[ResourceType, tuple[str, str]]] = {}
        self._dependents: dict[str, set[str]] = {}
        self._history: deque[WatchEvent] = deque()
        self._history_limit = max(1, history_limit)
        self._floor = 0  # every event with resourceVersion > floor is still in history
        self._subscribers: list[Subscription] = []
        self._queue_limit = subscriber_queue_limit
        self._rng = random.Random()
        self.default_field_manager = default_field_manager
        self.writes = 0
        for ns in namespaces:
            self._create(
                self._rt("v1", "Namespace"),
                {"metadata": {"name": ns}},
                namespace=None,
                field_manager="kube-apiserver",
            )

    # ---------------------------------------------------------------- properties and lookups

    @property
    def resource_version(self) -> str:
        """The cluster's current resourceVersion (the last one handed out)."""
        return str(self._rv)

    @property
    def oldest_watchable_resource_version(self) -> int:
        return self._floor

    def resource_type(self, api_version: str, kind: str) -> ResourceType:
        """The registered type for ``apiVersion``/``kind`` (ApiError 404 if not served)."""
        return self._rt(api_version, kind)

    def _rt(self, api_version: str, kind: str) -> ResourceType:
        rt = self.registry.by_kind(api_version, kind)
        if rt is None:
            raise ApiError(
                404,
                "NotFound",
                f'the server could not find the requested resource (kind "{kind}" in '
                f'"{api_version}")',
            )
        return rt

    def _bucket(self, rt: ResourceType) -> dict[tuple[str, str], _Stored]:
        return self._objects.setdefault(rt.key, {})

    def _key(self, rt: ResourceType, namespace: str | None, name: str) -> tuple[str, str]:
        return ((namespace or "") if rt.namespaced else "", name)

    def _lookup(self, rt: ResourceType, namespace: str | None, name: str) -> _Stored:
        stored = self._bucket(rt).get(self._key(rt, namespace, name))
        if stored is None:
            raise status_errors.not_found(rt, name)
        return stored

    def _peek(self, rt: ResourceType, namespace: str | None, name: str) -> _Stored | None:
        return self._bucket(rt).get(self._key(rt, namespace, name))

    def _scope(self, rt: ResourceType, subresource: str) -> Scope:
        if subresource == "status":
            return "status"
        return "main" if rt.status_subresource else "all"

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    # ---------------------------------------------------------------- events and subscriptions

    def _emit(
        self,
        etype: EventType,
        rt: ResourceType,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
    ) -> None:
        self.writes += 1
        event = WatchEvent(etype, obj, rt, self._rv, old)
        if len(self._history) >= self._history_limit:
            dropped = self._history.popleft()
            self._floor = dropped.resource_version
        self._history.append(event)
        for sub in list(self._subscribers):
            sub._offer(event)

    def _unsubscribe(self, sub: Subscription) -> None:
        with contextlib.suppress(ValueError):
            self._subscribers.remove(sub)

    def subscribe(
        self,
        kinds: Iterable[tuple[str, str]] | None = None,
        *,
        namespace: str | None = None,
        callback: Callable[[WatchEvent], Awaitable[None] | None] | None = None,
        maxsize: int | None = None,
    ) -> Subscription:
        """Subscribe to changes of ``kinds`` (``(apiVersion, kind)`` pairs; None means all).

        Events carry private copies of the objects. Without ``callback`` consume the returned
        :class:`Subscription`; with one, a task (on the running loop) awaits the callback for
        every event in order, logging and skipping callback exceptions. ``close()`` stops it.
        """
        keys = None if kinds is None else {self._rt(av, k).key for av, k in kinds}

        def predicate(ev: WatchEvent) -> bool:
            if keys is not None and ev.resource.key not in keys:
                return False
            return namespace is None or ev.namespace == namespace

        sub = Subscription(
            self,
            predicate,
            maxsize=self._queue_limit if maxsize is None else maxsize,
            copy_objects=True,
        )
        self._subscribers.append(sub)
        if callback is not None:
            sub._task = asyncio.get_running_loop().create_task(
                _run_callback(sub, callback), name=f"sim-subscriber-{self.name}"
            )
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
        rt = self._rt(api_version, kind)
        ns = self._ns(rt, namespace)
        sub = self.subscribe([(api_version, kind)], namespace=ns)
        try:
            current = self._peek(rt, ns, name)
            obj = copy.deepcopy(current.obj) if current is not None else None
            if predicate(obj):
                return obj
            async for event in sub:
                if event.name != name:
                    continue
                obj = None if event.type == "DELETED" else event.object
                if predicate(obj):
                    return obj
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
                WatchEvent("ADDED", s.obj, rt, self._rv) for s in self._iter_objects(rt, namespace)
            ]
        else:
            try:
                since = int(str(resource_version))
            except ValueError:
                raise status_errors.bad_request(
                    f"invalid resourceVersion {resource_version!r}"
                ) from None
            if since < self._floor:
                raise status_errors.expired(
                    f"too old resource version: {since} ({self._floor + 1})"
                )
            initial = [
                ev
                for ev in self._history
                if ev.resource_version > since
                and ev.resource.key == rt.key
                and (namespace is None or ev.namespace == namespace)
            ]

        def predicate(ev: WatchEvent) -> bool:
            return ev.resource.key == rt.key and (namespace is None or ev.namespace == namespace)

        sub = Subscription(
            self,
            predicate,
            maxsize=self._queue_limit if maxsize is None else maxsize,
            copy_objects=False,
        )
        self._subscribers.append(sub)
        return initial, sub

    def close_subscriptions(self) -> None:
        for sub in list(self._subscribers):
            sub.close()

    # ---------------------------------------------------------------- reads

    def _iter_objects(self, rt: ResourceType, namespace: str | None) -> list[_Stored]:
        bucket = self._bucket(rt)
        keys = sorted(bucket)
        if namespace is not None and rt.namespaced:
            keys = [k for k in keys if k[0] == namespace]
        return [bucket[k] for k in keys]

    def get_object(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        """The stored object itself (read-only; the HTTP layer serialises it)."""
        return self._lookup(rt, namespace, name).obj

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
        lsel = (
            label_selector
            if isinstance(label_selector, LabelSelector)
            else parse_label_selector(label_selector)
        )
        fsel = (
            field_selector
            if isinstance(field_selector, FieldSelector)
            else parse_field_selector(field_selector, rt.plural)
        )
        list_rv = self._rv
        start: tuple[str, str] | None = None
        if continue_token:
            list_rv, start = _decode_continue(continue_token)
        items: _Objects = []
        bucket = self._bucket(rt)
        keys = sorted(bucket)
        if namespace is not None and rt.namespaced:
            keys = [k for k in keys if k[0] == namespace]
        if start is not None:
            keys = [k for k in keys if k > start]
        matched: list[tuple[tuple[str, str], dict[str, Any]]] = []
        for k in keys:
            obj = bucket[k].obj
            meta = obj.get("metadata", {})
            if not lsel.matches(meta.get("labels")):
                continue
            if not fsel.empty and not fsel.matches(obj):
                continue
            matched.append((k, obj))
        token = ""
        remaining: int | None = None
        if limit and limit > 0 and len(matched) > limit:
            token = _encode_continue(list_rv, matched[limit - 1][0])
            remaining = len(matched) - limit
            matched = matched[:limit]
        items = [obj for _, obj in matched]
        return ObjectList(items, str(list_rv), token, remaining)

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any]:
        """A copy of one object (ApiError 404 if absent)."""
        rt = self._rt(api_version, kind)
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
        rt = self._rt(api_version, kind)
        result = self.list_objects(
            rt,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
        )
        return copy.deepcopy(result.items)

    def _ns(self, rt: ResourceType, namespace: str | None) -> str | None:
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
        rt = self._rt(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        ns = namespace or (obj.get("metadata") or {}).get("namespace")
        created = self._create(rt, obj, namespace=self._ns(rt, ns), field_manager=field_manager)
        return copy.deepcopy(created)

    async def update(
        self, obj: Mapping[str, Any], *, field_manager: str | None = None
    ) -> dict[str, Any]:
        """Replace an object (PUT semantics; a set resourceVersion must match, else 409)."""
        rt, ns, name = self._identify(obj)
        return copy.deepcopy(
            self._update(rt, obj, namespace=ns, name=name, field_manager=field_manager)
        )

    async def update_status(
        self, obj: Mapping[str, Any], *, field_manager: str | None = None
    ) -> dict[str, Any]:
        """Replace ``.status`` through the status subresource (PUT .../status)."""
        rt, ns, name = self._identify(obj)
        return copy.deepcopy(
            self._update(
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
        rt = self._rt(api_version, kind)
        return copy.deepcopy(
            self._patch(
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
        result, _ = self._apply(
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
        rt = self._rt(api_version, kind)
        obj, gone = self._delete(
            rt, namespace=self._ns(rt, namespace), name=name, propagation=propagation_policy
        )
        return None if gone else copy.deepcopy(obj)

    async def ensure_namespace(self, name: str) -> dict[str, Any]:
        """Create namespace ``name`` unless it exists; return it."""
        rt = self._rt("v1", "Namespace")
        existing = self._peek(rt, None, name)
        if existing is not None:
            return copy.deepcopy(existing.obj)
        return copy.deepcopy(
            self._create(rt, {"metadata": {"name": name}}, namespace=None, field_manager=None)
        )

    def _identify(self, obj: Mapping[str, Any]) -> tuple[ResourceType, str | None, str]:
        rt = self._rt(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        if not name:
            raise status_errors.invalid(
                rt,
                "",
                [
                    {
                        "reason": "FieldValueRequired",
                        "message": "Required value",
                        "field": "metadata.name",
                    }
                ],
            )
        return rt, self._ns(rt, meta.get("namespace")), name

    # ---------------------------------------------------------------- validation

    def _check_type(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """Default or check apiVersion/kind; returns the object with them as its first keys."""
        api_version = obj.get("apiVersion")
        kind = obj.get("kind")
        if api_version in (None, ""):
            obj["apiVersion"] = rt.api_version
        elif api_version != rt.api_version:
            raise status_errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({rt.api_version})"
            )
        if kind in (None, ""):
            obj["kind"] = rt.kind
        elif kind != rt.kind:
            raise status_errors.bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
            )
        if not isinstance(obj.get("metadata", {}), dict):
            raise status_errors.bad_request("metadata must be an object")
        if list(obj)[:2] == ["apiVersion", "kind"]:
            return obj
        rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], **rest}

    def _validate(self, rt: ResourceType, obj: Mapping[str, Any]) -> None:
        causes: _Objects = []
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        if not name:
            causes.append(
                {
                    "reason": "FieldValueRequired",
                    "message": "name or generateName is required",
                    "field": "metadata.name",
                }
            )
        else:
            pattern = _DNS_LABEL if rt.kind == "Namespace" else _DNS_SUBDOMAIN
            limit = 63 if rt.kind == "Namespace" else 253
            if len(name) > limit or not pattern.match(name):
                causes.append(
                    {
                        "reason": "FieldValueInvalid",
                        "message": f"Invalid value: {name!r}: a lowercase RFC 1123 name must "
                        "consist of lower case alphanumeric characters, '-' or '.'",
                        "field": "metadata.name",
                    }
                )
        for key in ("labels", "annotations"):
            value = meta.get(key)
            if value is not None and (
                not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values())
            ):
                causes.append(
                    {
                        "reason": "FieldValueInvalid",
                        "message": "Invalid value: values must be strings",
                        "field": f"metadata.{key}",
                    }
                )
        for req in rt.required:
            missing: tuple[Any, ...] = (None,) if req.allow_empty else (None, "", [], {})
            if all(_get_path(obj, p) in missing for p in req.paths()):
                causes.append(
                    {"reason": "FieldValueRequired", "message": "Required value", "field": req.path}
                )
        if causes:
            raise status_errors.invalid(rt, name, causes)

    def _apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        for path, value in rt.defaults:
            *parents, leaf = path.split(".")
            cur: Any = obj
            for part in parents:
                if not isinstance(cur, dict) or not isinstance(cur.get(part), dict):
                    cur = None
                    break
                cur = cur[part]
            if isinstance(cur, dict) and leaf not in cur:
                cur[leaf] = copy.deepcopy(value)

    def _check_namespace(self, rt: ResourceType, namespace: str | None, name: str) -> None:
        if not rt.namespaced:
            return
        ns_rt = self._rt("v1", "Namespace")
        ns = self._peek(ns_rt, None, namespace or "")
        if ns is None:
            raise status_errors.namespace_not_found(namespace or "")
        if ns.obj["metadata"].get("deletionTimestamp"):
            raise status_errors.forbidden(
                rt,
                name,
                f'{rt.plural} "{name}" is forbidden: unable to create new content in namespace '
                f"{namespace} because it is being terminated",
            )

    # ---------------------------------------------------------------- write internals

    def _create(
        self,
        rt: ResourceType,
        body: Mapping[str, Any],
        *,
        namespace: str | None,
        field_manager: str | None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        obj = copy.deepcopy(dict(body))
        obj = self._check_type(rt, obj)
        meta = obj.setdefault("metadata", {})
        if rt.namespaced:
            body_ns = meta.get("namespace")
            if namespace and body_ns and body_ns != namespace:
                raise status_errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request"
                )
            meta["namespace"] = namespace or body_ns or "default"
        else:
            meta.pop("namespace", None)
        ns = meta.get("namespace")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = self._generate_name(rt, ns, str(meta["generateName"]))
        name = self._prepare_new(rt, obj, ns)
        key = self._key(rt, ns, name)
        if key in self._bucket(rt):
            raise status_errors.already_exists(rt, name)
        now = now_rfc3339()
        self._stamp_identity(meta, now)
        managers: dict[ManagerKey, ManagerEntry] = {}
        record_update(
            managers,
            {},
            obj,
            manager=field_manager or self.default_field_manager,
            subresource="",
            scope="all" if rt.create_keeps_status else self._scope(rt, ""),
            now=now,
            api_version=rt.api_version,
        )
        meta["managedFields"] = render_managed_fields(managers)
        if dry_run:
            return obj
        return self._store_new(rt, key, obj, managers)

    def _prepare_new(self, rt: ResourceType, obj: dict[str, Any], namespace: str | None) -> str:
        """Make a client's object a new stored object's body: server-owned metadata dropped,
        initial status, defaults; then validated. Returns its name."""
        meta = obj["metadata"]
        for k in (*_SERVER_META, "resourceVersion", "managedFields", "selfLink"):
            meta.pop(k, None)
        if rt.status_subresource and not rt.create_keeps_status:
            obj.pop("status", None)
            status = self._initial_status(rt)
            if status is not None:
                obj["status"] = status
        if rt.kind == "Namespace":
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        self._apply_defaults(rt, obj)
        self._validate(rt, obj)
        name = str(meta["name"])
        self._check_namespace(rt, namespace, name)
        return name

    @staticmethod
    def _stamp_identity(meta: dict[str, Any], now: str) -> None:
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now
        meta["generation"] = 1

    def _store_new(
        self,
        rt: ResourceType,
        key: tuple[str, str],
        obj: dict[str, Any],
        managers: dict[ManagerKey, ManagerEntry],
    ) -> dict[str, Any]:
        obj["metadata"]["resourceVersion"] = str(self._next_rv())
        self._store(rt, key, _Stored(obj, managers), None)
        self._emit("ADDED", rt, obj, None)
        if rt.kind == "CustomResourceDefinition":
            self._register_crd(obj)
        return obj

    def _initial_status(self, rt: ResourceType) -> dict[str, Any] | None:
        if rt.kind == "Pod" and rt.group == "":
            return {"phase": "Pending"}
        if rt.kind == "Namespace" and rt.group == "":
            return {"phase": "Active"}
        return None

    def _generate_name(self, rt: ResourceType, namespace: str | None, prefix: str) -> str:
        for _ in range(100):
            suffix = "".join(self._rng.choice(_GENERATE_ALPHABET) for _ in range(5))
            candidate = f"{prefix}{suffix}"
            if self._key(rt, namespace, candidate) not in self._bucket(rt):
                return candidate
        raise status_errors.ApiError(
            409, "AlreadyExists", f"could not generate a unique name from {prefix!r}"
        )

    def _store(
        self,
        rt: ResourceType,
        key: tuple[str, str],
        stored: _Stored,
        old: dict[str, Any] | None,
    ) -> None:
        self._bucket(rt)[key] = stored
        uid = str(stored.obj["metadata"]["uid"])
        self._by_uid[uid] = (rt, key)
        old_owners = _owner_uids(old) if old is not None else set()
        new_owners = _owner_uids(stored.obj)
        for owner in old_owners - new_owners:
            deps = self._dependents.get(owner)
            if deps is not None:
                deps.discard(uid)
                if not deps:
                    del self._dependents[owner]
        for owner in new_owners - old_owners:
            self._dependents.setdefault(owner, set()).add(uid)

    def _merge_server_metadata(self, current: Mapping[str, Any], new: dict[str, Any]) -> None:
        cur_meta = current["metadata"]
        meta = new.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise status_errors.bad_request("metadata must be an object")
        for k in (*_SERVER_META, "name", "namespace"):
            if k in cur_meta:
                meta[k] = cur_meta[k]
            else:
                meta.pop(k, None)
        meta["resourceVersion"] = cur_meta["resourceVersion"]
        meta.pop("managedFields", None)

    def _update(
        self,
        rt: ResourceType,
        body: Mapping[str, Any],
        *,
        namespace: str | None,
        name: str,
        field_manager: str | None,
        subresource: str = "",
        dry_run: bool = False,
    ) -> dict[str, Any]:
        self._check_subresource(rt, subresource)
        stored = self._lookup(rt, namespace, name)
        obj = copy.deepcopy(dict(body))
        obj = self._check_type(rt, obj)
        meta = obj.get("metadata") or {}
        if meta.get("name") not in (None, name):
            raise status_errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL "
                f"({name})"
            )
        if rt.namespaced and meta.get("namespace") not in (None, "", namespace):
            raise status_errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the "
                "request"
            )
        want_rv = meta.get("resourceVersion")
        if want_rv not in (None, "") and str(want_rv) != stored.obj["metadata"]["resourceVersion"]:
            raise status_errors.conflict(
                rt,
                name,
                "the object has been modified; please apply your changes to the latest version "
                "and try again",
            )
        new = self._compose(rt, stored.obj, obj, subresource)
        return self._commit(
            rt,
            stored,
            new,
            manager=field_manager or self.default_field_manager,
            subresource=subresource,
            dry_run=dry_run,
        )

    def _compose(
        self,
        rt: ResourceType,
        current: Mapping[str, Any],
        incoming: dict[str, Any],
        subresource: str,
    ) -> dict[str, Any]:
        """The object a write would store: status and server metadata come from the right side."""
        if subresource == "status":
            new = copy.deepcopy(dict(current))
            if "status" in incoming:
                new["status"] = incoming["status"]
            else:
                new.pop("status", None)
            return new
        new = incoming
        self._merge_server_metadata(current, new)
        if rt.status_subresource:
            if "status" in current:
                new["status"] = copy.deepcopy(current["status"])
            else:
                new.pop("status", None)
        self._apply_defaults(rt, new)
        return new

    def _check_subresource(self, rt: ResourceType, subresource: str) -> None:
        if subresource == "status" and not rt.status_subresource:
            raise status_errors.not_found(rt, f"{rt.plural}/status", what="")
        if subresource not in ("", "status"):
            raise status_errors.not_found(rt, subresource)

    def _commit(
        self,
        rt: ResourceType,
        stored: _Stored,
        new: dict[str, Any],
        *,
        manager: str,
        subresource: str,
        dry_run: bool,
        managers: dict[ManagerKey, ManagerEntry] | None = None,
    ) -> dict[str, Any]:
        """Write ``new`` over ``stored`` (no-op when nothing changed); return what is stored."""
        old = stored.obj
        if subresource != "status":
            self._validate(rt, new)
        now = now_rfc3339()
        if managers is None:
            managers = {
                k: ManagerEntry(set(v.paths), v.time, v.api_version)
                for k, v in stored.managers.items()
            }
            record_update(
                managers,
                old,
                new,
                manager=manager,
                subresource=subresource,
                scope=self._scope(rt, subresource),
                now=now,
                api_version=rt.api_version,
            )
        if _comparable(new) == _comparable(old) and _ownership(managers) == _ownership(
            stored.managers
        ):
            return old
        meta = new["metadata"]
        generation = int(old["metadata"].get("generation", 1))
        if _spec_part(new, rt) != _spec_part(old, rt):
            generation += 1
        meta["generation"] = generation
        meta["managedFields"] = render_managed_fields(managers)
        if dry_run:
            return new
        finishing = bool(meta.get("deletionTimestamp")) and not meta.get("finalizers")
        if finishing and rt.kind == "Namespace" and rt.group == "":
            finishing = self._namespace_empty(str(meta["name"]))
        meta["resourceVersion"] = str(self._next_rv())
        key = self._key(rt, meta.get("namespace"), str(meta["name"]))
        if finishing:
            meta.pop("finalizers", None)
            self._store(rt, key, _Stored(new, managers), old)
            self._remove(rt, key, new, bump=False)
            return new
        self._store(rt, key, _Stored(new, managers), old)
        self._emit("MODIFIED", rt, new, old)
        return new

    def _patch(
        self,
        rt: ResourceType,
        patch: Any,
        *,
        namespace: str | None,
        name: str,
        patch_type: PatchType,
        field_manager: str | None,
        subresource: str = "",
        dry_run: bool = False,
    ) -> dict[str, Any]:
        self._check_subresource(rt, subresource)
        stored = self._lookup(rt, namespace, name)
        current = stored.obj
        if patch_type == "merge":
            if not isinstance(patch, dict):
                raise status_errors.bad_request("a merge patch must be a JSON object")
            patched = merge_patch(current, patch)
        elif patch_type == "json":
            patched = json_patch(current, patch)
        elif patch_type == "strategic":
            if not rt.strategic_merge_allowed:
                raise status_errors.unsupported_media_type("application/strategic-merge-patch+json")
            if not isinstance(patch, dict):
                raise status_errors.bad_request("a strategic merge patch must be a JSON object")
            patched = strategic_merge_patch(current, patch)
        else:  # pragma: no cover - guarded by the type
            raise status_errors.bad_request(f"unknown patch type {patch_type!r}")
        if not isinstance(patched, dict):
            raise status_errors.bad_request("the patch did not produce an object")
        patched_meta = patched.get("metadata") or {}
        want_rv = patched_meta.get("resourceVersion")
        if want_rv not in (None, "") and str(want_rv) != current["metadata"]["resourceVersion"]:
            raise status_errors.conflict(
                rt,
                name,
                "the object has been modified; please apply your changes to the latest version "
                "and try again",
            )
        if patched_meta.get("name") != name:
            raise status_errors.bad_request("the name of the object cannot be changed by a patch")
        patched = self._check_type(rt, patched)
        new = self._compose(rt, current, patched, subresource)
        return self._commit(
            rt,
            stored,
            new,
            manager=field_manager or self.default_field_manager,
            subresource=subresource,
            dry_run=dry_run,
        )

    def _apply(
        self,
        rt: ResourceType,
        body: Mapping[str, Any],
        *,
        namespace: str | None,
        name: str,
        field_manager: str | None,
        force: bool,
        subresource: str = "",
        dry_run: bool = False,
    ) -> tuple[dict[str, Any], bool]:
        """Server-side apply; returns (object, created)."""
        if not field_manager:
            raise status_errors.bad_request(
                "PATCH requests must have a fieldManager when the content type is "
                "application/apply-patch+yaml"
            )
        self._check_subresource(rt, subresource)
        if not isinstance(body, Mapping):
            raise status_errors.bad_request("an apply configuration must be an object")
        config = copy.deepcopy(dict(body))
        if not config.get("apiVersion"):
            raise status_errors.bad_request("apiVersion must be set in an apply configuration")
        if not config.get("kind"):
            raise status_errors.bad_request("kind must be set in an apply configuration")
        config = self._check_type(rt, config)
        meta = config.get("metadata") or {}
        if meta.get("name") not in (None, name):
            raise status_errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL "
                f"({name})"
            )
        if rt.namespaced and meta.get("namespace") not in (None, "", namespace):
            raise status_errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the "
                "request"
            )
        stored = self._peek(rt, namespace, name)
        now = now_rfc3339()
        scope = self._scope(rt, subresource)
        if stored is None:
            if subresource:
                raise status_errors.not_found(rt, name)
            fresh: dict[ManagerKey, ManagerEntry] = {}
            result = apply_config(
                fresh,
                None,
                config,
                manager=field_manager,
                subresource="",
                scope=scope,
                force=force,
                now=now,
                api_version=rt.api_version,
            )
            obj = result.obj
            obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
            obj_meta = obj.setdefault("metadata", {})
            obj_meta["name"] = name
            if rt.namespaced:
                obj_meta["namespace"] = namespace
            return self._create_applied(rt, obj, fresh, namespace, dry_run=dry_run), True
        want_rv = meta.get("resourceVersion")
        if want_rv not in (None, "") and str(want_rv) != stored.obj["metadata"]["resourceVersion"]:
            raise status_errors.conflict(
                rt,
                name,
                "the object has been modified; please apply your changes to the latest version "
                "and try again",
            )
        managers = {
            k: ManagerEntry(set(v.paths), v.time, v.api_version) for k, v in stored.managers.items()
        }
        result = apply_config(
            managers,
            stored.obj,
            config,
            manager=field_manager,
            subresource=subresource,
            scope=scope,
            force=force,
            now=now,
            api_version=rt.api_version,
        )
        if result.conflicts and not force:
            raise status_errors.apply_conflict(
                rt, name, [(m, format_path(p)) for m, p in result.conflicts]
            )
        new = result.obj
        if subresource == "status":
            status = new.get("status")
            new = copy.deepcopy(stored.obj)
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
        else:
            self._merge_server_metadata(stored.obj, new)
            if rt.status_subresource:
                if "status" in stored.obj:
                    new["status"] = copy.deepcopy(stored.obj["status"])
                else:
                    new.pop("status", None)
            self._apply_defaults(rt, new)
        committed = self._commit(
            rt,
            stored,
            new,
            manager=field_manager,
            subresource=subresource,
            dry_run=dry_run,
            managers=managers,
        )
        return committed, False

    def _create_applied(
        self,
        rt: ResourceType,
        obj: dict[str, Any],
        managers: dict[ManagerKey, ManagerEntry],
        namespace: str | None,
        *,
        dry_run: bool,
    ) -> dict[str, Any]:
        meta = obj["metadata"]
        name = self._prepare_new(rt, obj, namespace)
        now = now_rfc3339()
        self._stamp_identity(meta, now)
        meta["managedFields"] = render_managed_fields(managers)
        if dry_run:
            return obj
        return self._store_new(rt, self._key(rt, namespace, name), obj, managers)

    # ---------------------------------------------------------------- deletion

    def _delete(
        self,
        rt: ResourceType,
        *,
        namespace: str | None,
        name: str,
        propagation: str | None = None,
        preconditions: Mapping[str, Any] | None = None,
        dry_run: bool = False,
    ) -> tuple[dict[str, Any], bool]:
        """Delete; returns (object, gone) where gone means it no longer exists."""
        stored = self._lookup(rt, namespace, name)
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
            self._orphan_dependents(uid)
        if rt.kind == "Namespace" and rt.group == "":
            return self._delete_namespace(stored, name)
        finalizers = list(meta.get("finalizers") or [])
        dependents = self._dependents.get(uid, set())
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
            committed = self._commit_deletion_marker(rt, stored, new)
            if "foregroundDeletion" in finalizers:
                for dep_uid in sorted(self._dependents.get(uid, set())):
                    located = self._by_uid.get(dep_uid)
                    if located is None:
                        continue
                    dep_rt, dep_key = located
                    if dep_key in self._bucket(dep_rt):
                        self._delete(
                            dep_rt,
                            namespace=dep_key[0] or None,
                            name=dep_key[1],
                            propagation="Foreground",
                        )
                self._check_foreground_owner(uid)
            current = self._by_uid.get(uid)
            if current is None:
                return committed, True
            return self._bucket(current[0])[current[1]].obj, False
        key = self._key(rt, namespace, name)
        deleted = self._remove(rt, key, obj, bump=True)
        return deleted, True

    def _commit_deletion_marker(
        self, rt: ResourceType, stored: _Stored, new: dict[str, Any]
    ) -> dict[str, Any]:
        meta = new["metadata"]
        meta["generation"] = int(stored.obj["metadata"].get("generation", 1)) + 1
        meta["resourceVersion"] = str(self._next_rv())
        meta["managedFields"] = render_managed_fields(stored.managers)
        key = self._key(rt, meta.get("namespace"), str(meta["name"]))
        managers = stored.managers
        self._store(rt, key, _Stored(new, managers), stored.obj)
        self._emit("MODIFIED", rt, new, stored.obj)
        return new

    def _remove(
        self, rt: ResourceType, key: tuple[str, str], obj: dict[str, Any], *, bump: bool
    ) -> dict[str, Any]:
        """Drop an object for good: DELETED event, then garbage collection and bookkeeping."""
        bucket = self._bucket(rt)
        stored = bucket.pop(key, None)
        if stored is None:
            return obj
        final = stored.obj
        if bump:
            final = dict(stored.obj)
            final["metadata"] = dict(stored.obj["metadata"])
            final["metadata"]["resourceVersion"] = str(self._next_rv())
        meta = final["metadata"]
        uid = str(meta["uid"])
        self._by_uid.pop(uid, None)
        for owner in _owner_uids(final):
            deps = self._dependents.get(owner)
            if deps is not None:
                deps.discard(uid)
                if not deps:
                    del self._dependents[owner]
        self._emit("DELETED", rt, final, stored.obj)
        self._collect_dependents(uid)
        for owner in _owner_uids(final):
            self._check_foreground_owner(owner)
        if rt.namespaced and key[0]:
            self._maybe_finish_namespace(key[0])
        if rt.kind == "CustomResourceDefinition":
            self._unregister_crd(final)
        return final

    def _collect_dependents(self, owner_uid: str) -> None:
        """Background garbage collection after ``owner_uid`` is gone."""
        for dep_uid in sorted(self._dependents.pop(owner_uid, set())):
            located = self._by_uid.get(dep_uid)
            if located is None:
                continue
            dep_rt, dep_key = located
            dep = self._bucket(dep_rt).get(dep_key)
            if dep is None:
                continue
            refs = dep.obj["metadata"].get("ownerReferences") or []
            alive = [r for r in refs if r.get("uid") in self._by_uid and r.get("uid") != owner_uid]
            if alive:
                self._rewrite_owner_refs(dep_rt, dep, alive)
            else:
                self._delete(
                    dep_rt, namespace=dep_key[0] or None, name=dep_key[1], propagation="Background"
                )

    def _rewrite_owner_refs(self, rt: ResourceType, stored: _Stored, refs: _Objects) -> None:
        new = copy.deepcopy(stored.obj)
        if refs:
            new["metadata"]["ownerReferences"] = refs
        else:
            new["metadata"].pop("ownerReferences", None)
        self._commit(
            rt,
            stored,
            new,
            manager="garbage-collector",
            subresource="",
            dry_run=False,
        )

    def _orphan_dependents(self, owner_uid: str) -> None:
        for dep_uid in sorted(self._dependents.get(owner_uid, set())):
            located = self._by_uid.get(dep_uid)
            if located is None:
                continue
            dep_rt, dep_key = located
            dep = self._bucket(dep_rt).get(dep_key)
            if dep is None:
                continue
            refs = [
                r
                for r in dep.obj["metadata"].get("ownerReferences") or []
                if r.get("uid") != owner_uid
            ]
            self._rewrite_owner_refs(dep_rt, dep, refs)

    def _check_foreground_owner(self, owner_uid: str) -> None:
        located = self._by_uid.get(owner_uid)
        if located is None:
            return
        rt, key = located
        stored = self._bucket(rt).get(key)
        if stored is None:
            return
        meta = stored.obj["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if "foregroundDeletion" not in finalizers or self._dependents.get(owner_uid):
            return
        new = copy.deepcopy(stored.obj)
        finalizers.remove("foregroundDeletion")
        if finalizers:
            new["metadata"]["finalizers"] = finalizers
        else:
            new["metadata"].pop("finalizers", None)
        self._commit(rt, stored, new, manager="garbage-collector", subresource="", dry_run=False)

    def _delete_namespace(self, stored: _Stored, name: str) -> tuple[dict[str, Any], bool]:
        rt = self._rt("v1", "Namespace")
        obj = stored.obj
        if not obj["metadata"].get("deletionTimestamp"):
            new = copy.deepcopy(obj)
            new["metadata"]["deletionTimestamp"] = now_rfc3339()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            new["status"] = {"phase": "Terminating"}
            obj = self._commit_deletion_marker(rt, stored, new)
            for other in list(self.registry):
                if not other.namespaced:
                    continue
                for s in self._iter_objects(other, name):
                    m = s.obj["metadata"]
                    if self._peek(other, name, str(m["name"])) is not None:
                        self._delete(other, namespace=name, name=str(m["name"]))
        self._maybe_finish_namespace(name)
        current = self._peek(rt, None, name)
        if current is None:
            return obj, True
        return current.obj, False

    def _namespace_empty(self, namespace: str) -> bool:
        return not any(
            other.namespaced and any(k[0] == namespace for k in self._bucket(other))
            for other in self.registry
        )

    def _maybe_finish_namespace(self, namespace: str) -> None:
        """Finish a terminating namespace once its content is gone (the namespace controller)."""
        rt = self._rt("v1", "Namespace")
        stored = self._peek(rt, None, namespace)
        if stored is None or not stored.obj["metadata"].get("deletionTimestamp"):
            return
        if not self._namespace_empty(namespace):
            return
        if stored.obj["metadata"].get("finalizers"):
            if (stored.obj.get("spec") or {}).get("finalizers"):
                new = copy.deepcopy(stored.obj)
                new["spec"]["finalizers"] = []
                self._commit(
                    rt, stored, new, manager="namespace-controller", subresource="", dry_run=False
                )
            return
        self._remove(rt, ("", namespace), stored.obj, bump=True)

    async def delete_collection(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> _Objects:
        rt = self._rt(api_version, kind)
        return copy.deepcopy(
            self._delete_collection(
                rt,
                namespace=self._ns(rt, namespace) if namespace else None,
                label_selector=label_selector,
                field_selector=field_selector,
            )
        )

    def _delete_collection(
        self,
        rt: ResourceType,
        *,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None,
        propagation: str | None = None,
    ) -> _Objects:
        matched = self.list_objects(
            rt, namespace=namespace, label_selector=label_selector, field_selector=field_selector
        ).items
        out: _Objects = []
        for obj in list(matched):
            meta = obj["metadata"]
            if self._peek(rt, meta.get("namespace"), str(meta["name"])) is None:
                continue
            result, _ = self._delete(
                rt, namespace=meta.get("namespace"), name=str(meta["name"]), propagation=propagation
            )
            out.append(result)
        return out

    # ---------------------------------------------------------------- scale subresource

    def get_scale(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        if not rt.scale_subresource:
            raise status_errors.not_found(rt, f"{name}/scale")
        obj = self._lookup(rt, namespace, name).obj
        meta = obj["metadata"]
        selector: Any = _get_path(obj, rt.scale_selector_path) if rt.scale_selector_path else None
        if isinstance(selector, dict):
            selector = selector_to_string(label_selector_from_object(selector))
        scale_meta = {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        }
        status: dict[str, Any] = {"replicas": _get_path(obj, rt.scale_status_replicas_path) or 0}
        if selector:
            status["selector"] = selector
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": scale_meta,
            "spec": {"replicas": _get_path(obj, rt.scale_replicas_path) or 0},
            "status": status,
        }

    def set_scale(
        self,
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
        stored = self._lookup(rt, namespace, name)
        if resource_version and resource_version != stored.obj["metadata"]["resourceVersion"]:
            raise status_errors.conflict(
                rt,
                name,
                "the object has been modified; please apply your changes to the latest version "
                "and try again",
            )
        new = copy.deepcopy(stored.obj)
        *parents, leaf = rt.scale_replicas_path.split(".")
        cur = new
        for part in parents:
            cur = cur.setdefault(part, {})
        cur[leaf] = int(replicas)
        self._commit(
            rt,
            stored,
            new,
            manager=field_manager or self.default_field_manager,
            subresource="scale",
            dry_run=False,
        )
        return self.get_scale(rt, namespace, name)

    # ---------------------------------------------------------------- CRDs

    def _register_crd(self, crd: Mapping[str, Any]) -> None:
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
            existing = self.registry.by_path(rt.group, rt.version, rt.plural)
            if existing is not None and existing.builtin is False and existing.required:
                # Keep the richer built-in description (validation) of well-known CRDs.
                continue
            self.registry.add(rt)

    def _unregister_crd(self, crd: Mapping[str, Any]) -> None:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        for version in spec.get("versions") or []:
            rt = self.registry.by_path(
                str(spec.get("group", "")), str(version.get("name")), str(names.get("plural", ""))
            )
            if rt is None:
                continue
            for s in self._iter_objects(rt, None):
                m = s.obj["metadata"]
                self._remove(
                    rt, self._key(rt, m.get("namespace"), str(m["name"])), s.obj, bump=True
                )
            self.registry.remove(rt.group, rt.version, rt.plural)


async def _run_callback(
    sub: Subscription, callback: Callable[[WatchEvent], Awaitable[None] | None]
) -> None:
    async for event in sub:
        try:
            result = callback(event)
            if inspect.isawaitable(result):
                await result
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("subscriber callback failed on %s %s", event.type, event.name)


def _owner_uids(obj: Mapping[str, Any] | None) -> set[str]:
    if not obj:
        return set()
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return {str(r["uid"]) for r in refs if isinstance(r, dict) and r.get("uid")}


def _json_path_to_dotted(path: str) -> str:
    return path.lstrip(".")


def _encode_continue(rv: int, last: tuple[str, str]) -> str:
    raw = json.dumps({"rv": rv, "ns": last[0], "name": last[1]}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()).decode())
        return int(data["rv"]), (str(data["ns"]), str(data["name"]))
    except (ValueError, KeyError, TypeError):
        raise status_errors.bad_request(f"invalid continue token {token!r}") from None
