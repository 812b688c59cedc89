"""The Deployment controller of a simulated cluster: one ReplicaSet per pod-template hash
(``<deployment>-<hash>``, owned by the Deployment), scaled to the desired count; a template change
surges a full new ReplicaSet and scales the old ones to zero once the new one's pods are all
ready; old ReplicaSets beyond ``revisionHistoryLimit`` are deleted. Reports the Deployment's
status from the pods of its ReplicaSets and records ``ScalingReplicaSet`` events.

Development/test emulator only: product code never imports ``modelfleet.sim``. Writes through the
cluster's store (:class:`~.context.ClusterContext`); :func:`replicaset_for_deployment` and
:func:`deployment_status` are pure. The pods themselves are the ReplicaSet controller's
(:mod:`.replicaset_controller`).

Simplification (deliberate, so nobody mistakes it for Kubernetes behaviour): the surge is the
whole new set at once rather than maxSurge at a time; pod CPU/memory requests are not accounted.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from modelfleet.sim.apiserver.object_table import now_rfc3339
from modelfleet.sim.controllers.context import ClusterContext, meta_of
from modelfleet.sim.controllers.object_helpers import (
    CONTROLLER_MANAGER,
    POD_TEMPLATE_HASH,
    condition,
    merge_conditions,
    owner_reference,
    pod_is_ready,
    stable_digest,
)
from modelfleet.sim.controllers.replicaset_controller import owned_pods

__all__ = [
    "DeploymentController",
    "deployment_status",
    "replicaset_for_deployment",
    "template_hash",
]

_REVISION = "deployment.kubernetes.io/revision"
DEPLOYMENT_CONTROLLER = "deployment-controller"


class DeploymentController:
    def __init__(self, ctx: ClusterContext) -> None:
        self._ctx = ctx

    def _owned_sets(self, dep: Mapping[str, Any]) -> list[dict[str, Any]]:
        meta = meta_of(dep)
        uid = meta.get("uid")
        rt = self._ctx.rt("replicaset")
        return [
            rs
            for rs in self._ctx.store.list_objects(rt, namespace=str(meta.get("namespace"))).items
            if any(r.get("uid") == uid for r in meta_of(rs).get("ownerReferences") or [])
            and not meta_of(rs).get("deletionTimestamp")
        ]

    async def _scale(self, dep: Mapping[str, Any], rs: Mapping[str, Any], replicas: int) -> None:
        old = int((rs.get("spec") or {}).get("replicas", 0))
        if old == replicas:
            return
        meta = meta_of(rs)
        await self._ctx.store.patch(
            "apps/v1",
            "ReplicaSet",
            str(meta["name"]),
            {"spec": {"replicas": replicas}},
            namespace=meta.get("namespace"),
            field_manager=CONTROLLER_MANAGER,
        )
        verb = "up" if replicas > old else "down"
        await self._ctx.events.record(
            dep,
            "Normal",
            "ScalingReplicaSet",
            f"Scaled {verb} replica set {meta['name']} from {old} to {replicas}",
            component=DEPLOYMENT_CONTROLLER,
        )

    async def reconcile(self, namespace: str, name: str) -> None:
        ctx = self._ctx
        dep = ctx.peek("deployment", namespace, name)
        if dep is None or meta_of(dep).get("deletionTimestamp"):
            return  # owner-reference garbage collection removes the ReplicaSets and pods
        spec = dep.get("spec") or {}
        desired = int(spec.get("replicas", 1))
        current_hash = template_hash(spec.get("template") or {})
        sets = self._owned_sets(dep)
        current = next(
            (
                rs
                for rs in sets
                if (meta_of(rs).get("labels") or {}).get(POD_TEMPLATE_HASH) == current_hash
            ),
            None,
        )
        old = [rs for rs in sets if rs is not current]
        newest = max((_revision(rs) for rs in sets), default=0)
        if current is None:
            current = await ctx.store.create(
                replicaset_for_deployment(dep, current_hash, newest + 1, replicas=0),
                field_manager=CONTROLLER_MANAGER,
            )
        elif _revision(current) < newest:
            # Back to an older template (`kubectl rollout undo`): its ReplicaSet is reused and
            # becomes the newest revision, as the real controller does.
            current = await ctx.store.patch(
                "apps/v1",
                "ReplicaSet",
                str(meta_of(current)["name"]),
                {"metadata": {"annotations": {_REVISION: str(newest + 1)}}},
                namespace=namespace,
                field_manager=CONTROLLER_MANAGER,
            )
        await self._scale(dep, current, desired)
        ready_current = sum(1 for p in owned_pods(ctx, current) if pod_is_ready(p))
        if desired == 0 or ready_current >= desired:
            for rs in old:
                await self._scale(dep, rs, 0)
        limit = int(spec.get("revisionHistoryLimit", 10))
        retired = [rs for rs in old if not (rs.get("spec") or {}).get("replicas")]
        retired.sort(key=_revision)
        for rs in retired[: max(0, len(retired) - limit)]:
            await ctx.store.delete(
                "apps/v1", "ReplicaSet", str(meta_of(rs)["name"]), namespace=namespace
            )
        dep = ctx.peek("deployment", namespace, name)
        if dep is None:
            return
        pods = [p for rs in self._owned_sets(dep) for p in owned_pods(ctx, rs)]
        await ctx.write_status(
            "deployment", dep, deployment_status(dep, pods, current_hash, now_rfc3339())
        )


def _revision(rs: Mapping[str, Any]) -> int:
    raw = (meta_of(rs).get("annotations") or {}).get(_REVISION, 0)
    try:
        return int(raw)
    except (TypeError, ValueError):
        return 0


def template_hash(template: Mapping[str, Any]) -> str:
    """The pod-template hash of a Deployment's template, computed (like the real controller's)
    without the ``pod-template-hash`` label and a null ``creationTimestamp``, so a template
    copied back from a ReplicaSet (``kubectl rollout undo``) finds that ReplicaSet again."""
    normal = copy.deepcopy(dict(template))
    meta = normal.get("metadata")
    if isinstance(meta, dict):
        if meta.get("creationTimestamp") is None:
            meta.pop("creationTimestamp", None)
        labels = meta.get("labels")
        if isinstance(labels, dict):
            labels.pop(POD_TEMPLATE_HASH, None)
        if not meta:
            normal.pop("metadata")
    return stable_digest(normal)


def replicaset_for_deployment(
    deployment: Mapping[str, Any], hash_: str, revision: int, *, replicas: int
) -> dict[str, Any]:
    """The ReplicaSet of ``deployment``'s template with hash ``hash_``."""
    meta = deployment["metadata"]
    spec = deployment.get("spec") or {}
    template = copy.deepcopy(dict(spec.get("template") or {}))
    tmeta = template.setdefault("metadata", {})
    tmeta["labels"] = {**(tmeta.get("labels") or {}), POD_TEMPLATE_HASH: hash_}
    selector = copy.deepcopy(dict(spec.get("selector") or {}))
    selector["matchLabels"] = {**(selector.get("matchLabels") or {}), POD_TEMPLATE_HASH: hash_}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{meta['name']}-{hash_}",
            "namespace": meta.get("namespace", "default"),
            "labels": dict(tmeta["labels"]),
            "annotations": {
                _REVISION: str(revision),
                "deployment.kubernetes.io/desired-replicas": str(spec.get("replicas", 1)),
            },
            "ownerReferences": [owner_reference(deployment)],
        },
        "spec": {
            "replicas": replicas,
            "minReadySeconds": int(spec.get("minReadySeconds", 0)),
            "selector": selector,
            "template": template,
        },
    }


