"""Which replicas' objects on a cluster are orphans: left behind by replicas that the Fleet's
ledger no longer holds there (moved away while the cluster was dark, so their teardown could not
reach it). Also the kinds a replica's objects come in, so a sweep knows what to list.

Pure: no I/O; imports only the label names and the renderers' kind constants.
"""

from __future__ import annotations

from collections.abc import Iterable

from modelfleet.rendering.claims import API_VERSION as CLAIM_API_VERSION
from modelfleet.rendering.claims import KIND as CLAIM_KIND
from modelfleet.rendering.engine_workloads import DEPLOYMENT_API_VERSION, LWS_API_VERSION
from modelfleet.rendering.epp_config import CONFIG_API_VERSION, CONFIG_KIND
from modelfleet.rendering.routing import POOL_API_VERSION, ROUTE_API_VERSION

# (apiVersion, kind) of everything a replica renders, plus its pods: a Deployment deleted
# without its controller running can leave pods, and they carry the replica label too.
REPLICA_KINDS: tuple[tuple[str, str], ...] = (
    (DEPLOYMENT_API_VERSION, "Deployment"),
    (LWS_API_VERSION, "LeaderWorkerSet"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    (POOL_API_VERSION, "InferencePool"),
    (ROUTE_API_VERSION, "HTTPRoute"),
    (CLAIM_API_VERSION, CLAIM_KIND),
    (CONFIG_API_VERSION, CONFIG_KIND),
    ("v1", "Pod"),
)

ReplicaName = tuple[str, str]  # (deployment namespace, replica name), as the labels say


def orphaned(found: Iterable[ReplicaName], held: Iterable[str]) -> list[ReplicaName]:
    """The replicas among ``found`` (from the namespace and replica labels of objects on a
    cluster) that the ledger does not hold on that cluster; ``held`` are its keys there,
    ``namespace/name``. Sorted and without duplicates. Everything the ledger holds is kept,
    including replicas being created: placement books a replica before anything is applied,
    so a replica whose objects exist was in the ledger before they did."""
    keep = set(held)
    return sorted({r for r in found if f"{r[0]}/{r[1]}" not in keep})
