"""Access to one Kubernetes cluster through the official ``kubernetes`` client (synchronous;
activities run it on a thread pool).

This module may touch: the ``kubernetes`` SDK (adapters are the only modules that import SDKs),
the network through it, and the kubeconfig file it is given. It may not: use the SDK's global
default configuration, write the kubeconfig back, log or embed any credential in an exception,
or import workflows or activities.

Every kind, built-in or CRD, goes through one generic path: the SDK's ``ApiClient`` (auth, TLS,
proxies, exec plugins from the kubeconfig) plus a small discovery cache that maps
``(apiVersion, kind)`` to the REST path. ``kubernetes.dynamic.DynamicClient`` would do the same,
but it runs discovery eagerly in its constructor (I/O before the first call, and a failure there
for a dark cluster) and shares an on-disk cache in the temp directory keyed only by server URL;
neither suits a long-lived worker talking to many clusters.

The one module over 500 lines (issue 21): the generic path and the calls built on it (apply,
delete, list, scan, logs) share the discovery cache and the error translation, and splitting
them would spread one request's story over several files.
"""

from __future__ import annotations

import builtins
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import urllib3.exceptions
from kubernetes.client import Configuration
from kubernetes.client.exceptions import ApiException
from kubernetes.config import ConfigException, new_client_from_config

from modelfleet.adapters.kube_discovery import ApiResource, GroupVersion, group_version_path
from modelfleet.adapters.kube_errors import (
    KubeConflictError,
    KubeError,
    KubeInvalidError,
    KubeMisconfiguredError,
    KubeUnavailableError,
    KubeUnknownKindError,
    PermanentKubeError,
    RetryableKubeError,
    error_from_response,
    error_from_transport,
)
from modelfleet.adapters.kube_nodes import NodeInfo, node_info
from modelfleet.adapters.kube_readiness import (
    Readiness,
    evaluate,
    is_workload,
    pod_selector,
)
from modelfleet.rendering.readiness import ReadinessRule

__all__ = [
    "FIELD_MANAGER",
    "KubeCluster",
    "KubeError",
    "NodeInfo",
    "PermanentKubeError",
    "Readiness",
    "RetryableKubeError",
]

FIELD_MANAGER = "modelfleet"
_APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
_PROPAGATIONS = frozenset({"Background", "Foreground", "Orphan"})
# Large enough that a list is one request on most clusters, small enough to bound one response.
_PAGE_SIZE = 500
_DEFAULT_NAMESPACE = "default"

# The SDK is only partly annotated; its client is handled as Any behind this module's typed API.
_new_client: Callable[..., Any] = new_client_from_config


def _safe_server(host: str) -> str:
    """The server URL without any userinfo, fit for messages."""
    parts = urlsplit(host)
    netloc = parts.hostname or ""
    if ":" in netloc:
        netloc = f"[{netloc}]"  # IPv6 literal
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _identity(kind: str, name: str, namespace: str | None) -> str:
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


