"""``events.k8s.io/v1`` Events as a view of the stored ``core/v1`` Events, as the real server
serves one storage through both APIs: ``regarding`` for ``involvedObject``, ``note`` for
``message``, ``reportingController`` for ``source.component``, ``deprecated*`` for the counts.
Reads only (get and list); writes go through core/v1.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["EVENTS_V1_KEY", "to_events_v1"]

EVENTS_V1_KEY = "events.events.k8s.io"


def to_events_v1(event: Mapping[str, Any]) -> dict[str, Any]:
    """One core/v1 Event in its events.k8s.io/v1 shape."""
    source = event.get("source") or {}
    out: dict[str, Any] = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": dict(event.get("metadata") or {}),
        "eventTime": event.get("eventTime") or event.get("firstTimestamp"),
        "reportingController": event.get("reportingComponent") or source.get("component", ""),
        "reportingInstance": event.get("reportingInstance") or source.get("host", ""),
        "action": event.get("action") or event.get("reason", ""),
        "reason": event.get("reason", ""),
        "regarding": dict(event.get("involvedObject") or {}),
        "note": event.get("message", ""),
        "type": event.get("type", ""),
        "deprecatedSource": dict(source),
        "deprecatedFirstTimestamp": event.get("firstTimestamp"),
        "deprecatedLastTimestamp": event.get("lastTimestamp"),
        "deprecatedCount": event.get("count", 1),
    }
    return {k: v for k, v in out.items() if v is not None}
