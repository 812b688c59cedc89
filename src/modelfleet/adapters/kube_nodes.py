"""Nodes as modelfleet reads them: name, modelfleet pool (the ``modelfleet.dev/pool`` label),
Ready condition, schedulability and labels, from a ``v1`` Node object. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from modelfleet.api.naming import LABEL_POOL


@dataclass(frozen=True)
class NodeInfo:
    name: str
    pool: str | None
    ready: bool
    schedulable: bool
    labels: dict[str, str] = field(default_factory=dict)


def node_info(node: dict[str, Any]) -> NodeInfo:
    metadata = node.get("metadata") or {}
    labels = {str(k): str(v) for k, v in (metadata.get("labels") or {}).items()}
    conditions = (node.get("status") or {}).get("conditions") or []
    return NodeInfo(
        name=str(metadata.get("name", "")),
        pool=labels.get(LABEL_POOL),
        ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
        schedulable=not (node.get("spec") or {}).get("unschedulable", False),
        labels=labels,
    )


__all__ = ["NodeInfo", "node_info"]
