"""Probing OpenAI-compatible endpoints over HTTP with httpx: ``GET <url>/models`` with a timeout
and a bounded number of attempts, reduced to healthy or not and why.

Side effects: outbound HTTP only. A provider key, when given, goes into the Authorization
header and nowhere else (never into a reason or a log line).
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

__all__ = ["ProbeOutcome", "probe_models"]


@dataclass(frozen=True)
class ProbeOutcome:
    healthy: bool
    reason: str
    models: tuple[str, ...] = ()


def _models_url(url: str) -> str:
    # A published endpoint URL ends in /v1; an external provider's may be its root.
    base = url.rstrip("/")
    return f"{base}/models" if base.endswith("/v1") else f"{base}/v1/models"


def probe_models(
    url: str, *, timeout: float, attempts: int, api_key: str | None = None
) -> ProbeOutcome:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    target = _models_url(url)
    reason = "not probed"
    with httpx.Client(timeout=timeout, follow_redirects=False) as client:
        for _ in range(attempts):
            try:
                response = client.get(target, headers=headers)
            except httpx.TimeoutException:
                reason = f"GET {target} timed out after {timeout:g}s"
                continue
            except httpx.HTTPError as exc:
                reason = f"GET {target} failed: {type(exc).__name__}"
                continue
            if response.status_code != 200:
                reason = f"GET {target} answered {response.status_code}"
                continue
            try:
                data = response.json().get("data") or []
                models = tuple(str(m.get("id")) for m in data if isinstance(m, dict))
            except (ValueError, AttributeError):
                reason = f"GET {target} answered a body that is not a model list"
                continue
            if not models:
                reason = f"GET {target} lists no model"
                continue
            return ProbeOutcome(True, f"serves {', '.join(models)}", models)
    return ProbeOutcome(False, reason)
