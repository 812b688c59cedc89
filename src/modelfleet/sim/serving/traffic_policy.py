"""The simulated gateway's backend traffic policy, as Envoy Gateway applies a
``BackendTrafficPolicy`` (``gateway.envoyproxy.io/v1alpha1``) to a route: passive health checks
(Envoy's outlier detection) and retries.

Outlier detection, per route rule (Envoy Gateway makes one Envoy cluster of a rule's backends,
so ejection counts over all of them):

* Every answer of a host is recorded: a 5xx (or, unless ``splitExternalLocalOriginErrors``, a
  connection failure, which Envoy counts as a 503) extends the host's run of consecutive 5xx;
  502/503/504 extend its run of gateway errors; anything else ends both runs.
* When a run reaches ``consecutive5XxErrors`` (or ``consecutiveGatewayErrors`` when that is
  set, or ``consecutiveLocalOriginFailures`` for connection failures in split mode), the host
  is ejected, unless the hosts already ejected are ``maxEjectionPercent`` or more of the
  cluster's hosts (then the ejection overflows and the host keeps its traffic).
* An ejection lasts ``baseEjectionTime`` x the host's ejection multiplier (capped at Envoy's
  ``max_ejection_time``, 300 s), and the multiplier grows by one per ejection: a host that keeps
  failing stays out longer each time. Hosts are let back in, and the multiplier of a host that
  stayed in shrinks by one, on the detector's ``interval`` ticks, as Envoy's interval timer does.

Retries: a request whose answer matches ``retryOn`` (a ``retriable-status-codes`` code, any 5xx
under ``5xx``, 502/503/504 under ``gateway-error``, a connection failure under
``connect-failure``/``reset``/``5xx``/``gateway-error``) is sent again, up to ``numRetries``
times, to a host not tried yet where one is left (Envoy Gateway always configures Envoy's
``previous_hosts`` predicate), after a fully jittered exponential back-off. Only answers not yet
relayed to the client are retried: once a byte went downstream, the failure is the client's.

Not modelled: active health checks, success-rate and failure-percentage detection, panic mode
(balancing over all hosts when too few are healthy), per-retry timeouts.

Development/test emulator only. Pure: policy dicts in, decisions out; time is passed in.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "POLICY_API_VERSION",
    "POLICY_KIND",
    "HostOutcome",
    "OutlierDetector",
    "PassiveHealthCheck",
    "RetryPolicy",
    "TrafficPolicy",
    "parse_duration",
    "policy_for",
]

POLICY_API_VERSION = "gateway.envoyproxy.io/v1alpha1"
POLICY_KIND = "BackendTrafficPolicy"
_ROUTE_GROUP = "gateway.networking.k8s.io"
# Envoy's max_ejection_time default; Envoy Gateway does not expose it.
MAX_EJECTION_SECONDS = 300.0
_GATEWAY_ERRORS = frozenset({502, 503, 504})
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(text: Any, default: float) -> float:
    """Seconds in a Gateway API / metav1 duration ("30s", "1m30s", "250ms"); ``default`` when
    absent or unreadable (a real gateway would have rejected the policy)."""
    if not isinstance(text, str) or not text:
        return default
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return default
    return sum(float(n) * _UNITS[u] for n, u in parts)


def _int(raw: Any, default: int) -> int:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0 else default


@dataclass(frozen=True)
class PassiveHealthCheck:
    """``spec.healthCheck.passive`` with Envoy Gateway's defaults."""

    consecutive_5xx: int = 5
    consecutive_gateway_errors: int = 0
    consecutive_local_origin_failures: int = 5
    split_external_local_origin_errors: bool = False
    interval: float = 3.0
    base_ejection_time: float = 30.0
    max_ejection_percent: int = 10

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> PassiveHealthCheck:
        d = cls()
        return cls(
            consecutive_5xx=_int(raw.get("consecutive5XxErrors"), d.consecutive_5xx),
            consecutive_gateway_errors=_int(
                raw.get("consecutiveGatewayErrors"), d.consecutive_gateway_errors
            ),
            consecutive_local_origin_failures=_int(
                raw.get("consecutiveLocalOriginFailures"), d.consecutive_local_origin_failures
            ),
            split_external_local_origin_errors=raw.get("splitExternalLocalOriginErrors") is True,
            interval=max(0.001, parse_duration(raw.get("interval"), d.interval)),
            base_ejection_time=parse_duration(raw.get("baseEjectionTime"), d.base_ejection_time),
            max_ejection_percent=min(100, _int(raw.get("maxEjectionPercent"), 10)),
        )


_DEFAULT_TRIGGERS = frozenset(
    {"connect-failure", "refused-stream", "unavailable", "cancelled", "retriable-status-codes"}
)


