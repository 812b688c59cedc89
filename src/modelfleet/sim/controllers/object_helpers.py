"""Helpers over Kubernetes objects shared by the simulated controllers: status conditions (with
transition times carried over), controller owner references, pods stamped from a template, pod
readiness, and a stable digest of a JSON value.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure; no I/O.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "CONTROLLER_MANAGER",
    "LWS_GROUP_INDEX",
    "LWS_NAME",
    "LWS_REVISION",
    "LWS_WORKER_INDEX",
    "POD_TEMPLATE_HASH",
    "condition",
    "merge_conditions",
    "owner_reference",
    "pod_from_template",
    "pod_is_ready",
    "stable_digest",
]

CONTROLLER_MANAGER = "kube-controller-manager"

# Well-known labels and annotations the controllers set and read.
POD_TEMPLATE_HASH = "pod-template-hash"
LWS_PREFIX = "leaderworkerset.sigs.k8s.io"
LWS_NAME = f"{LWS_PREFIX}/name"
LWS_GROUP_INDEX = f"{LWS_PREFIX}/group-index"
LWS_WORKER_INDEX = f"{LWS_PREFIX}/worker-index"
LWS_GROUP_KEY = f"{LWS_PREFIX}/group-key"
LWS_REVISION = f"{LWS_PREFIX}/template-revision-hash"
LWS_SIZE_ANNOTATION = f"{LWS_PREFIX}/size"
LWS_LEADER_ANNOTATION = f"{LWS_PREFIX}/leader-name"


def stable_digest(value: Any) -> str:
    """A stable short hex digest of a JSON value: a pod-template-hash or LWS revision of a
    template, and a deterministic seed for fake image digests and node IPs."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def condition(type_: str, status: bool, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
    }


def merge_conditions(
    old: Sequence[Mapping[str, Any]] | None, new: Sequence[dict[str, Any]], now: str
) -> list[dict[str, Any]]:
    """``new`` with transition times carried over from ``old`` where the status did not change,
    so that rewriting an unchanged status is a no-op."""
    previous = {c.get("type"): c for c in old or [] if isinstance(c, Mapping)}
    out = []
    for cond in new:
        before = previous.get(cond["type"])
        merged = dict(cond)
        if before is not None and before.get("status") == cond["status"]:
            merged["lastTransitionTime"] = before.get("lastTransitionTime", now)
            same = before.get("reason") == cond.get("reason") and before.get("message") == cond.get(
                "message"
            )
            if "lastUpdateTime" in before or "lastUpdateTime" in cond:
                merged["lastUpdateTime"] = before.get("lastUpdateTime", now) if same else now
        else:
            merged["lastTransitionTime"] = now
        out.append(merged)
    return out


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod_from_template(
    template: Mapping[str, Any], owner: Mapping[str, Any], labels: Mapping[str, str]
) -> dict[str, Any]:
    tmeta = template.get("metadata") or {}
    spec = copy.deepcopy(dict(template.get("spec") or {}))
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    metadata: dict[str, Any] = {
        "namespace": owner["metadata"].get("namespace", "default"),
        "labels": {**(tmeta.get("labels") or {}), **labels},
        "ownerReferences": [owner_reference(owner)],
    }
    if tmeta.get("annotations"):
        metadata["annotations"] = dict(tmeta["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def pod_is_ready(pod: Mapping[str, Any]) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False
