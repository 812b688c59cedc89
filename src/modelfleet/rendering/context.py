"""The identity of the replica being rendered and the metadata every rendered object carries.

Pure: built from a ModelReplica and ClusterFacts, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from modelfleet.api.clusters import NamespaceMode
from modelfleet.api.deployments import ModelReplica
from modelfleet.api.naming import (
    LABEL_CLUSTER,
    LABEL_DEPLOYMENT,
    LABEL_MANAGED_BY,
    LABEL_NAMESPACE,
    LABEL_REPLICA,
    MANAGED_BY,
    workload_namespace,
)
from modelfleet.rendering.facts import ClusterFacts
from modelfleet.rendering.model_cache import claim_name


def sorted_map(mapping: Mapping[str, str]) -> dict[str, str]:
    """A copy with keys in order, so that equal maps always serialise to equal bytes."""
    return {key: mapping[key] for key in sorted(mapping)}


@dataclass(frozen=True)
class RenderContext:
    replica: str
    deployment: str
    # The deployment's namespace on the fleet, as opposed to ``namespace`` on the workload cluster.
    deployment_namespace: str
    cluster: str
    namespace: str
    facts: ClusterFacts
    # The ModelCache volume (PersistentVolumeClaim) every engine pod mounts, if any.
    model_cache_claim: str | None = None

    @classmethod
    def of(cls, replica: ModelReplica, facts: ClusterFacts) -> RenderContext:
        return cls(
            replica=replica.name,
            deployment=replica.spec.deployment,
            deployment_namespace=replica.namespace,
            cluster=replica.spec.cluster_name,
            namespace=(
                replica.namespace
                if facts.namespace_mode is NamespaceMode.DEPLOYMENT
                else workload_namespace(replica.namespace)
            ),
            facts=facts,
            model_cache_claim=(
                claim_name(replica.namespace, replica.spec.model_cache_ref.name)
                if replica.spec.model_cache_ref is not None
                else None
            ),
        )

    def labels(self) -> dict[str, str]:
        """The labels that let anyone trace an object back to its replica and deployment."""
        return sorted_map(
            {
                LABEL_DEPLOYMENT: self.deployment,
                LABEL_NAMESPACE: self.deployment_namespace,
                LABEL_REPLICA: self.replica,
                LABEL_CLUSTER: self.cluster,
                LABEL_MANAGED_BY: MANAGED_BY,
            }
        )

    def metadata(self, name: str) -> dict[str, Any]:
        """Metadata of a namespaced object owned by this replica."""
        return {"name": name, "namespace": self.namespace, "labels": self.labels()}