@dataclass(frozen=True)
class RetryPolicy:
    """``spec.retry`` with Envoy Gateway's defaults (2 retries; connect failures, refused
    streams and 503; Envoy's 25 ms base back-off, capped at ten times the base)."""

    num_retries: int = 2
    triggers: frozenset[str] = _DEFAULT_TRIGGERS
    status_codes: frozenset[int] = frozenset({503})
    base_interval: float = 0.025
    max_interval: float = 0.25

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> RetryPolicy:
        d = cls()
        retry_on = raw.get("retryOn") or {}
        triggers = d.triggers
        codes = d.status_codes
        if isinstance(retry_on, Mapping) and retry_on:
            triggers = frozenset(str(t) for t in retry_on.get("triggers") or [])
            codes = frozenset(
                c for c in retry_on.get("httpStatusCodes") or [] if isinstance(c, int)
            )
        backoff = ((raw.get("perRetry") or {}).get("backOff")) or {}
        base = parse_duration(backoff.get("baseInterval"), d.base_interval)
        return cls(
            num_retries=_int(raw.get("numRetries"), d.num_retries),
            triggers=triggers,
            status_codes=codes,
            base_interval=base,
            max_interval=parse_duration(backoff.get("maxInterval"), base * 10),
        )

    def retries_status(self, status: int) -> bool:
        """Whether an answer with ``status`` is retried."""
        if "retriable-status-codes" in self.triggers and status in self.status_codes:
            return True
        if "5xx" in self.triggers and 500 <= status <= 599:
            return True
        if "retriable-4xx" in self.triggers and status == 409:
            return True
        return "gateway-error" in self.triggers and status in _GATEWAY_ERRORS

    def retries_failure(self) -> bool:
        """Whether a connection failure (no answer at all) is retried."""
        return bool(
            self.triggers & {"connect-failure", "reset", "5xx", "gateway-error", "refused-stream"}
        )

    def backoff(self, retry: int, draw: float) -> float:
        """The wait before retry number ``retry`` (1 is the first): fully jittered, drawn in
        [0, min(max, base x 2^(retry-1))) with ``draw`` uniform in [0, 1)."""
        ceiling = min(self.max_interval, self.base_interval * 2.0 ** (retry - 1))
        return max(0.0, ceiling * draw)


@dataclass(frozen=True)
class TrafficPolicy:
    passive: PassiveHealthCheck | None = None
    retry: RetryPolicy | None = None

    @classmethod
    def parse(cls, spec: Mapping[str, Any]) -> TrafficPolicy:
        health = spec.get("healthCheck") or {}
        passive = health.get("passive") if isinstance(health, Mapping) else None
        retry = spec.get("retry")
        return cls(
            passive=PassiveHealthCheck.parse(passive) if isinstance(passive, Mapping) else None,
            retry=RetryPolicy.parse(retry) if isinstance(retry, Mapping) else None,
        )


