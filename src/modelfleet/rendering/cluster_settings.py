"""The cluster-level rendering settings of one InferenceCluster: which node label pins each pool,
which Gateway routes attach to, and which namespace workloads go into. Pure: a function of the
cluster's spec (and the worker's defaults), no I/O.

Defaults follow the document's API group, so a cluster prepared for Modelplane works unchanged:

- pool node label (``nodePools[].nodeLabel``): ``modelfleet.dev/pool``; in a modelplane.ai
  document ``modelplane.ai/pool``;
- gateway (``workloads.gateway``): ``inference-gateway`` in ``modelfleet-system``; in a
  modelplane.ai document in ``modelplane-system``;
- namespace mode (``workloads.namespaceMode``): ``PerTenant`` (``mf-<ns>``) for both.
"""

from __future__ import annotations

from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.naming import MODELPLANE_LABEL_POOL
from modelfleet.rendering.facts import DEFAULT_GATEWAY_NAME, ClusterFacts

# Where Modelplane's serving stack puts the workload cluster's Gateway.
MODELPLANE_GATEWAY_NAMESPACE = "modelplane-system"


def has_own_settings(cluster: InferenceCluster) -> bool:
    """Whether ``cluster`` changes anything from the worker's defaults."""
    return (
        cluster.from_modelplane
        or cluster.spec.workloads is not None
        or any(p.node_label is not None for p in cluster.spec.node_pools)
        or cluster.spec.scheduler is not None
    )


def cluster_facts(cluster: InferenceCluster, base: ClusterFacts | None = None) -> ClusterFacts:
    """``base`` (the worker's defaults) with ``cluster``'s own settings applied."""
    facts = base or ClusterFacts()
    update: dict[str, object] = {}
    if cluster.from_modelplane:
        update["default_pool_label"] = MODELPLANE_LABEL_POOL
        update["gateway_name"] = DEFAULT_GATEWAY_NAME
        update["gateway_namespace"] = MODELPLANE_GATEWAY_NAMESPACE
    labels = {p.name: p.node_label for p in cluster.spec.node_pools if p.node_label is not None}
    if labels:
        update["pool_labels"] = labels
    if cluster.spec.scheduler is not None:
        update["scheduler"] = cluster.spec.scheduler
    workloads = cluster.spec.workloads
    if workloads is not None:
        update["namespace_mode"] = workloads.namespace_mode
        if workloads.gateway is not None:
            update["gateway_name"] = workloads.gateway.name
            update["gateway_namespace"] = workloads.gateway.namespace
    return facts.model_copy(update=update)
