"""The HTTP side of a watch on a simulated cluster: replay, then live events as newline-delimited
JSON frames, selector transitions (an object leaving a selector is DELETED for that watcher),
bookmarks, timeouts, and the dark-cluster fault gate.

Development/test emulator only: product code never imports ``modelfleet.sim``. Writes to the
client's streaming response; reads the store's subscription (:mod:`.watch`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aiohttp import web

from modelfleet.sim.apiserver import status_errors
from modelfleet.sim.apiserver.registry import ResourceType
from modelfleet.sim.apiserver.request_info import RequestInfo, truthy
from modelfleet.sim.apiserver.selectors import (
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
)
from modelfleet.sim.apiserver.status_errors import ApiError
from modelfleet.sim.apiserver.watch import WatchEvent

if TYPE_CHECKING:
    from modelfleet.sim.apiserver.server import ServerSettings, SimCluster

__all__ = ["serve_watch"]


async def serve_watch(
    request: web.Request,
    cluster: SimCluster,
    rt: ResourceType,
    info: RequestInfo,
    settings: ServerSettings,
) -> web.StreamResponse:
    """Stream watch events as newline-delimited JSON until the timeout, the client leaves or the
    subscription is dropped; bookmarks when asked; 410 Expired as an ERROR frame."""
    query = request.query
    store = cluster.store
    lsel = parse_label_selector(query.get("labelSelector"))
    fsel = parse_field_selector(query.get("fieldSelector"), rt.plural)
    if info.name is not None:
        fsel = FieldSelector(
            (
                *fsel.requirements,
                *parse_field_selector(f"metadata.name={info.name}", rt.plural).requirements,
            )
        )
    timeout_raw = query.get("timeoutSeconds")
    try:
        timeout = float(timeout_raw) if timeout_raw else settings.default_watch_timeout_seconds
    except ValueError:
        raise status_errors.bad_request(f"invalid timeoutSeconds {timeout_raw!r}") from None
    bookmarks = truthy(query.get("allowWatchBookmarks"))
    send_initial = truthy(query.get("sendInitialEvents"))
    rv = query.get("resourceVersion")
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    try:
        initial, sub = store.open_watch(
            rt,
            namespace=info.namespace,
            resource_version=None if send_initial else rv,
        )
    except ApiError as err:
        if err.code != 410:
            raise
        await response.prepare(request)
        frame = {"type": "ERROR", "object": err.status}
        await response.write(json.dumps(frame).encode() + b"\n")
        await response.write_eof()
        return response
    try:
        await response.prepare(request)
        chunk = bytearray()
        for ev in initial:
            etype = _translate(ev, lsel, fsel)
            if etype is not None:
                chunk += ev.encode(etype)
        if send_initial and bookmarks:
            chunk += _bookmark(rt, store.resource_version, initial_end=True)
        if chunk:
            await response.write(bytes(chunk))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        interval = settings.bookmark_interval_seconds
        next_bookmark = loop.time() + interval
        while True:
            now = loop.time()
            if now >= deadline:
                break
            wait = min(deadline, next_bookmark) - now if bookmarks else deadline - now
            try:
                event = await asyncio.wait_for(sub.get(), timeout=max(wait, 0.0))
            except TimeoutError:
                if bookmarks and loop.time() >= next_bookmark:
                    if not await cluster.faults.dark_gate(request):
                        break
                    await response.write(_bookmark(rt, store.resource_version))
                    next_bookmark = loop.time() + interval
                continue
            if event is None:
                break
            if not await cluster.faults.dark_gate(request):
                break
            chunk = bytearray()
            while event is not None:
                etype = _translate(event, lsel, fsel)
                if etype is not None:
                    chunk += event.encode(etype)
                event = sub.get_nowait()
            if chunk:
                await response.write(bytes(chunk))
        with contextlib.suppress(ConnectionError):
            await response.write_eof()
    finally:
        sub.close()
    return response


def _bookmark(rt: ResourceType, rv: str, *, initial_end: bool = False) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": rv}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    frame = {
        "type": "BOOKMARK",
        "object": {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta},
    }
    return json.dumps(frame, separators=(",", ":")).encode() + b"\n"


def _translate(ev: WatchEvent, lsel: LabelSelector, fsel: FieldSelector) -> str | None:
    """The event type a filtered watcher sees (selector transitions become ADDED/DELETED)."""
    if lsel.empty and fsel.empty:
        return ev.type

    def matches(obj: Mapping[str, Any] | None) -> bool:
        if obj is None:
            return False
        labels = (obj.get("metadata") or {}).get("labels")
        return lsel.matches(labels) and fsel.matches(obj)

    now = matches(ev.object)
    if ev.type == "MODIFIED":
        before = matches(ev.old_object)
        if before and now:
            return "MODIFIED"
        if now:
            return "ADDED"
        if before:
            return "DELETED"
        return None
    return ev.type if now else None
