"""What must report what before a replica counts as Ready, as data the Kubernetes adapter
evaluates against the objects it observes.

Every workload (Deployment or LeaderWorkerSet) must be Available, and so must the endpoint
picker's Deployment: until the picker runs, the pool routes blindly (FailOpen), so a replica is
not published before it. Modelplane counted the picker ready as soon as it existed. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from modelfleet.api.meta import Model

AVAILABLE = "Available"


class ReadinessRole(StrEnum):
    WORKLOAD = "workload"
    ENDPOINT_PICKER = "endpoint-picker"


class ReadinessRule(Model):
    """Object ``kind`` ``namespace/name`` must report condition ``condition`` as True."""

    api_version: str
    kind: str
    namespace: str
    name: str
    condition: str = AVAILABLE
    role: ReadinessRole

    def satisfied_by(self, observed: Mapping[str, Any]) -> bool:
        """Whether ``observed`` (the object as read back from the cluster) meets the rule.

        A condition written for an older generation of the object says nothing about the
        current spec, so it only counts once the controller has observed the latest one.
        """
        metadata = observed.get("metadata") or {}
        status = observed.get("status") or {}
        generation = metadata.get("generation")
        seen = status.get("observedGeneration")
        if generation is not None and seen is not None and seen < generation:
            return False
        for condition in status.get("conditions") or []:
            if condition.get("type") == self.condition:
                return bool(condition.get("status") == "True")
        return False


def rule_for(manifest: Mapping[str, Any], role: ReadinessRole) -> ReadinessRule:
    """The rule that ``manifest``, once applied, must become Available."""
    metadata = manifest["metadata"]
    return ReadinessRule(
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        namespace=metadata["namespace"],
        name=metadata["name"],
        role=role,
    )