def _targets(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    refs = list(spec.get("targetRefs") or [])
    if spec.get("targetRef"):
        refs.append(spec["targetRef"])
    return [r for r in refs if isinstance(r, Mapping)]


def _names(policy: Mapping[str, Any], kind: str, name: str) -> bool:
    return any(
        ref.get("group", _ROUTE_GROUP) == _ROUTE_GROUP
        and ref.get("kind") == kind
        and ref.get("name") == name
        for ref in _targets(policy.get("spec") or {})
    )


def _oldest(policies: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    ordered = sorted(
        policies,
        key=lambda p: (
            str((p.get("metadata") or {}).get("creationTimestamp", "")),
            str((p.get("metadata") or {}).get("name", "")),
        ),
    )
    return ordered[0] if ordered else None


def policy_for(
    policies: Sequence[Mapping[str, Any]],
    route: tuple[str, str],
    gateway: tuple[str, str],
) -> TrafficPolicy:
    """The policy in force for ``route`` (namespace, name): a policy in the route's namespace
    targeting it, else one in the gateway's namespace targeting the gateway (the more specific
    target wins, as in Envoy Gateway; among equals the oldest). Empty when none applies."""

    def where(namespace: str, kind: str, name: str) -> Mapping[str, Any] | None:
        return _oldest(
            p
            for p in policies
            if (p.get("metadata") or {}).get("namespace") == namespace and _names(p, kind, name)
        )

    chosen = where(route[0], "HTTPRoute", route[1]) or where(gateway[0], "Gateway", gateway[1])
    return TrafficPolicy.parse(chosen.get("spec") or {}) if chosen else TrafficPolicy()


@dataclass(frozen=True)
class HostOutcome:
    """One answer of a host: its status, or None when no answer came (connection failure)."""

    status: int | None

    @property
    def local_failure(self) -> bool:
        return self.status is None


@dataclass
class _Host:
    consecutive_5xx: int = 0
    consecutive_gateway: int = 0
    consecutive_local: int = 0
    multiplier: int = 0
    ejected_at: float | None = None
    # The last interval tick already applied to this host.
    tick: int = 0


@dataclass
class OutlierDetector:
    """Outlier state of one Envoy cluster (a route rule's hosts), on a monotonic clock whose
    interval ticks count from ``started``."""

    check: PassiveHealthCheck
    started: float
    hosts: dict[str, _Host] = field(default_factory=dict)
    ejections_enforced_total: int = 0
    ejections_overflow: int = 0

    def _tick_of(self, now: float) -> int:
        return max(0, math.floor((now - self.started) / self.check.interval))

    def _ejection_seconds(self, host: _Host) -> float:
        return min(self.check.base_ejection_time * host.multiplier, MAX_EJECTION_SECONDS)

    def _advance(self, host: _Host, now: float) -> None:
        """Apply the interval ticks up to ``now``: let an ejected host back in on the first
        tick its ejection has run out, and shrink the multiplier on each later tick it spends
        in (Envoy's checkHostForUneject)."""
        tick = self._tick_of(now)
        if tick <= host.tick:
            return
        if host.ejected_at is not None:
            due = host.ejected_at + self._ejection_seconds(host)
            back = max(host.tick + 1, math.ceil((due - self.started) / self.check.interval))
            if back > tick:
                host.tick = tick
                return
            host.ejected_at = None
            host.consecutive_5xx = host.consecutive_gateway = 0
            host.tick = back
        host.multiplier = max(0, host.multiplier - (tick - host.tick))
        host.tick = tick

    def sync(self, keys: Iterable[str], now: float) -> None:
        """The cluster's hosts are ``keys``: new ones join (at the current tick), gone ones
        leave with their state (Envoy drops a removed host's monitor)."""
        wanted = set(keys)
        for key in list(self.hosts):
            if key not in wanted:
                del self.hosts[key]
        for key in wanted:
            if key not in self.hosts:
                self.hosts[key] = _Host(tick=self._tick_of(now))
            else:
                self._advance(self.hosts[key], now)

    def ejected(self, key: str, now: float) -> bool:
        host = self.hosts.get(key)
        if host is None:
            return False
        self._advance(host, now)
        return host.ejected_at is not None

    def active_ejections(self, now: float) -> int:
        return sum(1 for key in self.hosts if self.ejected(key, now))

    def record(self, key: str, outcome: HostOutcome, now: float) -> bool:
        """Count one answer of ``key``; True when it got the host ejected."""
        host = self.hosts.setdefault(key, _Host(tick=self._tick_of(now)))
        self._advance(host, now)
        check = self.check
        status = outcome.status
        if outcome.local_failure and check.split_external_local_origin_errors:
            host.consecutive_local += 1
            tripped = 0 < check.consecutive_local_origin_failures <= host.consecutive_local
            return self._maybe_eject(key, host, now) if tripped else False
        if outcome.local_failure:
            status = 503  # Envoy's mapping of a locally originated failure
        host.consecutive_local = 0
        assert status is not None
        if 500 <= status <= 599:
            host.consecutive_5xx += 1
        else:
            host.consecutive_5xx = 0
        if status in _GATEWAY_ERRORS:
            host.consecutive_gateway += 1
        else:
            host.consecutive_gateway = 0
        tripped = (0 < check.consecutive_5xx <= host.consecutive_5xx) or (
            0 < check.consecutive_gateway_errors <= host.consecutive_gateway
        )
        return self._maybe_eject(key, host, now) if tripped else False

    def _maybe_eject(self, key: str, host: _Host, now: float) -> bool:
        # Counters restart either way, so the next run is counted afresh (Envoy resets them
        # when it acts on a run, ejected or not).
        host.consecutive_5xx = host.consecutive_gateway = host.consecutive_local = 0
        if host.ejected_at is not None:
            return False
        active = self.active_ejections(now)
        if 100.0 * active / max(1, len(self.hosts)) >= self.check.max_ejection_percent:
            self.ejections_overflow += 1
            return False
        base = self.check.base_ejection_time
        if host.multiplier * base < MAX_EJECTION_SECONDS + base:
            host.multiplier += 1
        host.ejected_at = now
        self.ejections_enforced_total += 1
        return True

    def available(self, keys: Sequence[str], now: float) -> list[str]:
        """``keys`` that may take traffic (not ejected), in order."""
        return [k for k in keys if not self.ejected(k, now)]
