"""Watch fan-out of one simulated cluster: the bounded event history and the subscribers.

Development/test emulator only: product code never imports ``modelfleet.sim``. In memory, on one
event loop; no I/O.

Every write makes one :class:`WatchEvent`. The hub keeps the last ``history_limit`` of them (for
watches that resume from a resourceVersion; older is 410 Expired) and offers each to every
subscriber. Subscribers share the event: HTTP watchers read the stored snapshot itself (it is
serialised once per event type and cached), in-process subscribers share one deep copy made the
first time one of them receives it, so a consumer cannot change the store through an event and
the fan-out costs one copy per event, not one per subscriber. Both treat events as read-only.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import json
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from modelfleet.sim.apiserver import status_errors
from modelfleet.sim.apiserver.registry import ResourceType

__all__ = ["EventType", "Subscription", "WatchEvent", "WatchHub"]

log = logging.getLogger(__name__)

EventType = Literal["ADDED", "MODIFIED", "DELETED"]


@dataclass
class WatchEvent:
    """One change. ``object`` is the stored snapshot: treat it as read-only."""

    type: EventType
    object: dict[str, Any]
    resource: ResourceType
    resource_version: int
    old_object: dict[str, Any] | None = None
    _encoded: dict[str, bytes] = field(default_factory=dict, repr=False, compare=False)
    _detached: WatchEvent | None = field(default=None, repr=False, compare=False)

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

    def detached(self) -> WatchEvent:
        """This event with objects no longer shared with the store: one copy, made on first use
        and shared by every in-process subscriber."""
        if self._detached is None:
            self._detached = WatchEvent(
                self.type,
                copy.deepcopy(self.object),
                self.resource,
                self.resource_version,
                copy.deepcopy(self.old_object),
            )
        return self._detached


_CLOSED = object()


class Subscription:
    """A stream of :class:`WatchEvent` for one subscriber.

    Iterate with ``async for event in sub`` (ends when the subscription is closed) or ``await
    sub.get()`` (``None`` once closed). A subscriber that falls more than ``maxsize`` events behind
    is closed with ``overflowed = True``, like a real apiserver dropping a slow watcher.
    """

    def __init__(
        self,
        hub: WatchHub,
        predicate: Callable[[WatchEvent], bool],
        *,
        maxsize: int,
        detach: bool,
    ) -> None:
        self._hub = hub
        self._predicate = predicate
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._maxsize = maxsize
        self._detach = detach
        self.closed = False
        self.overflowed = False
        self._task: asyncio.Task[None] | None = None

    def offer(self, event: WatchEvent) -> None:
        if self.closed or not self._predicate(event):
            return
        if self._maxsize and self._queue.qsize() >= self._maxsize:
            self.overflowed = True
            self.close()
            return
        self._queue.put_nowait(event.detached() if self._detach else event)

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

    def run_callback(
        self, callback: Callable[[WatchEvent], Awaitable[None] | None], *, name: str
    ) -> None:
        """Await ``callback`` for every event in order, in a task on the running loop, logging and
        skipping callback exceptions; :meth:`close` stops it."""
        self._task = asyncio.get_running_loop().create_task(
            _run_callback(self, callback), name=name
        )

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._hub.unsubscribe(self)
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


class WatchHub:
    """The bounded event history of one cluster and the subscribers its events go to."""

    def __init__(self, *, history_limit: int, queue_limit: int) -> None:
        self._history: deque[WatchEvent] = deque()
        self._history_limit = max(1, history_limit)
        self.floor = 0  # every event with resourceVersion > floor is still in history
        self._subscribers: list[Subscription] = []
        self._queue_limit = queue_limit

    def publish(self, event: WatchEvent) -> None:
        if len(self._history) >= self._history_limit:
            dropped = self._history.popleft()
            self.floor = dropped.resource_version
        self._history.append(event)
        for sub in list(self._subscribers):
            sub.offer(event)

    def since(self, resource_version: int) -> Iterator[WatchEvent]:
        """The events after ``resource_version`` (ApiError 410 Expired if some are gone)."""
        if resource_version < self.floor:
            too_old = f"too old resource version: {resource_version} ({self.floor + 1})"
            raise status_errors.expired(too_old)
        return (ev for ev in self._history if ev.resource_version > resource_version)

    def subscribe(
        self,
        predicate: Callable[[WatchEvent], bool],
        *,
        maxsize: int | None,
        detach: bool,
    ) -> Subscription:
        """A new subscriber to the events ``predicate`` accepts; ``detach`` for in-process
        consumers (see the module docstring)."""
        sub = Subscription(
            self,
            predicate,
            maxsize=self._queue_limit if maxsize is None else maxsize,
            detach=detach,
        )
        self._subscribers.append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with contextlib.suppress(ValueError):
            self._subscribers.remove(sub)

    def close_all(self) -> None:
        for sub in list(self._subscribers):
            sub.close()


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


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
