"""The Deployment controller of a simulated cluster: creates a Deployment's pods from its
template, rolls them when the template changes, scales, and reports the Deployment's status.

Development/test emulator only: product code never imports ``modelfleet.sim``. Writes through the
cluster's store (:class:`~.context.ClusterContext`); :func:`pod_for_deployment` and
:func:`deployment_status` are pure.

Simplification (deliberate, so nobody mistakes it for Kubernetes behaviour): the Deployment owns
its pods directly, with no ReplicaSets; a template change surges a full new set of pods (labelled
with the new ``pod-template-hash``) and deletes the old ones once the new ones are all ready.
Pod CPU/memory requests are not accounted. A ReplicaSet controller would go in
``replicaset_controller.py`` beside this one: this controller would then create one ReplicaSet per
template hash and scale it (the ``rs_name`` its conditions already name), and the pod creation,
ranking and deletion below would move there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from modelfleet.sim.apiserver.object_table import now_rfc3339
from modelfleet.sim.apiserver.selectors import label_selector_from_object
from modelfleet.sim.controllers.context import ClusterContext, meta_of
from modelfleet.sim.controllers.object_helpers import (
    CONTROLLER_MANAGER,
    POD_TEMPLATE_HASH,
    condition,
    merge_conditions,
    pod_from_template,
    pod_is_ready,
    stable_digest,
)

__all__ = ["DeploymentController", "deployment_status", "pod_for_deployment"]


class DeploymentController:
    def __init__(self, ctx: ClusterContext) -> None:
        self._ctx = ctx

    def _owned_pods(self, namespace: str, selector: Any, uid: str) -> list[dict[str, Any]]:
        return [
            p
            for p in self._ctx.pods(namespace, selector)
            if any(r.get("uid") == uid for r in meta_of(p).get("ownerReferences") or [])
            and not meta_of(p).get("deletionTimestamp")
        ]

    async def reconcile(self, namespace: str, name: str) -> None:
        ctx = self._ctx
        dep = ctx.peek("deployment", namespace, name)
        if dep is None or meta_of(dep).get("deletionTimestamp"):
            return  # owner-reference garbage collection removes the pods
        uid = meta_of(dep)["uid"]
        spec = dep.get("spec") or {}
        desired = int(spec.get("replicas", 1))
        current_hash = stable_digest(spec.get("template") or {})
        selector = label_selector_from_object(spec.get("selector"))
        pods = self._owned_pods(namespace, selector, uid)
        current = [
            p for p in pods if meta_of(p).get("labels", {}).get(POD_TEMPLATE_HASH) == current_hash
        ]
        old = [p for p in pods if p not in current]
        for _ in range(desired - len(current)):
            await ctx.store.create(
                pod_for_deployment(dep, current_hash), field_manager=CONTROLLER_MANAGER
            )
        if len(current) > desired:
            # As the ReplicaSet controller ranks them: unbound, then not ready, then the newest
            # go first, since they cost least to lose. (Sorts are stable: newest-first survives.)
            newest_first = sorted(current, key=ctx.arrival_of, reverse=True)
            victims = sorted(
                newest_first,
                key=lambda p: (bool((p.get("spec") or {}).get("nodeName")), pod_is_ready(p)),
            )
            for pod in victims[: len(current) - desired]:
                await ctx.delete_pod(pod)
        ready_current = sum(1 for p in current if pod_is_ready(p))
        if old and (desired == 0 or ready_current >= desired):
            for pod in old:
                await ctx.delete_pod(pod)
        dep = ctx.peek("deployment", namespace, name)
        if dep is None:
            return
        pods = self._owned_pods(namespace, selector, uid)
        await ctx.write_status(
            "deployment", dep, deployment_status(dep, pods, current_hash, now_rfc3339())
        )


def pod_for_deployment(deployment: Mapping[str, Any], hash_: str) -> dict[str, Any]:
    """A new pod of ``deployment`` (named by the store from ``generateName``)."""
    template = (deployment.get("spec") or {}).get("template") or {}
    pod = pod_from_template(template, deployment, {POD_TEMPLATE_HASH: hash_})
    pod["metadata"]["generateName"] = f"{deployment['metadata']['name']}-{hash_}-"
    return pod


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