class KubeCluster:
    """One cluster, addressed by a kubeconfig file resolved on the worker.

    Construction reads the kubeconfig but does no network I/O. Thread-safe: the connection pool
    and the discovery cache may be shared by concurrent activities.
    """

    def __init__(
        self,
        kubeconfig: str | os.PathLike[str],
        *,
        request_timeout: float = 15.0,
        discovery_ttl: float = 30.0,
    ) -> None:
        self._kubeconfig = os.fspath(kubeconfig)
        self._timeout = request_timeout
        self._discovery_ttl = discovery_ttl
        configuration = Configuration()
        # Retries are the caller's decision (Temporal retry policies with backoff); urllib3's
        # immediate retries would only multiply the load on a struggling server.
        configuration.retries = False
        try:
            self._client: Any = _new_client(
                config_file=self._kubeconfig,
                persist_config=False,
                client_configuration=configuration,
            )
        except (ConfigException, OSError, ValueError, TypeError, KeyError) as exc:
            # The loader's messages can quote kubeconfig content; name the file and the class only.
            raise KubeMisconfiguredError(
                f"cannot load kubeconfig {self._kubeconfig}: {type(exc).__name__}",
                reason="InvalidKubeconfig",
            ) from None
        self.server = _safe_server(str(self._client.configuration.host))
        self._lock = threading.Lock()
        self._discovery: dict[str, GroupVersion] = {}

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> KubeCluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"KubeCluster({self.server})"

    # -- transport -------------------------------------------------------------------------

    def _secrets(self) -> builtins.list[str]:
        cfg = self._client.configuration
        values = [str(v) for v in (cfg.api_key or {}).values() if v]
        values += [str(v) for v in (cfg.password,) if v]
        # "Bearer <token>": the bare token too, in case a server echoes it without the prefix.
        return values + [v.split(" ", 1)[1] for v in values if " " in v]

    def _request(
        self,
        operation: str,
        method: str,
        path: str,
        *,
        query: builtins.list[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        apply: bool = False,
        absent_ok: bool = False,
        text: bool = False,
    ) -> tuple[int, Any]:
        """(status, decoded JSON) of a 2xx response, or of a 404 when ``absent_ok``; any other
        outcome raises KubeError. With ``text`` the body is returned as text (pod logs)."""
        accept = "text/plain, application/json" if text else "application/json"
        headers = {"Accept": accept, "Content-Type": content_type}
        try:
            request = self._client.param_serialize(
                method,
                path,
                query_params=query or [],
                header_params=headers,
                # A dict: the REST layer serialises it as JSON for JSON and YAML content types
                # alike (JSON is YAML), so apply bodies need no YAML encoder.
                body=body,
                auth_settings=["BearerToken"],
            )
            response = self._client.call_api(*request, _request_timeout=self._timeout)
            data = response.read()
        except ApiException as exc:
            # The REST layer raises status-0 ApiExceptions for TLS failures before any response.
            if exc.status:
                raise error_from_response(
                    operation=f"{operation} on {self.server}",
                    status=int(exc.status),
                    body=exc.body,
                    headers=exc.headers,
                    apply=apply,
                    secrets=self._secrets(),
                ) from None
            raise KubeMisconfiguredError(
                f"{operation} on {self.server}: TLS or client error before a response",
                reason="TLSError",
            ) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise error_from_transport(f"{operation} on {self.server}", exc) from None
        except ConfigException as exc:
            # Raised while refreshing credentials (an exec plugin or auth provider failing). That
            # is often transient (a metadata server, an identity endpoint), and a plugin that is
            # truly missing still surfaces on every attempt. The class only: the loader's
            # messages may quote the plugin's output.
            raise KubeUnavailableError(
                f"{operation} on {self.server}: refreshing credentials failed "
                f"({type(exc).__name__})",
                reason="CredentialsUnavailable",
            ) from None
        status = int(response.status)
        if text and 200 <= status <= 299:
            return status, data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        if 200 <= status <= 299 or (status == 404 and absent_ok):
            try:
                decoded = json.loads(data) if data else {}
            except ValueError:
                if status == 404:
                    decoded = {}
                else:
                    raise KubeUnavailableError(
                        f"{operation} on {self.server}: the response was not JSON",
                        status=status,
                        reason="BadResponse",
                    ) from None
            return status, decoded
        raise error_from_response(
            operation=f"{operation} on {self.server}",
            status=status,
            body=data,
            headers=dict(response.headers or {}),
            apply=apply,
            secrets=self._secrets(),
        )

    # -- discovery -------------------------------------------------------------------------

    def _fetch_group_version(self, api_version: str) -> GroupVersion:
        status, data = self._request(
            f"discover {api_version}", "GET", group_version_path(api_version), absent_ok=True
        )
        kinds: dict[str, ApiResource] = {}
        if status != 404:
            for entry in data.get("resources") or []:
                name = str(entry.get("name", ""))
                kind = entry.get("kind")
                if not name or "/" in name or not isinstance(kind, str):
                    continue  # subresources (pods/status, deployments/scale)
                kinds[kind] = ApiResource(api_version, kind, name, bool(entry.get("namespaced")))
        return GroupVersion(fetched_at=time.monotonic(), kinds=kinds)

    def _resource(self, api_version: str, kind: str) -> ApiResource:
        now = time.monotonic()
        with self._lock:
            cached = self._discovery.get(api_version)
        if cached is not None and now - cached.fetched_at < self._discovery_ttl:
            found = cached.kinds.get(kind)
            if found is not None:
                return found
        # A miss may be a CRD installed since the last look, so it always refreshes once.
        fresh = self._fetch_group_version(api_version)
        with self._lock:
            self._discovery[api_version] = fresh
        found = fresh.kinds.get(kind)
        if found is None:
            raise KubeUnknownKindError(
                f"{self.server} does not serve {kind} in {api_version} (is its CRD installed?)",
                status=404,
                reason="UnknownKind",
            )
        return found

    def _namespace_for(self, res: ApiResource, namespace: str | None) -> str | None:
        if not res.namespaced:
            return None
        return namespace or _DEFAULT_NAMESPACE

    # -- public API ------------------------------------------------------------------------

    def serves(self, api_version: str, kind: str) -> bool:
        """Whether discovery lists ``kind`` in ``api_version`` (a miss always looks afresh)."""
        try:
            self._resource(api_version, kind)
        except KubeUnknownKindError:
            return False
        return True

    def server_version(self) -> str:
        """The server's ``gitVersion``, e.g. ``v1.35.0``."""
        _, data = self._request("get version", "GET", "/version")
        return str(data.get("gitVersion") or "")

    def apply(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply ``manifest`` as field manager ``modelfleet`` with force; returns the
        object as stored. Re-applying an unchanged manifest changes nothing on the server."""
        api_version = manifest.get("apiVersion")
        kind = manifest.get("kind")
        metadata = manifest.get("metadata") or {}
        name = metadata.get("name")
        if not isinstance(api_version, str) or not isinstance(kind, str) or not name:
            raise KubeInvalidError(
                "apply: the manifest needs apiVersion, kind and metadata.name",
                reason="Invalid",
            )
        res = self._resource(api_version, kind)
        namespace = self._namespace_for(res, metadata.get("namespace"))
        if namespace is not None and metadata.get("namespace") != namespace:
            manifest = {**manifest, "metadata": {**metadata, "namespace": namespace}}
        _, data = self._request(
            f"apply {_identity(kind, str(name), namespace)}",
            "PATCH",
            res.path(namespace, str(name)),
            query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
            body=manifest,
            content_type=_APPLY_CONTENT_TYPE,
            apply=True,
        )
        return dict(data)

    def ensure_namespace(self, name: str) -> bool:
        """Create Namespace ``name`` when it does not exist (True when this call created it).

        For writers that only need the namespace to be there: unlike ``apply`` it claims no
        field of it, so it never removes the labels another modelfleet writer applied to it
        (server-side apply drops what the same field manager applied before and applies no
        more, and a replica would read that as the namespace changed outside modelfleet)."""
        if self.get("v1", "Namespace", name) is not None:
            return False
        res = self._resource("v1", "Namespace")
        try:
            self._request(
                f"create {_identity('Namespace', name, None)}",
                "POST",
                res.path(None),
                query=[("fieldManager", FIELD_MANAGER)],
                body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
            )
        except KubeConflictError:
            return False  # created meanwhile by someone else
        return True

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        res = self._resource(api_version, kind)
        ns = self._namespace_for(res, namespace)
        status, data = self._request(
            f"get {_identity(kind, name, ns)}", "GET", res.path(ns, name), absent_ok=True
        )
        if status == 404:
            return None
        return dict(data)

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> builtins.list[dict[str, Any]]:
        """Objects of a kind (all namespaces when ``namespace`` is None), optionally filtered by
        equality on ``labels``. Pages through large lists transparently."""
        res = self._resource(api_version, kind)
        selector = ",".join(f"{k}={v}" for k, v in sorted((labels or {}).items())) or None
        return self._list(res, namespace if res.namespaced else None, selector)

    def _list(
        self, res: ApiResource, namespace: str | None, selector: str | None
    ) -> builtins.list[dict[str, Any]]:
        items: builtins.list[dict[str, Any]] = []
        token: str | None = None
        where = f"{res.kind} in {namespace}" if namespace else res.kind
        while True:
            query: builtins.list[tuple[str, Any]] = [("limit", _PAGE_SIZE)]
            if selector:
                query.append(("labelSelector", selector))
            if token:
                query.append(("continue", token))
            status, data = self._request(
                f"list {where}", "GET", res.path(namespace), query=query, absent_ok=True
            )
            if status == 404:
                # The namespace does not exist (or the type vanished): nothing to list.
                return items
            for item in data.get("items") or []:
                # List items omit apiVersion/kind; restore them so callers can re-apply them.
                items.append({"apiVersion": res.api_version, "kind": res.kind, **item})
            token = (data.get("metadata") or {}).get("continue") or None
            if not token:
                return items

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str = "Background",
    ) -> bool:
        """Delete an object; False when it was already absent (not an error)."""
        if propagation not in _PROPAGATIONS:
            raise ValueError(f"propagation must be one of {sorted(_PROPAGATIONS)}")
        res = self._resource(api_version, kind)
        ns = self._namespace_for(res, namespace)
        status, _ = self._request(
            f"delete {_identity(kind, name, ns)}",
            "DELETE",
            res.path(ns, name),
            query=[("propagationPolicy", propagation)],
            absent_ok=True,
        )
        return status != 404

    def pod_log(
        self, name: str, namespace: str, *, container: str | None = None, tail_lines: int = 20
    ) -> str:
        """The last ``tail_lines`` lines a pod's container printed ("" when it has none yet)."""
        res = self._resource("v1", "Pod")
        query: builtins.list[tuple[str, Any]] = [("tailLines", tail_lines)]
        if container:
            query.append(("container", container))
        try:
            status, text = self._request(
                f"read log of {_identity('Pod', name, namespace)}",
                "GET",
                res.path(namespace, name) + "/log",
                query=query,
                absent_ok=True,
                text=True,
            )
        except KubeInvalidError as exc:
            if exc.status == 400:
                return ""  # the container has not started yet
            raise
        return str(text) if status != 404 else ""

    def readiness(self, rule: ReadinessRule) -> Readiness:
        """Whether the rule's condition is True; if not, why, in the pods' words."""
        obj = self.get(rule.api_version, rule.kind, rule.name, rule.namespace)
        verdict = evaluate(rule, obj)
        if verdict.ready or obj is None or not is_workload(rule.api_version, rule.kind):
            return verdict
        selector = pod_selector(obj)
        if selector is None:
            return verdict
        namespace = (obj.get("metadata") or {}).get("namespace") or rule.namespace
        pods = self._list(self._resource("v1", "Pod"), namespace, selector)
        return evaluate(rule, obj, pods)

    def nodes(self) -> builtins.list[NodeInfo]:
        """Every node, with its modelfleet pool (from the ``modelfleet.dev/pool`` label)."""
        return sorted((node_info(n) for n in self.list("v1", "Node")), key=lambda n: n.name)

    def resource_slices(self) -> builtins.list[dict[str, Any]]:
        """Every ``resource.k8s.io/v1`` ResourceSlice (the devices DRA drivers publish)."""
        return self.list("resource.k8s.io/v1", "ResourceSlice")

    def can_i(self, verb: str, group: str, resource: str) -> tuple[bool, str]:
        """A SelfSubjectAccessReview (``kubectl auth can-i VERB RESOURCE -A``): whether this
        client may ``verb`` ``resource`` in every namespace, and the server's reason."""
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": verb, "group": group, "resource": resource}},
        }
        where = f"{resource}.{group}" if group else resource
        _, data = self._request(
            f"review access to {verb} {where}",
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            body=review,
        )
        status = data.get("status") or {}
        return bool(status.get("allowed")), str(status.get("reason") or "")
