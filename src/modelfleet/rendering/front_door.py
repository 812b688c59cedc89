"""The fleet's front door for one ModelService: which endpoints it selects, their normalised
weights, and the objects that route to them on the gateway cluster — a selectorless Service and
an EndpointSlice per backend (so any endpoint, on any cluster or outside the fleet, is a plain
Gateway API backend) and one HTTPRoute at ``/<namespace>/<service>/`` with a weighted backendRef
per endpoint, each rewriting to that endpoint's own path.

Between probes the gateway itself contains a failing endpoint: an Envoy Gateway
``BackendTrafficPolicy`` on the route configures its passive health check (outlier detection:
an endpoint answering 5xx or refusing connections is ejected for a growing back-off) and retries
(a request that failed before any byte reached the caller goes again to another endpoint).

Pure: pydantic records in, dicts out. Health is decided elsewhere (probes); this module only
takes the set of endpoints that are in rotation.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import reduce
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field

from modelfleet.api.meta import Model
from modelfleet.api.naming import LABEL_MANAGED_BY, child_name, workload_namespace
from modelfleet.api.services import OutlierDetection, ServiceEndpoint, ServiceRetries
from modelfleet.rendering.namespace import namespace_manifest

__all__ = [
    "EndpointRecord",
    "FrontDoor",
    "api_keys_secret_name",
    "containment_summary",
    "distribute_weights",
    "front_door_route",
    "provider_token_secret_name",
    "provider_tokens",
    "render_front_door",
    "select_endpoints",
    "service_path",
    "traffic_policy",
]

MAX_WEIGHT = 1_000_000
ROUTE_API_VERSION = "gateway.networking.k8s.io/v1"
POLICY_API_VERSION = "gateway.envoyproxy.io/v1alpha1"
POLICY_KIND = "BackendTrafficPolicy"
# Envoy's back-off between retries: fully jittered from this base, capped at ten times it.
RETRY_BASE_INTERVAL = "25ms"
SERVICE_LABEL = "modelfleet.dev/service"
MANAGER = "modelfleet"


class EndpointRecord(Model):
    """What the fleet knows of one ModelEndpoint (generated or user-authored)."""

    namespace: str
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    url: str
    rewrite_path: str = "/"
    # Set for endpoints a replica published; None for user-authored ones.
    replica: str | None = None
    # The name of the secret holding the provider's key (resolved by the worker), if any.
    auth_secret: str | None = None
    # When the endpoint directory first recorded it (set by the directory, kept on re-puts and
    # across its continue-as-new; None from publishers and older payloads).
    created: datetime | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class FrontDoor(Model):
    """Where the front door lives: the gateway cluster and its Gateway."""

    cluster: str
    gateway_name: str
    gateway_namespace: str


def service_path(namespace: str, service: str) -> str:
    return f"/{namespace}/{service}/"


def api_keys_secret_name(service: str) -> str:
    return child_name("ms", service, "api-keys")


def provider_token_secret_name(service: str, endpoint: EndpointRecord) -> str:
    """The Secret on the gateway cluster holding an external endpoint's provider key."""
    return child_name("ms", service, endpoint.name, "token")


def provider_tokens(
    service: str, weighted: Mapping[str, int], endpoints: Sequence[EndpointRecord]
) -> dict[str, str]:
    """Secret object name -> the worker-side secret it is filled from, for every endpoint in
    rotation that has a provider key."""
    return {
        provider_token_secret_name(service, e): e.auth_secret
        for e in endpoints
        if e.key in weighted and e.auth_secret
    }


def select_endpoints(
    entries: Sequence[ServiceEndpoint], endpoints: Sequence[EndpointRecord]
) -> list[list[EndpointRecord]]:
    """The endpoints each entry selects (equality on every matchLabel), in name order. An
    endpoint matched by several entries belongs to the first that matches it."""
    taken: set[str] = set()
    groups: list[list[EndpointRecord]] = []
    for entry in entries:
        wanted = entry.selector.match_labels
        group = [
            e
            for e in sorted(endpoints, key=lambda e: e.key)
            if e.key not in taken and all(e.labels.get(k) == v for k, v in wanted.items())
        ]
        taken.update(e.key for e in group)
        groups.append(group)
    return groups


