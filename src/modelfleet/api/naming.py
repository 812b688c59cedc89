"""Names and labels that modelfleet stamps on what it creates. One place, so the scheduler, the
renderer, the workflows and the simulator agree. Pure, no I/O.
"""

from __future__ import annotations

import hashlib

from modelfleet.api.meta import API_GROUP

# Labels on everything modelfleet creates (ModelReplicas and workload-cluster objects).
LABEL_DEPLOYMENT = f"{API_GROUP}/deployment"
LABEL_NAMESPACE = f"{API_GROUP}/namespace"
LABEL_REPLICA = f"{API_GROUP}/replica"
LABEL_CLUSTER = f"{API_GROUP}/cluster"
LABEL_REPLICA_INDEX = f"{API_GROUP}/replica-index"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "modelfleet"

# Where Modelplane keeps a replica's identity; read when loading its ModelReplicas.
MODELPLANE_LABEL_DEPLOYMENT = "modelplane.ai/deployment"
MODELPLANE_LABEL_REPLICA_INDEX = "modelplane.ai/replica-index"

# Pod labels the routing layer selects on.
LABEL_SERVING = f"{API_GROUP}/serving"
LABEL_WORKLOAD = f"{API_GROUP}/workload"
LABEL_LWS_ROLE = f"{API_GROUP}/lws-role"

# The node label that pins a pod to its pool; BYO clusters label their nodes with it. Each pool
# may name another (``nodeLabel``); clusters described in Modelplane documents default to its.
LABEL_POOL = f"{API_GROUP}/pool"
MODELPLANE_LABEL_POOL = "modelplane.ai/pool"

MAX_NAME = 63
_HASH_LEN = 5


def short_hash(text: str, length: int = _HASH_LEN) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def child_name(*parts: str) -> str:
    """A DNS-1123 name derived from ``parts``: joined with '-', a short hash appended, and the
    readable prefix truncated so the whole fits in 63 characters. Deterministic."""
    base = "-".join(p for p in parts if p)
    digest = short_hash(base)
    prefix = base[: MAX_NAME - _HASH_LEN - 1].rstrip("-")
    return f"{prefix}-{digest}"


def replica_name(namespace: str, deployment: str, cluster: str, index: int) -> str:
    """The name of replica ``index`` of ``namespace/deployment`` on ``cluster``.

    The namespace is part of the hash so that two deployments with one name in two namespaces
    never share replica names."""
    prefix = deployment[: MAX_NAME - _HASH_LEN - 1].rstrip("-")
    return f"{prefix}-{short_hash(f'{namespace}/{deployment}-{cluster}-{index}')}"


def workload_namespace(namespace: str) -> str:
    """The namespace on a workload cluster that mirrors a deployment's namespace."""
    name = f"mf-{namespace}"
    return name if len(name) <= MAX_NAME else child_name("mf", namespace)
