"""The management cluster as the controller sees it: list with a resourceVersion, watch from
one, write the status subresource, set finalizers under optimistic concurrency, and hold a
``coordination.k8s.io/v1`` Lease. Built on :class:`~modelfleet.adapters.kube_client.KubeCluster`
(the official ``kubernetes`` client; synchronous: the controller calls it from threads).

This module may touch: the ``kubernetes`` SDK and the network through it, the kubeconfig file it
is given. It may not: log or embed a credential in an exception, decide anything about what an
object means (the controller's pure functions do), or import workflows.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

from modelfleet.adapters.kube_client import FIELD_MANAGER, KubeCluster
from modelfleet.adapters.kube_errors import (
    KubeConflictError,
    KubeError,
    KubeGoneError,
    KubeNotFoundError,
    KubeUnavailableError,
    error_from_response,
    error_from_transport,
)

__all__ = [
    "KubeConflictError",
    "KubeError",
    "KubeGoneError",
    "KubeNotFoundError",
    "Listed",
    "ManagementCluster",
    "WatchEvent",
]

_MERGE_PATCH = "application/merge-patch+json"
LEASE_API = "coordination.k8s.io/v1"


@dataclass(frozen=True)
class Listed:
    """A whole list of one kind and the resourceVersion to watch from."""

    items: builtins.list[dict[str, Any]]
    resource_version: str


@dataclass(frozen=True)
class WatchEvent:
    """One watch event: ADDED, MODIFIED, DELETED or BOOKMARK, and the object."""

    type: str
    object: dict[str, Any]


class ManagementCluster(KubeCluster):
    """The cluster that holds modelfleet's custom resources (see the module docstring)."""

    def list_versioned(self, api_version: str, kind: str) -> Listed:
        """Every object of a kind in every namespace, with the list's resourceVersion."""
        res = self._resource(api_version, kind)
        items: builtins.list[dict[str, Any]] = []
        token: str | None = None
        while True:
            query: builtins.list[tuple[str, Any]] = [("limit", 500)]
            if token:
                query.append(("continue", token))
            _, data = self._request(f"list {kind}", "GET", res.path(None), query=query)
            for item in data.get("items") or []:
                items.append({"apiVersion": api_version, "kind": kind, **item})
            meta = data.get("metadata") or {}
            token = meta.get("continue") or None
            if not token:
                return Listed(items, str(meta.get("resourceVersion") or ""))

    def watch(
        self, api_version: str, kind: str, resource_version: str, *, timeout_seconds: int = 60
    ) -> Iterator[WatchEvent]:
        """The events of a kind after ``resource_version``, as they happen, until the server
        ends the watch (after ``timeout_seconds``). KubeGoneError when that version is too old
        (list again); other KubeErrors when the server fails or cannot be reached."""
        res = self._resource(api_version, kind)
        query: builtins.list[tuple[str, Any]] = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", timeout_seconds),
        ]
        operation = f"watch {kind} on {self.server}"
        try:
            request = self._client.param_serialize(
                "GET",
                res.path(None),
                query_params=query,
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
            )
            # A read timeout beyond the server's own end of the watch: a dark server is noticed.
            response = self._client.call_api(
                *request, _request_timeout=(self._timeout, timeout_seconds + 15)
            )
        except ApiException as exc:
            raise error_from_response(
                operation=operation,
                status=int(exc.status or 0),
                body=exc.body,
                headers=exc.headers,
                secrets=self._secrets(),
            ) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise error_from_transport(operation, exc) from None
        raw = response.response
        try:
            if not 200 <= int(response.status) <= 299:
                raise error_from_response(
                    operation=operation,
                    status=int(response.status),
                    body=raw.read(),
                    headers=dict(response.headers or {}),
                    secrets=self._secrets(),
                )
            yield from _events(raw, operation)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise error_from_transport(operation, exc) from None
        finally:
            raw.release_conn()

    def patch_status(
        self, api_version: str, kind: str, name: str, namespace: str | None, status: dict[str, Any]
    ) -> dict[str, Any]:
        """Merge ``status`` into the object's status subresource."""
        res = self._resource(api_version, kind)
        ns = namespace if res.namespaced else None
        _, data = self._request(
            f"write status of {kind} {name}",
            "PATCH",
            res.path(ns, name) + "/status",
            query=[("fieldManager", FIELD_MANAGER)],
            body={"status": status},
            content_type=_MERGE_PATCH,
        )
        return dict(data)

    def set_finalizers(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        finalizers: builtins.list[str],
        resource_version: str,
    ) -> dict[str, Any]:
        """Replace the object's finalizers if it is still at ``resource_version``
        (KubeConflictError otherwise: read it again and decide again)."""
        res = self._resource(api_version, kind)
        ns = namespace if res.namespaced else None
        _, data = self._request(
            f"set finalizers of {kind} {name}",
            "PATCH",
            res.path(ns, name),
            query=[("fieldManager", FIELD_MANAGER)],
            body={"metadata": {"finalizers": finalizers, "resourceVersion": resource_version}},
            content_type=_MERGE_PATCH,
        )
        return dict(data)

    def apply_as(self, manifest: dict[str, Any], field_manager: str) -> str:
        """Server-side apply ``manifest`` as ``field_manager`` (with force: this writer's fields
        are its own); returns ``created``, ``configured`` or ``unchanged``, as kubectl says."""
        api_version, kind = str(manifest["apiVersion"]), str(manifest["kind"])
        metadata = manifest.get("metadata") or {}
        res = self._resource(api_version, kind)
        ns = (metadata.get("namespace") or "default") if res.namespaced else None
        name = str(metadata.get("name"))
        before = self.get(api_version, kind, name, ns)
        _, data = self._request(
            f"apply {kind} {name}",
            "PATCH",
            res.path(ns, name),
            query=[("fieldManager", field_manager), ("force", "true")],
            body=manifest,
            content_type="application/apply-patch+yaml",
            apply=True,
        )
        if before is None:
            return "created"
        old = (before.get("metadata") or {}).get("resourceVersion")
        return (
            "unchanged"
            if old == (data.get("metadata") or {}).get("resourceVersion")
            else "configured"
        )

    def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Create an object (KubeConflictError when it exists)."""
        metadata = manifest.get("metadata") or {}
        res = self._resource(str(manifest["apiVersion"]), str(manifest["kind"]))
        ns = metadata.get("namespace") if res.namespaced else None
        _, data = self._request(
            f"create {manifest['kind']} {metadata.get('name')}",
            "POST",
            res.path(ns),
            query=[("fieldManager", FIELD_MANAGER)],
            body=manifest,
        )
        return dict(data)

    def replace(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Replace an object; its ``metadata.resourceVersion`` must still be current
        (KubeConflictError otherwise)."""
        metadata = manifest.get("metadata") or {}
        res = self._resource(str(manifest["apiVersion"]), str(manifest["kind"]))
        ns = metadata.get("namespace") if res.namespaced else None
        _, data = self._request(
            f"replace {manifest['kind']} {metadata.get('name')}",
            "PUT",
            res.path(ns, str(metadata.get("name"))),
            query=[("fieldManager", FIELD_MANAGER)],
            body=manifest,
        )
        return dict(data)


def _events(raw: Any, operation: str) -> Iterator[WatchEvent]:
    buffer = b""
    for chunk in raw.stream(4096, decode_content=True):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            event = _event(line, operation)
            if event is not None:
                yield event
    event = _event(buffer, operation)
    if event is not None:
        yield event


def _event(line: bytes, operation: str) -> WatchEvent | None:
    if not line.strip():
        return None
    try:
        data = json.loads(line)
    except ValueError:
        raise KubeUnavailableError(
            f"{operation}: a watch event was not JSON", reason="BadResponse"
        ) from None
    kind = str(data.get("type") or "")
    obj = data.get("object") or {}
    if kind == "ERROR":
        code = int(obj.get("code") or 500)
        raise error_from_response(
            operation=operation, status=code, body=json.dumps(obj), headers=None
        )
    return WatchEvent(kind, dict(obj))
