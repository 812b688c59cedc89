"""Azure Resource Manager's wire shapes for the simulated AKS: the errors each fault is answered
with (at the call, and at the end of a long-running operation), the operation record and its
status JSON, and the user kubeconfig ``listClusterUserCredential`` returns.

Development/test emulator only; imports nothing of the product.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import yaml
from aiohttp import web

from modelfleet.sim.clouds.faults import ErrorKind
from modelfleet.sim.clouds.kube import CloudNodePool

API_VERSION = "2026-08-01"
PROVIDER = "providers/Microsoft.ContainerService"
# (HTTP status, ARM error code, message) per error kind at the call.
CALL_ERRORS: dict[ErrorKind, tuple[int, str, str]] = {
    ErrorKind.QUOTA: (
        400,
        "QuotaExceeded",
        "Operation could not be completed as it results in exceeding approved {family} Cores "
        "quota. Additional details - Deployment Model: Resource Manager, Location: {location}, "
        "Current Limit: 0, Current Usage: 0, Additional Required: 96. Submit a request for "
        "Quota increase.",
    ),
    ErrorKind.STOCKOUT: (
        409,
        "SkuNotAvailable",
        "The requested VM size for resource 'Following SKUs have failed for Capacity "
        "Restrictions: {vm}' is currently not available in location '{location}'. Please try "
        "another size or deploy to a different location or zones.",
    ),
    ErrorKind.PERMISSION: (
        403,
        "AuthorizationFailed",
        "The client does not have authorization to perform action "
        "'Microsoft.ContainerService/managedClusters/write' over scope '{scope}' or the scope "
        "is invalid.",
    ),
    ErrorKind.CONFLICT: (409, "Conflict", "The resource '{scope}' is in a conflicting state."),
    ErrorKind.UNAVAILABLE: (
        503,
        "ServiceUnavailable",
        "The service is currently unavailable; try again later.",
    ),
    ErrorKind.THROTTLED: (
        429,
        "TooManyRequests",
        "The request is being throttled as the limit has been reached for operation type.",
    ),
    ErrorKind.INVALID: (400, "InvalidParameter", "The value of a parameter is invalid."),
    ErrorKind.BAD_MACHINE_TYPE: (
        400,
        "InvalidParameter",
        "The value of parameter agentPoolProfile.vmSize is invalid: {vm} is not a VM size "
        "available in {location}.",
    ),
}
# How an operation ends on each error kind (its async status ``error``).
OPERATION_ERRORS: dict[ErrorKind, tuple[str, str]] = {
    ErrorKind.QUOTA: CALL_ERRORS[ErrorKind.QUOTA][1:],
    ErrorKind.STOCKOUT: (
        "ZonalAllocationFailed",
        "Allocation failed. We do not have sufficient capacity for the requested VM size "
        "{vm} in this zone. Read more about improving likelihood of allocation success.",
    ),
}


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ArmError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass
class Operation:
    id: str
    location: str
    subscription: str
    kind: str  # create-cluster, delete-cluster, put-pool, delete-pool
    key: tuple[str, str, str]  # (subscription, resource group, cluster)
    pool: str | None
    fault: ErrorKind | None
    words: dict[str, str]
    polls: int = 0
    status: str = "InProgress"
    error: tuple[str, str] | None = None
    start: str = field(default_factory=now)
    end: str | None = None


def operation_json(op: Operation) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": f"/subscriptions/{op.subscription}/{PROVIDER}/locations/{op.location}/"
        f"operations/{op.id}",
        "name": op.id,
        "status": op.status,
        "startTime": op.start,
    }
    if op.end:
        out["endTime"] = op.end
    if op.error is not None:
        out["error"] = {"code": op.error[0], "message": op.error[1]}
    return out


def quota_family(vm: str) -> str:
    """The quota family Azure names for a VM size (``Standard_ND96isr_H100_v5`` ->
    ``standardNDISRH100v5Family``), near enough for an error message."""
    parts = vm.split("_")[1:] if "_" in vm else [vm]
    letters = "".join(ch for ch in (parts[0] if parts else "") if not ch.isdigit()).upper()
    rest = "".join(parts[1:]).replace("_", "")
    return f"standard{letters}{rest}Family"


def agent_pool_json(scope: str, name: str, props: dict[str, Any]) -> dict[str, Any]:
    """An agent pool resource as ARM returns it (``scope``: its managed cluster's ID)."""
    return {
        "id": f"{scope}/agentPools/{name}",
        "name": name,
        "type": "Microsoft.ContainerService/managedClusters/agentPools",
        "properties": props,
    }


def node_pool(pool: dict[str, Any]) -> CloudNodePool:
    """The nodes a finished agent pool brings up, with the labels AKS puts on them."""
    props = pool["properties"]
    return CloudNodePool(
        name=pool["name"],
        machine=str(props.get("vmSize", "")),
        accelerator=None,
        node_count=int(props.get("count") or 0),
        labels=dict(props.get("nodeLabels") or {}),
        taints=[_taint(t) for t in props.get("nodeTaints") or []],
        zones=list(props.get("availabilityZones") or []),
        cloud_labels={"kubernetes.azure.com/agentpool": pool["name"], "agentpool": pool["name"]},
    )


def _taint(text: str) -> dict[str, str]:
    """``key=value:Effect`` (or ``key:Effect``) as a Node taint."""
    head, _, effect = text.rpartition(":")
    key, _, value = head.partition("=")
    return {"key": key, "value": value, "effect": effect or "NoSchedule"}


def user_kubeconfig(server: str, resource_group: str, name: str, token: str) -> str:
    """The base64 kubeconfig AKS returns for a cluster user (a token user, as Entra-less AKS)."""
    user = f"clusterUser_{resource_group}_{name}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user}}],
        "current-context": name,
    }
    return base64.b64encode(yaml.safe_dump(config, sort_keys=False).encode()).decode()


def arm_error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status)


def refused(request: web.Request, token: str | None) -> web.Response | None:
    """ARM's answer to a call without the bearer token (when one is set) or an api-version."""
    if token is not None and request.headers.get("Authorization") != f"Bearer {token}":
        return arm_error(401, "InvalidAuthenticationToken", "The access token is invalid.")
    if request.query.get("api-version") is None:
        return arm_error(
            400,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        )
    return None


__all__ = [
    "API_VERSION",
    "CALL_ERRORS",
    "OPERATION_ERRORS",
    "PROVIDER",
    "ArmError",
    "Operation",
    "agent_pool_json",
    "arm_error",
    "node_pool",
    "now",
    "operation_json",
    "quota_family",
    "refused",
    "user_kubeconfig",
]