def distribute_weights(groups: Sequence[tuple[int, Sequence[str]]]) -> dict[str, int]:
    """Integer backend weights: each group's share split over its endpoints, no endpoint at 0.

    Groups without endpoints drop out (their share goes to the rest). The scale makes every
    group's share at least one per endpoint; the remainder of a split goes to the first
    endpoints; weights are reduced by their GCD and, past 1,000,000, scaled down to fit."""
    live = [(w, list(keys)) for w, keys in groups if keys]
    if not live:
        return {}
    scale = max(math.ceil(len(keys) / w) for w, keys in live)
    out: dict[str, int] = {}
    for weight, keys in live:
        base, extra = divmod(weight * scale, len(keys))
        for i, key in enumerate(keys):
            out[key] = base + (1 if i < extra else 0)
    divisor = reduce(math.gcd, out.values())
    out = {k: v // divisor for k, v in out.items()}
    top = max(out.values())
    if top > MAX_WEIGHT:
        out = {k: max(1, round(v * MAX_WEIGHT / top)) for k, v in out.items()}
    return out


def _backend_name(service: str, endpoint: EndpointRecord) -> str:
    return child_name("ms", service, endpoint.name)


def _target(url: str) -> tuple[str, int, str]:
    """(host, port, scheme) of an endpoint URL."""
    parts = urlsplit(url)
    scheme = parts.scheme or "http"
    port = parts.port or (443 if scheme == "https" else 80)
    return parts.hostname or "", port, scheme


def _address_type(host: str) -> str:
    try:
        return "IPv6" if ipaddress.ip_address(host).version == 6 else "IPv4"
    except ValueError:
        return "FQDN"


def _metadata(name: str, namespace: str, service: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": namespace,
        "labels": {LABEL_MANAGED_BY: MANAGER, SERVICE_LABEL: service},
    }


def _backend_objects(
    service: str, namespace: str, endpoint: EndpointRecord
) -> list[dict[str, Any]]:
    name = _backend_name(service, endpoint)
    host, port, scheme = _target(endpoint.url)
    port_spec = {"name": scheme, "port": port, "protocol": "TCP", "appProtocol": scheme}
    slice_meta = _metadata(name, namespace, service)
    slice_meta["labels"]["kubernetes.io/service-name"] = name
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _metadata(name, namespace, service),
            # Selectorless: the EndpointSlice below says where the endpoint is.
            "spec": {"ports": [port_spec]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": slice_meta,
            "addressType": _address_type(host),
            # Ready set explicitly: some gateways skip endpoints whose readiness is unset.
            "endpoints": [{"addresses": [host], "conditions": {"ready": True}}],
            "ports": [port_spec],
        },
    ]


def traffic_policy(
    namespace: str,
    service: str,
    outlier: OutlierDetection,
    retries: ServiceRetries,
) -> dict[str, Any]:
    """The route's BackendTrafficPolicy: passive health check and retries. Envoy Gateway makes
    one Envoy cluster of the rule's backendRefs, so ejection and its percentage count over all
    of the service's endpoints, and a retry may go to any other of them."""
    spec: dict[str, Any] = {
        "targetRefs": [
            {
                "group": "gateway.networking.k8s.io",
                "kind": "HTTPRoute",
                "name": child_name("ms", service),
            }
        ],
        "healthCheck": {
            "passive": {
                # Connection failures count as 5xx (Envoy maps them to 503) when not split.
                "splitExternalLocalOriginErrors": False,
                "interval": f"{outlier.interval_seconds}s",
                "consecutive5XxErrors": outlier.consecutive_errors,
                "consecutiveGatewayErrors": 0,
                "baseEjectionTime": f"{outlier.base_ejection_seconds}s",
                "maxEjectionPercent": outlier.max_ejection_percent,
            }
        },
    }
    if retries.attempts:
        spec["retry"] = {
            "numRetries": retries.attempts,
            "retryOn": {
                # Only failures before a response started: Envoy never retries once it has
                # forwarded a byte, so a stream cut mid-generation is not sent twice.
                "triggers": [
                    "connect-failure",
                    "refused-stream",
                    "reset",
                    "retriable-status-codes",
                ],
                "httpStatusCodes": sorted(set(retries.status_codes)),
            },
            "perRetry": {"backOff": {"baseInterval": RETRY_BASE_INTERVAL}},
        }
    return {
        "apiVersion": POLICY_API_VERSION,
        "kind": POLICY_KIND,
        "metadata": _metadata(child_name("ms", service), namespace, service),
        "spec": spec,
    }


