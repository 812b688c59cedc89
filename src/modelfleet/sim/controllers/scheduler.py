"""The scheduler of a simulated cluster, with DRA: binds each pending pod (oldest first) to the
first node that fits (:mod:`.device_allocation`) once its PersistentVolumeClaims are Bound,
creating and allocating the pod's ResourceClaims, or marks it Unschedulable with a
kube-scheduler-style message. It keeps a ledger
of which pod holds which device, and caches the node and DeviceClass views until they change.

Development/test emulator only: product code never imports ``modelfleet.sim``. Writes through the
cluster's store (:class:`~.context.ClusterContext`); hands a bound pod to the :mod:`.kubelet`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from modelfleet.sim.apiserver.object_table import now_rfc3339
from modelfleet.sim.controllers.context import ClusterContext, meta_of
from modelfleet.sim.controllers.device_allocation import (
    ClaimRequest,
    NodeState,
    allocate_on_node,
    claim_requests,
    fit_failure,
    match_attribute,
    node_states,
    unschedulable_message,
)
from modelfleet.sim.controllers.gang_admission import GangAdmission, KaiGang
from modelfleet.sim.controllers.gang_objects import KAI_SCHEDULER, is_gpu_driver
from modelfleet.sim.controllers.kubelet import Kubelet
from modelfleet.sim.controllers.object_helpers import condition, merge_conditions, owner_reference

__all__ = ["SCHEDULER", "Scheduler"]

SCHEDULER = "default-scheduler"


@dataclass
class _Ledger:
    """Which pod holds which device (driver, pool, device)."""

    owner: dict[tuple[str, str, str], str] = field(default_factory=dict)
    by_pod: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)

    def hold(self, pod_uid: str, keys: Iterable[tuple[str, str, str]]) -> None:
        for key in keys:
            self.owner[key] = pod_uid
            self.by_pod.setdefault(pod_uid, []).append(key)

    def release(self, pod_uid: str) -> bool:
        keys = self.by_pod.pop(pod_uid, [])
        for key in keys:
            if self.owner.get(key) == pod_uid:
                del self.owner[key]
        return bool(keys)


class Scheduler:
    """Binding and device allocation for one simulated cluster."""

    def __init__(self, ctx: ClusterContext, kubelet: Kubelet) -> None:
        self._ctx = ctx
        self._kubelet = kubelet
        self._ledger = _Ledger()
        self._nodes: list[NodeState] | None = None
        self._device_classes: dict[str, list[str]] | None = None
        self.gangs = GangAdmission(ctx)

    def nodes_changed(self) -> None:
        self._nodes = None

    def device_classes_changed(self) -> None:
        self._device_classes = None

    def pod_gone(self, uid: str) -> bool:
        """Free the devices a deleted pod held; True if it held any."""
        return self._ledger.release(uid)

    def _node_view(self) -> list[NodeState]:
        if self._nodes is None:
            nodes = self._ctx.store.list_objects(self._ctx.rt("node")).items
            slices = self._ctx.store.list_objects(self._ctx.rt("slice")).items
            self._nodes = node_states(nodes, slices)
        return self._nodes

    def _class_view(self) -> dict[str, list[str]]:
        if self._device_classes is None:
            classes: dict[str, list[str]] = {}
            for dc in self._ctx.store.list_objects(self._ctx.rt("deviceclass")).items:
                classes[str(meta_of(dc)["name"])] = [
                    str((s.get("cel") or {}).get("expression"))
                    for s in (dc.get("spec") or {}).get("selectors") or []
                    if (s.get("cel") or {}).get("expression")
                ]
            self._device_classes = classes
        return self._device_classes

    def rebuild_ledger(self) -> None:
        """Adopt the allocations of the ResourceClaims already in the store."""
        for claim in self._ctx.store.list_objects(self._ctx.rt("claim")).items:
            status = claim.get("status") or {}
            results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
            for holder in status.get("reservedFor") or []:
                uid = str(holder.get("uid", ""))
                self._ledger.hold(
                    uid, [(str(r["driver"]), str(r["pool"]), str(r["device"])) for r in results]
                )

    def _pod_claims(
        self, pod: Mapping[str, Any]
    ) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
        """(claim name, claim spec) per pod claim, or an error when a template is missing."""
        namespace = str(meta_of(pod).get("namespace", "default"))
        out = []
        for ref in (pod.get("spec") or {}).get("resourceClaims") or []:
            claim_name = str(ref.get("name", ""))
            template_name = ref.get("resourceClaimTemplateName")
            if template_name:
                rct = self._ctx.peek("rct", namespace, str(template_name))
                if rct is None:
                    return [], (
                        f'resourceclaimtemplate.resource.k8s.io "{template_name}" not found'
                    )
                out.append((claim_name, dict((rct.get("spec") or {}).get("spec") or {})))
            elif ref.get("resourceClaimName"):
                claim = self._ctx.peek("claim", namespace, str(ref["resourceClaimName"]))
                if claim is None:
                    return [], (
                        f'resourceclaim.resource.k8s.io "{ref["resourceClaimName"]}" not found'
                    )
                out.append((claim_name, dict(claim.get("spec") or {})))
        return out, None

    async def schedule(self) -> None:
        """Try to bind every pending pod, oldest first: the default scheduler's pods one by one
        (unless Kueue gates them), KAI's gang by gang. Pods naming another scheduler are left
        alone, as kube-scheduler leaves them."""
        pods = self._ctx.store.list_objects(self._ctx.rt("pod")).items
        pending = [
            p
            for p in pods
            if not (p.get("spec") or {}).get("nodeName") and not meta_of(p).get("deletionTimestamp")
        ]
        await self.gangs.sync_kueue()
        gangs: dict[tuple[str, str], tuple[KaiGang, list[Mapping[str, Any]]]] = {}
        for pod in sorted(pending, key=self._ctx.arrival_of):
            scheduler = (pod.get("spec") or {}).get("schedulerName") or SCHEDULER
            if scheduler == KAI_SCHEDULER:
                gang = self.gangs.kai_gang(pod)
                gangs.setdefault((gang.namespace, gang.name), (gang, []))[1].append(pod)
                continue
            if scheduler != SCHEDULER:
                continue
            gated = self.gangs.kueue_gate(pod)
            if gated is not None:
                await self._mark_unschedulable(pod, gated, reason="SchedulingGated")
                continue
            await self._try_bind(pod)
        if not gangs and not any(
            (p.get("spec") or {}).get("schedulerName") == KAI_SCHEDULER for p in pods
        ):
            return
        requested: dict[str, int] = {}
        sizes = self.gangs.gang_sizes(pods)
        for gang, members in gangs.values():
            if not await self._bind_gang(gang, members, pods, sizes):
                requested[gang.queue] = requested.get(gang.queue, 0) + sum(
                    self.gangs.template_gpus(gang.namespace, p.get("spec") or {}) for p in members
                )
        pods = self._ctx.store.list_objects(self._ctx.rt("pod")).items
        await self.gangs.kai_status(self.gangs.kai_used(pods, self._held_gpus()), requested)

    def _held_gpus(self) -> dict[str, int]:
        return {
            uid: sum(1 for driver, _, _ in keys if is_gpu_driver(driver))
            for uid, keys in self._ledger.by_pod.items()
        }

    async def _bind_gang(
        self,
        gang: KaiGang,
        pending: list[Mapping[str, Any]],
        pods: list[dict[str, Any]],
        sizes: Mapping[tuple[str, str], int],
    ) -> bool:
        """KAI: bind every pending pod of ``gang`` or none; True when bound."""
        where = f"pod group {gang.namespace}/{gang.name}"
        if not gang.found:
            await self._mark_all(pending, f"{where} not found")
            return False
        members = sizes.get((gang.namespace, gang.name), 0)
        if members < gang.min_member:
            await self._mark_all(
                pending, f"{where}: {members} of minMember {gang.min_member} pods exist"
            )
            return False
        taken = set(self._ledger.owner)
        placements = []
        for pod in pending:
            placed = self._place(pod, taken)
            if isinstance(placed, str):
                await self._mark_all(
                    pending,
                    f"{where} does not fit as a whole ({len(pending)} pods pending): {placed}",
                )
                return False
            taken.update(device.key for _, _, device in placed[2])
            placements.append(placed)
        need = sum(
            1 for _, _, results in placements for _, _, d in results if is_gpu_driver(d.driver)
        )
        cap = self.gangs.kai_quota(gang.queue)
        if cap is not None:
            used = self.gangs.kai_used(pods, self._held_gpus()).get(gang.queue, 0)
            if used + need > cap:
                free = max(0, cap - used)
                await self._mark_all(
                    pending,
                    f"{where}: queue {gang.queue} has {free} of {cap} GPUs free, "
                    f"the gang needs {need}",
                )
                return False
        for pod, (node, claims, results) in zip(pending, placements, strict=True):
            await self._bind(pod, node, claims, results)
        return True

    async def _mark_all(self, pods: Sequence[Mapping[str, Any]], message: str) -> None:
        for pod in pods:
            await self._mark_unschedulable(pod, message, component=KAI_SCHEDULER)

    def _volume_problem(self, pod: Mapping[str, Any]) -> str | None:
        """Why ``pod`` waits for its PersistentVolumeClaims (missing or not yet Bound)."""
        namespace = str(meta_of(pod).get("namespace", "default"))
        unbound = False
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            ref = volume.get("persistentVolumeClaim")
            if not ref:
                continue
            claim = self._ctx.peek("pvc", namespace, str(ref.get("claimName", "")))
            if claim is None:
                return f'persistentvolumeclaim "{ref.get("claimName", "")}" not found'
            if (claim.get("status") or {}).get("phase") != "Bound":
                unbound = True
        if unbound:
            total = len(self._node_view())
            return (
                f"0/{total} nodes are available: pod has unbound immediate "
                "PersistentVolumeClaims. preemption: 0/{total} nodes are available: "
                f"{total} Preemption is not helpful for scheduling."
            ).replace("{total}", str(total))
        return None

    def _place(
        self, pod: Mapping[str, Any], taken: set[tuple[str, str, str]]
    ) -> tuple[NodeState, list[tuple[str, dict[str, Any]]], Sequence[tuple[str, str, Any]]] | str:
        """The node, claims and devices ``pod`` would get with ``taken`` devices in use, or
        the kube-scheduler-style reason it fits nowhere."""
        spec = pod.get("spec") or {}
        waiting = self._volume_problem(pod)
        if waiting is not None:
            return waiting
        claims, missing = self._pod_claims(pod)
        if missing is not None:
            return missing
        requests: list[tuple[Sequence[ClaimRequest], str | None]] = [
            (claim_requests(name, claim_spec), match_attribute(claim_spec))
            for name, claim_spec in claims
        ]
        nodes = self._node_view()
        reasons: dict[str, int] = {}
        classes = self._class_view()
        for node in nodes:
            failure = fit_failure(spec, node)
            if failure is None:
                allocation, failure = allocate_on_node(node, requests, taken, classes)
                if allocation is not None:
                    return node, claims, allocation.results
            reasons[failure or "unknown"] = reasons.get(failure or "unknown", 0) + 1
        return unschedulable_message(len(nodes), reasons)

    async def _try_bind(self, pod: Mapping[str, Any]) -> None:
        placed = self._place(pod, set(self._ledger.owner))
        if isinstance(placed, str):
            await self._mark_unschedulable(pod, placed)
            return
        await self._bind(pod, *placed)

    async def _mark_unschedulable(
        self,
        pod: Mapping[str, Any],
        message: str,
        *,
        reason: str = "Unschedulable",
        component: str = SCHEDULER,
    ) -> None:
        status = pod.get("status") or {}
        conditions = status.get("conditions") or []
        for cond in conditions:
            if cond.get("type") == "PodScheduled" and cond.get("message") == message:
                return
        new = merge_conditions(
            conditions,
            [condition("PodScheduled", False, reason, message)],
            now_rfc3339(),
        )
        meta = meta_of(pod)
        await self._ctx.store.patch_status(
            "v1",
            "Pod",
            str(meta["name"]),
            {"phase": "Pending", "conditions": new},
            namespace=meta.get("namespace"),
            field_manager=component,
        )
        if reason == "Unschedulable":
            await self._ctx.events.record(
                pod, "Warning", "FailedScheduling", message, component=component
            )

    async def _bind(
        self,
        pod: Mapping[str, Any],
        node: NodeState,
        claims: Sequence[tuple[str, dict[str, Any]]],
        results: Sequence[tuple[str, str, Any]],
    ) -> None:
        meta = meta_of(pod)
        name, namespace, uid = str(meta["name"]), str(meta.get("namespace")), str(meta["uid"])
        self._ledger.hold(uid, [device.key for _, _, device in results])
        claim_statuses = []
        for claim_name, claim_spec in claims:
            claim_results = [
                {"request": req, "driver": d.driver, "pool": d.pool, "device": d.name}
                for c, req, d in results
                if c == claim_name
            ]
            created = await self._ctx.store.create(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaim",
                    "metadata": {
                        "generateName": f"{name}-{claim_name}-",
                        "namespace": namespace,
                        "annotations": {"resource.kubernetes.io/pod-claim-name": claim_name},
                        "ownerReferences": [owner_reference(pod)],
                    },
                    "spec": claim_spec,
                },
                field_manager="resource-claim-controller",
            )
            claim_statuses.append(
                {"name": claim_name, "resourceClaimName": created["metadata"]["name"]}
            )
            await self._ctx.store.patch_status(
                "resource.k8s.io/v1",
                "ResourceClaim",
                created["metadata"]["name"],
                {
                    "allocation": {
                        "devices": {"results": claim_results},
                        "nodeSelector": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {
                                            "key": "metadata.name",
                                            "operator": "In",
                                            "values": [node.name],
                                        }
                                    ]
                                }
                            ]
                        },
                    },
                    "reservedFor": [{"resource": "pods", "name": name, "uid": uid}],
                },
                namespace=namespace,
                field_manager=SCHEDULER,
            )
        await self._ctx.store.patch(
            "v1",
            "Pod",
            name,
            {"spec": {"nodeName": node.name}},
            namespace=namespace,
            field_manager=SCHEDULER,
        )
        await self._ctx.events.record(
            pod,
            "Normal",
            "Scheduled",
            f"Successfully assigned {namespace}/{name} to {node.name}",
            component=SCHEDULER,
        )
        extra = {"resourceClaimStatuses": claim_statuses} if claim_statuses else {}
        await self._kubelet.pod_bound(pod, node.name, extra)
