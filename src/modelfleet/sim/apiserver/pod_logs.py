"""Pod logs: the per-cluster :class:`PodLogBook` the kubelet (start-up and crash lines) and the
serving engines (requests served, through :meth:`PodLogBook.append`) write container lines to,
and the ``pods/log`` subresource that reads them (``container``, ``tailLines``, ``timestamps``,
``previous``, ``limitBytes``, ``follow``), with the real server's errors for a missing container
name and a container that has not started.

Development/test emulator only: product code never imports ``modelfleet.sim``. Lines live in
memory, bounded per container; ``follow`` streams over the open HTTP response until the pod is
gone, its container restarts, or the client leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aiohttp import web

from modelfleet.sim.apiserver import status_errors
from modelfleet.sim.apiserver.status_errors import ApiError

if TYPE_CHECKING:
    from modelfleet.sim.apiserver.store import ClusterStore

__all__ = ["PodLogBook", "serve_pod_log"]

_LINES_PER_CONTAINER = 2000
_FOLLOW_POLL_SECONDS = 1.0
# (namespace, pod name, container)
LogKey = tuple[str, str, str]


class _ContainerLog:
    def __init__(self, uid: str) -> None:
        self.uid = uid
        self.lines: deque[tuple[str, str]] = deque(maxlen=_LINES_PER_CONTAINER)
        self.previous: list[tuple[str, str]] = []


class PodLogBook:
    """Container log lines of one cluster's pods, by namespace, pod and container."""

    def __init__(self) -> None:
        self._logs: dict[LogKey, _ContainerLog] = {}
        self.changed = asyncio.Event()

    def append(self, pod: Mapping[str, Any], container: str, lines: Iterable[str]) -> None:
        """Add ``lines`` to ``container`` of ``pod`` (a new pod uid starts a new log)."""
        meta = pod.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")), container)
        uid = str(meta.get("uid", ""))
        log = self._logs.get(key)
        if log is None or log.uid != uid:
            log = self._logs[key] = _ContainerLog(uid)
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        log.lines.extend((stamp, line) for line in lines)
        self.changed.set()
        self.changed = asyncio.Event()

    def terminated(self, pod: Mapping[str, Any], container: str) -> None:
        """The container exited: its lines are also the ``previous`` (last terminated) log."""
        log = self._log(pod, container)
        if log is not None:
            log.previous = list(log.lines)

    def new_run(self, pod: Mapping[str, Any], container: str) -> None:
        """The container started again: the current log starts empty."""
        log = self._log(pod, container)
        if log is not None:
            log.lines.clear()

    def _log(self, pod: Mapping[str, Any], container: str) -> _ContainerLog | None:
        meta = pod.get("metadata") or {}
        log = self._logs.get((str(meta.get("namespace", "")), str(meta.get("name", "")), container))
        return log if log is not None and log.uid == str(meta.get("uid", "")) else None

    def forget(self, namespace: str, name: str) -> None:
        for key in [k for k in self._logs if k[0] == namespace and k[1] == name]:
            del self._logs[key]

    def lines(
        self, namespace: str, name: str, container: str, uid: str, *, previous: bool = False
    ) -> list[tuple[str, str]]:
        log = self._logs.get((namespace, name, container))
        if log is None or log.uid != uid:
            return []
        return list(log.previous if previous else log.lines)


def _container_name(pod: Mapping[str, Any], requested: str | None) -> str:
    meta = pod.get("metadata") or {}
    names = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or []]
    if requested:
        init = [str(c.get("name")) for c in (pod.get("spec") or {}).get("initContainers") or []]
        if requested not in names + init:
            raise status_errors.bad_request(
                f"container {requested} is not valid for pod {meta.get('name')}"
            )
        return requested
    if len(names) == 1:
        return names[0]
    raise status_errors.bad_request(
        f"a container name must be specified for pod {meta.get('name')}, "
        f"choose one of: [{' '.join(names)}]"
    )


def _check_started(pod: Mapping[str, Any], container: str, *, previous: bool) -> None:
    meta = pod.get("metadata") or {}
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") != container:
            continue
        state = cs.get("state") or {}
        if previous and not cs.get("restartCount"):
            raise status_errors.bad_request(
                f'previous terminated container "{container}" in pod "{meta.get("name")}" not found'
            )
        waiting = state.get("waiting")
        if waiting and not previous and not cs.get("restartCount"):
            raise status_errors.bad_request(
                f'container "{container}" in pod "{meta.get("name")}" is waiting to start: '
                f"{waiting.get('reason', 'ContainerCreating')}"
            )
        return
    raise status_errors.bad_request(
        f'container "{container}" in pod "{meta.get("name")}" is waiting to start: '
        "ContainerCreating"
    )


def _int_param(query: Mapping[str, str], name: str) -> int | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise status_errors.bad_request(f"invalid {name} {raw!r}") from None
    if value < 0:
        raise status_errors.bad_request(f"{name}: must be greater than or equal to 0")
    return value


def _render(lines: Iterable[tuple[str, str]], timestamps: bool) -> bytes:
    return "".join(f"{ts} {line}\n" if timestamps else f"{line}\n" for ts, line in lines).encode()


async def serve_pod_log(
    request: web.Request, store: ClusterStore, namespace: str, name: str
) -> web.StreamResponse:
    """``GET .../pods/<name>/log``: the container's lines as text/plain, or a stream."""
    if request.method != "GET":
        raise status_errors.method_not_allowed(request.method, request.path)
    query = request.query
    pod = store.get_object(store.resource_type("v1", "Pod"), namespace, name)
    container = _container_name(pod, query.get("container"))
    previous = query.get("previous", "").lower() == "true"
    timestamps = query.get("timestamps", "").lower() == "true"
    _check_started(pod, container, previous=previous)
    tail = _int_param(query, "tailLines")
    limit = _int_param(query, "limitBytes")
    uid = str(pod["metadata"].get("uid", ""))
    book = store.pod_logs
    lines = book.lines(namespace, name, container, uid, previous=previous)
    if tail is not None:
        lines = lines[len(lines) - tail :] if tail else []
    body = _render(lines, timestamps)
    if limit is not None:
        body = body[:limit]
    if query.get("follow", "").lower() != "true" or previous:
        return web.Response(body=body, content_type="text/plain")
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await response.prepare(request)
    await response.write(body)
    sent = len(book.lines(namespace, name, container, uid))
    while True:
        changed = book.changed
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), _FOLLOW_POLL_SECONDS)
        try:
            store.get_object(store.resource_type("v1", "Pod"), namespace, name)
        except ApiError:
            break
        current = book.lines(namespace, name, container, uid)
        if len(current) < sent:
            break  # the container restarted; `kubectl logs -f` ends there too
        if len(current) > sent:
            await response.write(_render(current[sent:], timestamps))
            sent = len(current)
    await response.write_eof()
    return response
