"""The ReplicaSet controller of a simulated cluster: keeps ``spec.replicas`` pods of a
ReplicaSet's template (named ``<replicaset>-<random>``, owned by the ReplicaSet, carrying its
``pod-template-hash``), removes the surplus in the real controller's order, and reports the
ReplicaSet's status.

Development/test emulator only: product code never imports ``modelfleet.sim``. Writes through the
cluster's store (:class:`~.context.ClusterContext`); :func:`replicaset_status` is pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from modelfleet.sim.apiserver.selectors import label_selector_from_object
from modelfleet.sim.controllers.context import ClusterContext, meta_of
from modelfleet.sim.controllers.object_helpers import (
    CONTROLLER_MANAGER,
    POD_TEMPLATE_HASH,
    pod_from_template,
    pod_is_ready,
)

__all__ = ["ReplicaSetController", "owned_pods", "replicaset_status"]

REPLICASET_CONTROLLER = "replicaset-controller"


def owned_pods(ctx: ClusterContext, owner: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The live pods ``owner`` controls (by owner reference, within its selector)."""
    meta = meta_of(owner)
    selector = label_selector_from_object((owner.get("spec") or {}).get("selector"))
    uid = meta.get("uid")
    return [
        p
        for p in ctx.pods(str(meta.get("namespace", "")), selector)
        if any(r.get("uid") == uid for r in meta_of(p).get("ownerReferences") or [])
        and not meta_of(p).get("deletionTimestamp")
    ]


class ReplicaSetController:
    def __init__(self, ctx: ClusterContext) -> None:
        self._ctx = ctx

    async def reconcile(self, namespace: str, name: str) -> None:
        ctx = self._ctx
        rs = ctx.peek("replicaset", namespace, name)
        if rs is None or meta_of(rs).get("deletionTimestamp"):
            return  # owner-reference garbage collection removes the pods
        spec = rs.get("spec") or {}
        desired = int(spec.get("replicas", 1))
        pods = owned_pods(ctx, rs)
        hash_ = str((meta_of(rs).get("labels") or {}).get(POD_TEMPLATE_HASH, ""))
        for _ in range(desired - len(pods)):
            await ctx.store.create(pod_for_replicaset(rs, hash_), field_manager=CONTROLLER_MANAGER)
        if len(pods) > desired:
            # As the real controller ranks them: unbound, then not ready, then the newest go
            # first, since they cost least to lose. (Sorts are stable: newest-first survives.)
            newest_first = sorted(pods, key=ctx.arrival_of, reverse=True)
            victims = sorted(
                newest_first,
                key=lambda p: (bool((p.get("spec") or {}).get("nodeName")), pod_is_ready(p)),
            )
            for pod in victims[: len(pods) - desired]:
                await ctx.delete_pod(pod)
        rs = ctx.peek("replicaset", namespace, name)
        if rs is None:
            return
        await ctx.write_status("replicaset", rs, replicaset_status(rs, owned_pods(ctx, rs)))


def pod_for_replicaset(rs: Mapping[str, Any], hash_: str) -> dict[str, Any]:
    """A new pod of ``rs`` (named by the store from ``generateName``)."""
    template = (rs.get("spec") or {}).get("template") or {}
    labels = {POD_TEMPLATE_HASH: hash_} if hash_ else {}
    pod = pod_from_template(template, rs, labels)
    pod["metadata"]["generateName"] = f"{rs['metadata']['name']}-"
    return pod


def replicaset_status(rs: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    ready = sum(1 for p in pods if pod_is_ready(p))
    return {
        "observedGeneration": meta_of(rs).get("generation", 1),
        "replicas": len(pods),
        "fullyLabeledReplicas": len(pods),
        # None removes the field through the merge patch; Kubernetes omits it when zero.
        "readyReplicas": ready or None,
        "availableReplicas": ready or None,
    }
