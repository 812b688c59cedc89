"""Cross-field rules of the kinds accepted for Modelplane parity: ModelCache, the per-cloud
cluster kinds and ServingStack. Each rule is one Modelplane enforces in its XRDs (CEL), reported as
a ``FieldError`` with the exact field path. Pure, no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

from modelfleet.api.caches import CacheSource, ModelCache
from modelfleet.api.infrastructure import (
    AKSClusterResource,
    CloudPoolBase,
    EKSClusterResource,
    GKEClusterResource,
    NebiusClusterResource,
    PoolRole,
    ServingStack,
    StackSecretType,
    VultrClusterResource,
)
from modelfleet.api.manifest_errors import FieldError, Path
from modelfleet.api.meta import Resource, label_key_problem, label_value_problem
from modelfleet.api.modelplane_gateway import ModelplaneInferenceGateway


def parity_rules(resource: Resource) -> Iterable[FieldError]:
    """The rules of ``resource``'s kind, for the kinds this module owns (else none)."""
    match resource:
        case ModelCache():
            return _model_cache(resource)
        case ServingStack():
            return _serving_stack(resource)
        case ModelplaneInferenceGateway():
            return _modelplane_gateway(resource)
        case (
            GKEClusterResource()
            | EKSClusterResource()
            | AKSClusterResource()
            | NebiusClusterResource()
            | VultrClusterResource()
        ):
            return _cloud_pools(resource, resource.spec.node_pools)
    return ()


def _duplicates(path: Path, keys: Sequence[object], what: str) -> Iterator[FieldError]:
    counts = Counter(keys)
    for i, key in enumerate(keys):
        if counts[key] > 1 and keys.index(key) != i:
            yield FieldError((*path, i), f"duplicate {what} {key!r}: {what}s must be unique")


def _model_cache(mc: ModelCache) -> Iterator[FieldError]:
    spec = mc.spec
    if spec.source is CacheSource.HUGGING_FACE and spec.hugging_face is None:
        yield FieldError(("spec", "huggingFace"), "required when source is HuggingFace")
    if spec.source is CacheSource.URI and spec.uri is None:
        yield FieldError(("spec", "uri"), "required when source is URI")
    selector = spec.cluster_selector
    for key, value in (selector.match_labels if selector else {}).items():
        path = ("spec", "clusterSelector", "matchLabels", key)
        problem = label_key_problem(key)
        if problem:
            yield FieldError(path, f"invalid label key {key!r}: {problem}")
        value_problem = label_value_problem(value)
        if value_problem:
            yield FieldError(path, f"invalid label value {value!r}: {value_problem}")


def _cloud_pools(resource: Resource, pools: Sequence[CloudPoolBase]) -> Iterator[FieldError]:
    path = ("spec", "nodePools")
    yield from _duplicates(path, [p.name for p in pools], "node pool name")
    zoned = resource.KIND in ("GKECluster", "EKSCluster")
    # Nebius and Vultr have no default maximum, so a minimum alone bounds nothing.
    min_needs_max = resource.KIND in ("NebiusCluster", "VultrCluster")
    for i, pool in enumerate(pools):
        pp = (*path, i)
        if pool.role is PoolRole.GPU and pool.gpu is None:
            yield FieldError((*pp, "gpu"), "required for GPU pools (the accelerator type)")
        if pool.role is PoolRole.GPU and zoned and not pool.zones:
            yield FieldError((*pp, "zones"), f"required for GPU pools on {resource.KIND}")
        if min_needs_max and pool.min_node_count is not None and pool.max_node_count is None:
            yield FieldError((*pp, "maxNodeCount"), "required when minNodeCount is set")
        if (
            pool.min_node_count is not None
            and pool.max_node_count is not None
            and pool.min_node_count > pool.max_node_count
        ):
            yield FieldError(
                (*pp, "minNodeCount"),
                f"must not exceed maxNodeCount ({pool.min_node_count} > {pool.max_node_count})",
            )


def _serving_stack(ss: ServingStack) -> Iterator[FieldError]:
    secrets = ss.spec.secrets
    if not any(s.type is StackSecretType.KUBECONFIG for s in secrets):
        yield FieldError(("spec", "secrets"), "a secret of type Kubeconfig is required")
    listeners = ss.spec.gateway.listeners
    yield from _duplicates(
        ("spec", "gateway", "listeners"), [item.name for item in listeners], "listener name"
    )


def _modelplane_gateway(ig: ModelplaneInferenceGateway) -> Iterator[FieldError]:
    if ig.name != "default":
        yield FieldError(("metadata", "name"), "the InferenceGateway must be named 'default'")
    traefik = ig.spec.traefik
    if traefik is None:
        yield FieldError(("spec", "traefik"), "required when backend is Traefik")
    elif traefik.load_balancer == "MetalLB" and traefik.metallb is None:
        yield FieldError(("spec", "traefik", "metallb"), "required when loadBalancer is MetalLB")