def containment_summary(outlier: OutlierDetection, retries: ServiceRetries) -> str:
    """What ``describe service`` says of the policy, in words."""
    if outlier.max_ejection_percent:
        eject = (
            f"ejects an endpoint after {outlier.consecutive_errors} errors in a row for "
            f"{outlier.base_ejection_seconds} s x its ejections (at most "
            f"{outlier.max_ejection_percent}% of endpoints out)"
        )
    else:
        eject = "never ejects an endpoint"
    if retries.attempts:
        codes = ", ".join(str(c) for c in sorted(set(retries.status_codes)))
        retry = (
            f"retries {retries.attempts}x on another endpoint before any byte is sent "
            f"(connection failures, {codes})"
        )
    else:
        retry = "no retries"
    return f"{eject}; {retry}"


def render_front_door(
    door: FrontDoor,
    namespace: str,
    service: str,
    weighted: Mapping[str, int],
    endpoints: Sequence[EndpointRecord],
    *,
    auth: bool = False,
    outlier: OutlierDetection | None = None,
    retries: ServiceRetries | None = None,
) -> list[dict[str, Any]]:
    """Backends (Service + EndpointSlice per endpoint in ``weighted``), the route's traffic
    policy, then the route, in apply order. With no endpoint in rotation the route has no
    backendRefs (the gateway answers 5xx)."""
    target_ns = workload_namespace(namespace)
    by_key = {e.key: e for e in endpoints}
    # The workload namespace as the replicas apply it (the same field manager: see
    # ``rendering.namespace``).
    objects: list[dict[str, Any]] = [namespace_manifest(target_ns, namespace, door.cluster)]
    refs: list[dict[str, Any]] = []
    for key in sorted(weighted):
        endpoint = by_key[key]
        objects.extend(_backend_objects(service, target_ns, endpoint))
        rewrite = {"type": "ReplacePrefixMatch", "replacePrefixMatch": endpoint.rewrite_path}
        filters: list[dict[str, Any]] = [{"type": "URLRewrite", "urlRewrite": {"path": rewrite}}]
        if endpoint.auth_secret:
            # The provider's key replaces the caller's credentials on this backend only.
            secret = provider_token_secret_name(service, endpoint)
            filters.append(
                {
                    "type": "ExtensionRef",
                    "extensionRef": {"group": "", "kind": "Secret", "name": secret},
                }
            )
        refs.append(
            {
                "name": _backend_name(service, endpoint),
                "port": _target(endpoint.url)[1],
                "weight": weighted[key],
                "filters": filters,
            }
        )
    rule: dict[str, Any] = {
        "matches": [{"path": {"type": "PathPrefix", "value": service_path(namespace, service)}}],
        "backendRefs": refs,
    }
    if auth:
        # The gateway's API-key check reads the key hashes from this Secret.
        rule["filters"] = [
            {
                "type": "ExtensionRef",
                "extensionRef": {
                    "group": "",
                    "kind": "Secret",
                    "name": api_keys_secret_name(service),
                },
            }
        ]
    # The policy before the route: the route's first request already meets the passive health
    # check, and deletion (in reverse) takes the route away first.
    objects.append(
        traffic_policy(
            target_ns, service, outlier or OutlierDetection(), retries or ServiceRetries()
        )
    )
    objects.append(
        {
            "apiVersion": ROUTE_API_VERSION,
            "kind": "HTTPRoute",
            "metadata": _metadata(child_name("ms", service), target_ns, service),
            "spec": {
                "parentRefs": [
                    {
                        "group": "gateway.networking.k8s.io",
                        "kind": "Gateway",
                        "name": door.gateway_name,
                        "namespace": door.gateway_namespace,
                    }
                ],
                "rules": [rule],
            },
        }
    )
    return objects


def front_door_route(manifests: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The HTTPRoute among rendered front-door manifests."""
    return next(m for m in manifests if m.get("kind") == "HTTPRoute")


def carries(route: Mapping[str, Any], endpoint: str) -> bool:
    """Whether a front-door HTTPRoute (as its cluster reports it) may still send ``endpoint``
    traffic: a backendRef of its rules names the endpoint's backend, or its gateway has not yet
    accepted the route's latest generation (it may still run an older one that named it). A
    condition without ``observedGeneration`` is taken at its word."""
    metadata = route.get("metadata") or {}
    service = (metadata.get("labels") or {}).get(SERVICE_LABEL)
    if not service:
        return False
    backend = child_name("ms", service, endpoint)
    rules = (route.get("spec") or {}).get("rules") or []
    if any(ref.get("name") == backend for rule in rules for ref in rule.get("backendRefs") or []):
        return True
    generation = metadata.get("generation")
    if generation is None:
        return False
    for parent in (route.get("status") or {}).get("parents") or []:
        for condition in parent.get("conditions") or []:
            seen = condition.get("observedGeneration")
            if condition.get("type") == "Accepted" and seen is not None and seen < generation:
                return True
    return False
