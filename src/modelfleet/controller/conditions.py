"""What the controller writes to an object's status subresource: observedGeneration, the
Ready/Progressing/Degraded conditions (with the scheduler's reasons for a deployment),
replicas, readyReplicas and the label selector the scale subresource reads. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modelfleet.api.naming import LABEL_DEPLOYMENT, LABEL_NAMESPACE
from modelfleet.contracts.status import DeploymentStatus

Status = dict[str, Any]


def condition(kind: str, status: bool | None, reason: str, message: str = "") -> dict[str, str]:
    return {
        "type": kind,
        "status": "Unknown" if status is None else ("True" if status else "False"),
        "reason": reason,
        "message": message,
    }


def deployment_selector(namespace: str, name: str) -> str:
    """The label selector of a deployment's pods (what an HPA reads through /scale)."""
    return f"{LABEL_DEPLOYMENT}={name},{LABEL_NAMESPACE}={namespace}"


def _reason(status: DeploymentStatus, kind: str, fallback: str) -> str:
    for c in status.conditions:
        if c.type == kind:
            return c.reason
    return fallback


def deployment_status(
    status: DeploymentStatus, generation: int, namespace: str, name: str
) -> Status:
    """The status subresource of a ModelDeployment whose workflow answered ``status`` for the
    spec of ``generation``."""
    phase = status.phase
    message = status.summary or phase
    unscheduled = next(
        (c for c in status.conditions if c.type == "ReplicasScheduled" and c.status == "False"),
        None,
    )
    if unscheduled is not None and unscheduled.message and unscheduled.message not in message:
        message = f"{message} · {unscheduled.message}"
    ready = phase == "Ready"
    progressing = phase in ("Progressing", "Pending", "Deleting")
    degraded = phase == "Degraded"
    ready_reason = "AllReplicasReady" if ready else _reason(status, "ReplicasReady", phase)
    if not ready and unscheduled is not None:
        ready_reason = unscheduled.reason or "ReplicasUnscheduled"
    return {
        "observedGeneration": generation,
        "phase": phase,
        "replicas": status.scheduled,
        "readyReplicas": status.ready,
        "updatedReplicas": status.updated,
        "selector": deployment_selector(namespace, name),
        "message": message,
        "conditions": [
            condition("Ready", ready, ready_reason, message),
            condition("Progressing", progressing, phase, message),
            condition("Degraded", degraded, phase if degraded else "AsExpected", message),
        ],
    }


def handed_status(generation: int, workflow_id: str) -> Status:
    """A kind modelfleet holds without replicas to count: Ready once its workflow took it."""
    message = f"held by workflow {workflow_id}"
    return {
        "observedGeneration": generation,
        "phase": "Ready",
        "message": message,
        "conditions": [
            condition("Ready", True, "Applied", message),
            condition("Progressing", False, "Applied", message),
            condition("Degraded", False, "AsExpected", message),
        ],
    }


def refused_status(generation: int, reason: str, message: str, phase: str) -> Status:
    """The object is not acted upon (invalid, a scaler conflict, a refused deletion): Ready
    False with why; nothing that runs was changed."""
    return {
        "observedGeneration": generation,
        "phase": phase,
        "message": message,
        "conditions": [
            condition("Ready", False, reason, message),
            condition("Progressing", False, reason, message),
            condition("Degraded", True, reason, message),
        ],
    }


def differs(current: Mapping[str, Any] | None, wanted: Status) -> bool:
    """Whether writing ``wanted`` would change the object's status (only the fields written)."""
    current = current or {}
    return any(current.get(k) != v for k, v in wanted.items())
