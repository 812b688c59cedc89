"""The cross-field rules of an InferenceCluster: the access block its source needs, scheduler
settings, unique taints and node pools, each pool's counts, zones, names, capacity block, fabric
and fallbacks as its source allows them. Pure: it may touch the API's models; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator

from modelfleet.api.clusters import ClusterSource, FabricType, InferenceCluster, NodePool
from modelfleet.api.field_rules import duplicate_errors
from modelfleet.api.infrastructure import AKS_POOL_NAME
from modelfleet.api.manifest_errors import FieldError, Path
from modelfleet.api.meta import (
    label_key_problem,
)
from modelfleet.api.schedulers import scheduler_rules

__all__ = ["inference_cluster_rules"]


def inference_cluster_rules(cl: InferenceCluster) -> Iterator[FieldError]:
    spec = ("spec",)
    access = cl.spec.cluster
    source = access.source
    for candidate in ClusterSource:
        field = candidate.name.lower()
        block = access.block(candidate)
        if candidate is source and block is None and candidate is not ClusterSource.EXISTING:
            yield FieldError((*spec, "cluster", field), f"required when source is {source.value}")
        if candidate is not source and block is not None:
            yield FieldError(
                (*spec, "cluster", field), f"must not be set when source is {source.value}"
            )
    yield from scheduler_rules((*spec, "scheduler"), cl.spec.scheduler)
    taints = cl.spec.taints
    yield from duplicate_errors(
        (*spec, "taints"), [(t.key, t.effect.value) for t in taints], "taint (key, effect)"
    )
    for i, taint in enumerate(taints):
        problem = label_key_problem(taint.key)
        if problem:
            yield FieldError((*spec, "taints", i, "key"), f"invalid taint key: {problem}")
    pools = cl.spec.node_pools
    yield from duplicate_errors((*spec, "nodePools"), [p.name for p in pools], "node pool name")
    provisioned = source in (ClusterSource.GKE, ClusterSource.EKS)
    for i, pool in enumerate(pools):
        path = (*spec, "nodePools", i)
        if (
            pool.min_node_count is not None
            and pool.max_node_count is not None
            and pool.min_node_count > pool.max_node_count
        ):
            yield FieldError(
                (*path, "minNodeCount"),
                f"must not exceed maxNodeCount ({pool.min_node_count} > {pool.max_node_count})",
            )
        if provisioned and not pool.zones:
            yield FieldError((*path, "zones"), f"required for pools that {source.value} provisions")
        if source is ClusterSource.AKS and not AKS_POOL_NAME.match(pool.name):
            yield FieldError(
                (*path, "name"),
                "AKS pool names are a lowercase letter then at most 11 lowercase letters or "
                f"digits (got {pool.name!r})",
            )
        if pool.node_label is not None:
            problem = label_key_problem(pool.node_label)
            if problem:
                yield FieldError((*path, "nodeLabel"), f"invalid label key: {problem}")
        if pool.capacity_block is not None and source is not ClusterSource.EKS:
            yield FieldError((*path, "capacityBlock"), "capacity blocks exist only on EKS")
        yield from _fallbacks(path, pool, source)
        fabric = pool.fabric
        if fabric is not None:
            if fabric.infiniband is not None and fabric.type is not FabricType.INFINIBAND:
                yield FieldError(
                    (*path, "fabric", "infiniband"), "only allowed when fabric type is InfiniBand"
                )
            if fabric.type is FabricType.EFA and source not in (
                ClusterSource.EKS,
                ClusterSource.EXISTING,
            ):
                yield FieldError((*path, "fabric", "type"), "EFA is only available on EKS")
            if (
                fabric.type is FabricType.INFINIBAND
                and source is ClusterSource.NEBIUS
                and fabric.infiniband is None
            ):
                yield FieldError(
                    (*path, "fabric", "infiniband"),
                    "required on Nebius: the InfiniBand fabric the GPU cluster joins",
                )
            if fabric.type is FabricType.INFINIBAND and provisioned:
                yield FieldError(
                    (*path, "fabric", "type"),
                    f"InfiniBand pools cannot be provisioned on {source.value}; "
                    "use source Existing",
                )


def _fallbacks(path: Path, pool: NodePool, source: ClusterSource) -> Iterator[FieldError]:
    if not pool.fallbacks:
        return
    where = (*path, "fallbacks")
    if source not in (ClusterSource.GKE, ClusterSource.EKS, ClusterSource.AKS):
        yield FieldError(
            where,
            "fallbacks apply only to pools modelfleet provisions (sources GKE, EKS, AKS), "
            f"not to source {source.value}",
        )
        return
    if pool.capacity_block is not None:
        yield FieldError(
            where,
            "a pool on a Capacity Block cannot fall back: the reservation holds one instance "
            "type in one zone",
        )
        return
    # Each alternative as it would be created; one equal to the pool or an earlier one would
    # only repeat a stocked-out attempt.
    seen = [(sorted(pool.zones), pool.class_name)]
    for i, fallback in enumerate(pool.fallbacks):
        if fallback.zones is None and fallback.class_name is None:
            yield FieldError((*where, i), "set zones, className or both")
            continue
        zones = fallback.zones if fallback.zones is not None else pool.zones
        if fallback.zones is not None:
            yield from duplicate_errors((*where, i, "zones"), fallback.zones, "zone")
        key = (sorted(zones), fallback.class_name or pool.class_name)
        if key in seen:
            same = "the pool itself" if seen.index(key) == 0 else f"fallback {seen.index(key) - 1}"
            yield FieldError(
                (*where, i),
                f"repeats {same} (zones {', '.join(key[0]) or 'unset'}, class {key[1]}): "
                "an alternative must differ in its zones or its class",
            )
        seen.append(key)
