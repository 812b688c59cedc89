"""What modelfleet does with each accepted document: acted upon, or accepted and reported as not
acted upon with the reason. Every kind and field Modelplane's XRDs accept validates here, but not
every one has a feature behind it yet; this module is the single place that says which, so
``apply`` and ``get`` report it instead of silently ignoring a document. Pure, no I/O.
"""

from __future__ import annotations

from modelfleet.api.classes import InferenceClass, Provider
from modelfleet.api.clusters import ClusterSource, FabricType, InferenceCluster
from modelfleet.api.infrastructure import InfrastructureResource, ServingStack
from modelfleet.api.meta import Resource
from modelfleet.api.modelplane_gateway import ModelplaneInferenceGateway

# The reason code every "not acted upon" report carries (condition reason style).
NOT_ACTED_UPON = "NotActedUpon"
PROVISIONING_NOT_SUPPORTED = "ProvisioningNotSupported"

# Sources and providers whose provisioning is not built; their documents still validate.
UNPROVISIONED_SOURCES = frozenset({ClusterSource.NEBIUS, ClusterSource.VULTR})
UNPROVISIONED_PROVIDERS = frozenset({Provider.NEBIUS, Provider.VULTR})


def held_without_action(resource: Resource) -> bool:
    """Whether ``resource`` is a kind modelfleet only keeps (and lists) without acting upon it."""
    return isinstance(
        resource,
        ServingStack | InfrastructureResource | ModelplaneInferenceGateway,
    )


def provisioning_not_supported(source: ClusterSource) -> str | None:
    """Why a cluster of ``source`` cannot be provisioned, or None when it can (or is adopted)."""
    if source in UNPROVISIONED_SOURCES:
        return (
            f"{PROVISIONING_NOT_SUPPORTED}: modelfleet does not provision {source.value} "
            "clusters; create the cluster yourself and declare it with source Existing "
            "(its kubeconfig in the worker's credentials directory)"
        )
    return None


def _aks_infiniband(cluster: InferenceCluster) -> str | None:
    """What an AKS cluster's InfiniBand pools leave to the user: the pool is provisioned (its VM
    size carries the InfiniBand adapters), but Modelplane's NVIDIA network operator is not."""
    if cluster.spec.cluster.source is not ClusterSource.AKS:
        return None
    pools = [
        p.name
        for p in cluster.spec.node_pools
        if p.fabric is not None and p.fabric.type is FabricType.INFINIBAND
    ]
    if not pools:
        return None
    return (
        f"{NOT_ACTED_UPON}: fabric InfiniBand of node pool(s) {', '.join(pools)}: the pools are "
        "provisioned with their class's VM size, but modelfleet does not install NVIDIA's "
        "network operator or enable the AKSInfinibandSupport feature; do both for RDMA"
    )


def not_acted_upon(resource: Resource) -> str | None:
    """Why ``resource`` is accepted but not acted upon, or None when modelfleet acts on it.

    The reason is meant for a user: it says what is ignored and what to do instead."""
    if isinstance(resource, ModelplaneInferenceGateway):
        return (
            f"{NOT_ACTED_UPON}: this is Modelplane's control-plane Traefik gateway; "
            "modelfleet's front door is the Gateway of a workload cluster, so set spec.cluster "
            "(and drop backend/traefik) to route ModelServices through it"
        )
    if isinstance(resource, ServingStack):
        return (
            f"{NOT_ACTED_UPON}: modelfleet does not install serving stacks; it prepares a "
            "cluster from its InferenceCluster and expects the stack (gateway, LWS, DRA "
            "driver) to be present on Existing clusters"
        )
    if isinstance(resource, InfrastructureResource):
        return (
            f"{NOT_ACTED_UPON}: {resource.KIND} is Modelplane's internal per-cloud kind; "
            "modelfleet provisions clusters from InferenceCluster.spec.cluster, so declare "
            "the cluster there instead"
        )
    if isinstance(resource, InferenceCluster):
        return provisioning_not_supported(resource.spec.cluster.source) or _aks_infiniband(resource)
    if isinstance(resource, InferenceClass):
        prov = resource.spec.provisioning
        if prov is not None and prov.provider in UNPROVISIONED_PROVIDERS:
            # The devices still drive placement on Existing clusters; only node creation is off.
            return (
                f"{PROVISIONING_NOT_SUPPORTED}: provisioning.{prov.provider.name.lower()} is "
                "validated but modelfleet cannot create nodes on "
                f"{prov.provider.value}; the class's devices are still used for placement"
            )
    return None