def _int_or_percent(value: Any, total: int, *, round_up: bool) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.endswith("%"):
        pct = float(text[:-1]) / 100.0 * total
        return int(-(-pct // 1)) if round_up else int(pct // 1)
    return int(text)


def deployment_status(
    deployment: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    current_hash: str,
    now: str,
) -> dict[str, Any]:
    """The status the Deployment controller would report for these pods."""
    spec = deployment.get("spec") or {}
    meta = deployment["metadata"]
    desired = int(spec.get("replicas", 1))
    strategy = spec.get("strategy") or {}
    if strategy.get("type") == "Recreate":
        max_unavailable = 0
    else:
        rolling = strategy.get("rollingUpdate") or {}
        max_unavailable = _int_or_percent(
            rolling.get("maxUnavailable", "25%"), desired, round_up=False
        )
    updated = [
        p for p in pods if p["metadata"].get("labels", {}).get(POD_TEMPLATE_HASH) == current_hash
    ]
    ready = sum(1 for p in pods if pod_is_ready(p))
    available = ready
    minimum = max(0, desired - max_unavailable)
    is_available = available >= minimum
    rs_name = f"{meta['name']}-{current_hash}"
    complete = len(updated) == desired and len(pods) == desired and available >= desired
    conditions = [
        condition(
            "Available",
            is_available,
            "MinimumReplicasAvailable" if is_available else "MinimumReplicasUnavailable",
            "Deployment has minimum availability."
            if is_available
            else "Deployment does not have minimum availability.",
        ),
        condition(
            "Progressing",
            True,
            "NewReplicaSetAvailable" if complete else "ReplicaSetUpdated",
            f'ReplicaSet "{rs_name}" has successfully progressed.'
            if complete
            else f'ReplicaSet "{rs_name}" is progressing.',
        ),
    ]
    old_conditions = (deployment.get("status") or {}).get("conditions")
    status: dict[str, Any] = {
        "observedGeneration": meta.get("generation", 1),
        "replicas": len(pods),
        "updatedReplicas": len(updated),
        "readyReplicas": ready,
        "availableReplicas": available,
        "conditions": merge_conditions(old_conditions, conditions, now),
    }
    # None removes the field through the merge patch; Kubernetes omits it when zero.
    status["unavailableReplicas"] = max(0, desired - available) or None
    return status
