"""Turning a placement decision into a ModelReplica: the deployment's current engines with the
chosen pools and resolved DRA device requests, named and labelled so that ownership is
namespace-aware.

Layer rule: pure (no I/O, no Temporal, no SDKs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from modelfleet.api.deployments import (
    Engine,
    ModelDeployment,
    ModelReplica,
    ModelReplicaSpec,
    PlacedEngine,
    PlacedMember,
)
from modelfleet.api.meta import ObjectMeta
from modelfleet.api.naming import (
    LABEL_CLUSTER,
    LABEL_DEPLOYMENT,
    LABEL_NAMESPACE,
    LABEL_REPLICA_INDEX,
    replica_name,
)
from modelfleet.scheduling.index import IndexedPool
from modelfleet.scheduling.matching import MemberMatch


@dataclass(frozen=True, slots=True)
class EngineChoice:
    """Where one engine goes: a pool per member (one pool for new placements) and matches."""

    pools: tuple[IndexedPool, ...]
    matches: tuple[MemberMatch, ...]


def owned_by(replica: ModelReplica, deployment: ModelDeployment) -> bool:
    """Ownership is the (namespace, name) pair: equal names in two namespaces never alias."""
    return replica.spec.deployment == deployment.name and replica.namespace == deployment.namespace


def replica_labels(deployment: ModelDeployment, cluster: str, index: int) -> dict[str, str]:
    """Template labels first, then the managed ones, which win a collision."""
    labels = dict(deployment.spec.template.metadata.labels)
    labels.update(
        {
            LABEL_DEPLOYMENT: deployment.name,
            LABEL_NAMESPACE: deployment.namespace,
            LABEL_CLUSTER: cluster,
            LABEL_REPLICA_INDEX: str(index),
        }
    )
    return labels


def _placed_engine(engine: Engine, choice: EngineChoice) -> PlacedEngine:
    members = [
        PlacedMember(
            role=member.role,
            node_pool_name=pool.name,
            device_requests=match.device_requests(pool.shape),
            worker=member.worker.model_copy() if member.worker else None,
            template=member.template.model_copy(deep=True),
        )
        for member, pool, match in zip(engine.members, choice.pools, choice.matches, strict=True)
    ]
    return PlacedEngine(name=engine.name, copies=engine.copies, phase=engine.phase, members=members)


def stamp_replica(
    deployment: ModelDeployment,
    cluster: str,
    index: int,
    choices: Sequence[EngineChoice],
    name: str | None = None,
) -> ModelReplica:
    """A replica of ``deployment``'s current template on ``cluster``; ``name`` keeps an
    existing replica's name, otherwise it is derived from (namespace, deployment, cluster,
    index)."""
    tspec = deployment.spec.template.spec
    return ModelReplica(
        metadata=ObjectMeta(
            name=name or replica_name(deployment.namespace, deployment.name, cluster, index),
            namespace=deployment.namespace,
            labels=replica_labels(deployment, cluster, index),
        ),
        spec=ModelReplicaSpec(
            cluster_name=cluster,
            deployment=deployment.name,
            index=index,
            model_cache_ref=tspec.model_cache_ref.model_copy() if tspec.model_cache_ref else None,
            serving=tspec.serving.model_copy(),
            engines=[
                _placed_engine(engine, choice)
                for engine, choice in zip(tspec.engines, choices, strict=True)
            ],
        ),
    )
