"""``modelfleet sim faults --cloud gke|eks|aks``: cloud errors on demand for the simulated clouds of
``sim up`` or ``modelfleet dev`` ("the next node pool creation fails with a stockout").

The state file names each fake's address; a fault is POSTed to its ``/_admin/faults`` endpoint
(see ``modelfleet.sim.clouds.faults``), which the fake consults on every call. Pure mapping from
the command line to that request body, plus the standard-library HTTP call in cli/sim.py.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from modelfleet.cli.errors import UsageError


class Cloud(StrEnum):
    GKE = "gke"
    EKS = "eks"
    AKS = "aks"


class CloudError(StrEnum):
    QUOTA = "quota"
    STOCKOUT = "stockout"
    BAD_MACHINE_TYPE = "bad-machine-type"
    PERMISSION = "permission"
    UNAVAILABLE = "unavailable"
    THROTTLED = "throttled"
    CONFLICT = "conflict"
    INVALID = "invalid"


class CloudStep(StrEnum):
    CREATE_CLUSTER = "create-cluster"
    CREATE_POOL = "create-pool"
    DELETE_POOL = "delete-pool"
    DELETE_CLUSTER = "delete-cluster"


class When(StrEnum):
    CALL = "call"
    OPERATION = "operation"


# The API method each cloud's fake knows a step by.
OPERATIONS: dict[Cloud, dict[CloudStep, str]] = {
    Cloud.GKE: {
        CloudStep.CREATE_CLUSTER: "createCluster",
        CloudStep.CREATE_POOL: "createNodePool",
        CloudStep.DELETE_POOL: "deleteNodePool",
        CloudStep.DELETE_CLUSTER: "deleteCluster",
    },
    Cloud.EKS: {
        CloudStep.CREATE_CLUSTER: "CreateCluster",
        CloudStep.CREATE_POOL: "CreateNodegroup",
        CloudStep.DELETE_POOL: "DeleteNodegroup",
        CloudStep.DELETE_CLUSTER: "DeleteCluster",
    },
    # ARM operation IDs.
    Cloud.AKS: {
        CloudStep.CREATE_CLUSTER: "ManagedClusters_CreateOrUpdate",
        CloudStep.CREATE_POOL: "AgentPools_CreateOrUpdate",
        CloudStep.DELETE_POOL: "AgentPools_Delete",
        CloudStep.DELETE_CLUSTER: "ManagedClusters_Delete",
    },
}
# Where each error surfaces on a real cloud unless told otherwise: quota and stockouts when the
# operation (the pool's machines) runs, the others when the API call is made.
DEFAULT_WHEN = {CloudError.QUOTA: When.OPERATION, CloudError.STOCKOUT: When.OPERATION}


def fault_body(
    cloud: Cloud,
    error: CloudError,
    step: CloudStep,
    target: str | None,
    times: int,
    when: When | None,
) -> dict[str, Any]:
    """The ``CloudFault`` the fake's admin endpoint takes."""
    stage = when or DEFAULT_WHEN.get(error, When.CALL)
    deleting = step in (CloudStep.DELETE_POOL, CloudStep.DELETE_CLUSTER)
    if stage is When.OPERATION and deleting and cloud is Cloud.EKS:
        raise UsageError("EKS deletions fail only at the call: use --when call")
    body: dict[str, Any] = {
        "operation": OPERATIONS[cloud][step],
        "error": error.value,
        "times": times,
        "stage": stage.value,
    }
    if target:
        body["target"] = target
    return body


def admin_url(state: dict[str, Any], cloud: Cloud, state_path: str) -> str:
    """The fake's fault endpoint from the state file, or a clear error when it has none."""
    clouds = state.get("clouds") or {}
    base = clouds.get(cloud.value)
    if not isinstance(base, str):
        raise UsageError(
            f"the simulated fleet of {state_path} runs no simulated clouds; start it with "
            "`modelfleet sim up` (clouds are on unless --no-clouds) or `modelfleet dev`"
        )
    return f"{base}/_admin/faults"
