"""The simulated gateway's routing decisions, as pure functions over HTTPRoute dicts: which rule
of which route a request path matches (Gateway API precedence: Exact before PathPrefix, longer
prefixes first), how its URLRewrite filters change the path, and which weighted backendRef
takes the request.

Development/test emulator only. Pure: JSON-like dicts in, small dataclasses out.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BackendRef",
    "RuleMatch",
    "attached",
    "match_request",
    "pick_backend",
    "rewrite_path",
]

_ROUTE_GROUP = "gateway.networking.k8s.io"


@dataclass(frozen=True)
class BackendRef:
    group: str
    kind: str
    name: str
    namespace: str
    port: int | None
    weight: int
    # The backendRef's own URLRewrite (Modelplane rewrites per backend on the front door).
    rewrite: Mapping[str, Any] | None = None
    # ExtensionRef filters of the backendRef, e.g. the Secret whose token goes upstream.
    extensions: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class RuleMatch:
    route: str
    namespace: str
    # The matched prefix ("" for an Exact match), for ReplacePrefixMatch.
    prefix: str
    exact: bool
    rewrite: Mapping[str, Any] | None
    backends: tuple[BackendRef, ...]
    # ExtensionRef filters of the rule, e.g. the API-key Secret the gateway checks.
    extensions: tuple[Mapping[str, Any], ...] = ()


def attached(route: Mapping[str, Any], gateway_namespace: str, gateway_name: str) -> bool:
    """Whether a route names this Gateway among its parentRefs."""
    route_ns = str(route.get("metadata", {}).get("namespace", ""))
    for ref in (route.get("spec") or {}).get("parentRefs") or []:
        if (
            ref.get("kind", "Gateway") != "Gateway"
            or ref.get("group", _ROUTE_GROUP) != _ROUTE_GROUP
        ):
            continue
        if ref.get("name") == gateway_name and ref.get("namespace", route_ns) == gateway_namespace:
            return True
    return False


def _normalise(prefix: str) -> str:
    trimmed = prefix.rstrip("/")
    return trimmed or "/"


def _prefix_matches(prefix: str, path: str) -> bool:
    """Element-wise prefix matching: ``/a/b`` matches ``/a/b`` and ``/a/b/c``, never ``/a/bc``;
    a trailing slash on the prefix is ignored."""
    norm = _normalise(prefix)
    if norm == "/":
        return True
    return path == norm or path.startswith(norm + "/")


def _filters(filters: Iterable[Mapping[str, Any]], kind: str) -> list[Mapping[str, Any]]:
    return [f for f in filters if f.get("type") == kind]


def _backends(rule: Mapping[str, Any], namespace: str) -> tuple[BackendRef, ...]:
    out = []
    for ref in rule.get("backendRefs") or []:
        rewrites = _filters(ref.get("filters") or [], "URLRewrite")
        out.append(
            BackendRef(
                group=str(ref.get("group", "")),
                kind=str(ref.get("kind", "Service")),
                name=str(ref.get("name", "")),
                namespace=str(ref.get("namespace", namespace)),
                port=ref.get("port"),
                weight=int(ref.get("weight", 1)),
                rewrite=rewrites[0].get("urlRewrite") if rewrites else None,
                extensions=tuple(
                    f.get("extensionRef") or {}
                    for f in _filters(ref.get("filters") or [], "ExtensionRef")
                ),
            )
        )
    return tuple(out)


def match_request(routes: Sequence[Mapping[str, Any]], path: str) -> RuleMatch | None:
    """The most specific rule over all ``routes`` (already filtered to one gateway) for ``path``:
    an Exact match beats any prefix, a longer prefix beats a shorter one, and ties go to the
    oldest route, then by namespace/name (the Gateway API's conflict order)."""
    best: tuple[tuple[int, int, str, str, str], RuleMatch] | None = None
    for route in routes:
        meta = route.get("metadata", {})
        ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        created = str(meta.get("creationTimestamp", ""))
        for rule in (route.get("spec") or {}).get("rules") or []:
            matches = rule.get("matches") or [{"path": {"type": "PathPrefix", "value": "/"}}]
            for match in matches:
                spec = match.get("path") or {"type": "PathPrefix", "value": "/"}
                value = str(spec.get("value", "/"))
                exact = spec.get("type") == "Exact"
                if exact and path != value:
                    continue
                if not exact and not _prefix_matches(value, path):
                    continue
                rank = (0 if exact else 1, -len(_normalise(value)), created, ns, name)
                if best is not None and rank >= best[0]:
                    continue
                filters = rule.get("filters") or []
                rewrites = _filters(filters, "URLRewrite")
                best = (
                    rank,
                    RuleMatch(
                        route=name,
                        namespace=ns,
                        prefix="" if exact else _normalise(value),
                        exact=exact,
                        rewrite=rewrites[0].get("urlRewrite") if rewrites else None,
                        backends=_backends(rule, ns),
                        extensions=tuple(
                            f.get("extensionRef") or {} for f in _filters(filters, "ExtensionRef")
                        ),
                    ),
                )
    return best[1] if best else None


def rewrite_path(path: str, match: RuleMatch, rewrite: Mapping[str, Any] | None) -> str:
    """Apply one URLRewrite's path modifier (ReplacePrefixMatch or ReplaceFullPath)."""
    modifier = (rewrite or {}).get("path")
    if not modifier:
        return path
    if modifier.get("type") == "ReplaceFullPath":
        return str(modifier.get("replaceFullPath", "/"))
    if modifier.get("type") != "ReplacePrefixMatch" or match.exact:
        return path
    replacement = str(modifier.get("replacePrefixMatch", "/"))
    rest = path if match.prefix == "/" else path[len(match.prefix) :]
    if not rest or rest == "/":
        return replacement
    return replacement.rstrip("/") + rest


def pick_backend(backends: Sequence[BackendRef], rng: random.Random) -> BackendRef | None:
    """A weighted draw; weight-0 refs never take traffic; None when none can."""
    live = [b for b in backends if b.weight > 0]
    if not live:
        return None
    return rng.choices(live, weights=[b.weight for b in live], k=1)[0]
