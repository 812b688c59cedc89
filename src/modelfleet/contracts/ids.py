"""Workflow IDs: one deterministic business ID per entity, so applying twice is idempotent and
every entity is findable by name. Pure."""

from __future__ import annotations

# A ModelCache's workflow (``cache.workflow``); defined with its contract, where activities
# (which may not import workflows) find it too.
from modelfleet.contracts.cache_payloads import cache_id

__all__ = [
    "FLEET_ID",
    "ROLLOUT_SLOTS_ID",
    "accepted_id",
    "cache_id",
    "cluster_id",
    "deployment_id",
    "replica_id",
    "service_id",
]

FLEET_ID = "fleet"
# The fleet-wide bound on concurrent rollouts (``admission.workflow``).
ROLLOUT_SLOTS_ID = "rollout-slots"


def deployment_id(namespace: str, name: str) -> str:
    return f"deployment/{namespace}/{name}"


def replica_id(namespace: str, name: str) -> str:
    return f"replica/{namespace}/{name}"


def cluster_id(name: str) -> str:
    return f"cluster/{name}"


def accepted_id(kind: str, namespace: str, name: str) -> str:
    """A document accepted but not acted upon (see ``accepted.workflow``)."""
    return f"accepted/{kind}/{namespace or '-'}/{name}"


def service_id(namespace: str, name: str) -> str:
    return f"service/{namespace}/{name}"
