"""Gang admission in a simulated cluster, as NVIDIA KAI and Kueue do it, when the cluster serves
their kinds (:mod:`modelfleet.sim.gang_stack`).

KAI: a pod that names ``schedulerName: kai-scheduler`` is never bound by the default scheduler.
KAI binds a gang — the pods of one PodGroup (``scheduling.run.ai/v2alpha2``) — only when at
least ``minMember`` of its pods exist, every pending one fits on a node at once, and the Queue
the group names (``spec.queue``; a pod without a group uses its ``kai.scheduler/queue`` label)
has GPU quota left: ``spec.resources.gpu.limit`` (else ``quota``; -1 is unlimited) minus the
GPUs its bound pods hold. A LeaderWorkerSet pod joins the PodGroup ``<lws>-<group index>``
(what KAI's pod grouper names after the LWS group); a pod may name one with the
``pod-group-name`` annotation. The Queue's ``status.allocated`` / ``status.requested`` say what
its pods hold and ask for.

Kueue: a LeaderWorkerSet labelled ``kueue.x-k8s.io/queue-name`` gets one Workload per group; a
pod with the label (not of an LWS) gets a Workload of its own. Workloads are admitted
best-effort FIFO, whole, when their GPUs fit the unused ``nominalQuota`` of a flavor of the
ClusterQueue their LocalQueue points at; until then they stay pending with Kueue's
``QuotaReserved=False`` condition and their pods stay gated (``PodScheduled=False``,
``SchedulingGated``). The ClusterQueue's ``status.flavorsUsage[]`` is kept current.

GPUs are DRA devices: a request counts when its DeviceClass maps to ``nvidia.com/gpu``
(``extendedResourceName``) or is a ``gpu`` class; held GPUs are allocated devices of a ``gpu``
driver.

Development/test emulator only: product code never imports ``modelfleet.sim``, and this module
imports no product module. Reads and writes the cluster's store through its context.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from modelfleet.sim.apiserver.object_table import now_rfc3339
from modelfleet.sim.apiserver.registry import ResourceType
from modelfleet.sim.apiserver.status_errors import ApiError
from modelfleet.sim.controllers.context import ClusterContext, meta_of
from modelfleet.sim.controllers.gang_objects import (
    CLUSTER_QUEUE,
    GPU,
    KAI_MANAGER,
    KAI_QUEUE,
    KAI_QUEUE_LABEL,
    KAI_SCHEDULER,
    KUEUE_MANAGER,
    KUEUE_QUEUE_LABEL,
    LOCAL_QUEUE,
    OWNED,
    POD_GROUP_ANNOTATION,
    PODGROUP,
    WORKLOAD,
    gpu_flavors,
    int_or,
    is_gpu_driver,
    new_workload,
    resource_version,
    workload_name,
)
from modelfleet.sim.controllers.object_helpers import (
    LWS_GROUP_INDEX,
    LWS_NAME,
    condition,
    merge_conditions,
)

__all__ = ["GangAdmission", "KaiGang"]


def _terminated(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


@dataclass(frozen=True)
class KaiGang:
    namespace: str
    name: str
    min_member: int
    queue: str
    # False: the pod names (or its LWS implies) a PodGroup that does not exist (yet).
    found: bool = True


class GangAdmission:
    def __init__(self, ctx: ClusterContext) -> None:
        self._ctx = ctx

    # -- store helpers -------------------------------------------------------------------------

    def _rt(self, kind: tuple[str, str]) -> ResourceType | None:
        return self._ctx.store.registry.by_kind(*kind)

    def _list(self, kind: tuple[str, str], namespace: str | None = None) -> list[dict[str, Any]]:
        rt = self._rt(kind)
        if rt is None:
            return []
        return self._ctx.store.list_objects(rt, namespace=namespace).items

    def _get(
        self, kind: tuple[str, str], namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        rt = self._rt(kind)
        if rt is None:
            return None
        try:
            return self._ctx.store.get_object(rt, namespace, name)
        except ApiError:
            return None

    async def _status(
        self, kind: tuple[str, str], obj: Mapping[str, Any], status: Mapping[str, Any], who: str
    ) -> None:
        current = obj.get("status") or {}
        if all(current.get(k) == v for k, v in status.items()):
            return
        meta = meta_of(obj)
        await self._ctx.store.patch_status(
            *kind, str(meta["name"]), status, namespace=meta.get("namespace"), field_manager=who
        )

    # -- GPUs ----------------------------------------------------------------------------------

    def _gpu_classes(self) -> set[str]:
        out = set()
        for dc in self._ctx.store.list_objects(self._ctx.rt("deviceclass")).items:
            name = str(meta_of(dc).get("name", ""))
            if (dc.get("spec") or {}).get("extendedResourceName") == GPU or is_gpu_driver(name):
                out.add(name)
        return out

    def template_gpus(self, namespace: str, pod_spec: Mapping[str, Any]) -> int:
        """GPUs one pod of ``pod_spec`` asks for through its ResourceClaimTemplates."""
        classes = self._gpu_classes()
        total = 0
        for ref in pod_spec.get("resourceClaims") or []:
            template = ref.get("resourceClaimTemplateName")
            if not template:
                continue
            rct = self._ctx.peek("rct", namespace, str(template))
            devices = (((rct or {}).get("spec") or {}).get("spec") or {}).get("devices") or {}
            for request in devices.get("requests") or []:
                exactly = request.get("exactly") or {}
                if str(exactly.get("deviceClassName", "")) in classes:
                    total += int_or(exactly.get("count"), 1)
        return total

    # -- KAI -----------------------------------------------------------------------------------

    def kai_gang(self, pod: Mapping[str, Any]) -> KaiGang:
        meta = meta_of(pod)
        namespace = str(meta.get("namespace", ""))
        labels = meta.get("labels") or {}
        name = (meta.get("annotations") or {}).get(POD_GROUP_ANNOTATION)
        if not name and labels.get(LWS_NAME):
            name = f"{labels[LWS_NAME]}-{labels.get(LWS_GROUP_INDEX, '0')}"
        label_queue = str(labels.get(KAI_QUEUE_LABEL, "default"))
        if not name:
            return KaiGang(namespace, f"pod-{meta.get('name')}", 1, label_queue)
        group = self._get(PODGROUP, namespace, str(name))
        if group is None:
            return KaiGang(namespace, str(name), 1, label_queue, found=False)
        spec = group.get("spec") or {}
        return KaiGang(
            namespace,
            str(name),
            max(1, int_or(spec.get("minMember"), 1)),
            str(spec.get("queue") or label_queue),
        )

    def gang_sizes(self, pods: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], int]:
        """Live KAI pods per gang (namespace, PodGroup name)."""
        sizes: dict[tuple[str, str], int] = {}
        for p in pods:
            if (p.get("spec") or {}).get("schedulerName") != KAI_SCHEDULER:
                continue
            if meta_of(p).get("deletionTimestamp") or _terminated(p):
                continue
            gang = self.kai_gang(p)
            key = (gang.namespace, gang.name)
            sizes[key] = sizes.get(key, 0) + 1
        return sizes

    def kai_quota(self, queue: str) -> int | None:
        """The queue's GPU cap (None: unlimited; 0 when the Queue does not exist)."""
        obj = self._get(KAI_QUEUE, None, queue)
        if obj is None:
            return 0
        gpu = ((obj.get("spec") or {}).get("resources") or {}).get("gpu") or {}
        limit = int_or(gpu.get("limit"), -1)
        cap = limit if limit >= 0 else int_or(gpu.get("quota"), -1)
        return None if cap < 0 else cap

    def kai_used(
        self, pods: Iterable[Mapping[str, Any]], held: Mapping[str, int]
    ) -> dict[str, int]:
        """GPUs held per queue by bound KAI pods; ``held`` is GPUs per pod uid."""
        used: dict[str, int] = {}
        for pod in pods:
            if (pod.get("spec") or {}).get("schedulerName") != KAI_SCHEDULER:
                continue
            if not (pod.get("spec") or {}).get("nodeName") or _terminated(pod):
                continue
            queue = self.kai_gang(pod).queue
            used[queue] = used.get(queue, 0) + held.get(str(meta_of(pod).get("uid")), 0)
        return used

    async def kai_status(self, used: Mapping[str, int], requested: Mapping[str, int]) -> None:
        """Each Queue's ``status.allocated`` and ``status.requested`` (GPUs)."""
        for queue in self._list(KAI_QUEUE):
            name = str(meta_of(queue)["name"])
            allocated = used.get(name, 0)
            status = {
                "allocated": {GPU: str(allocated)},
                "requested": {GPU: str(allocated + requested.get(name, 0))},
            }
            await self._status(KAI_QUEUE, queue, status, KAI_MANAGER)

    # -- Kueue ---------------------------------------------------------------------------------

    def _desired_workloads(self) -> dict[tuple[str, str], dict[str, Any]]:
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for lws in self._ctx.store.list_objects(self._ctx.rt("lws")).items:
            meta = meta_of(lws)
            queue = (meta.get("labels") or {}).get(KUEUE_QUEUE_LABEL)
            if not queue or meta.get("deletionTimestamp"):
                continue
            namespace, name = str(meta.get("namespace", "")), str(meta["name"])
            spec = lws.get("spec") or {}
            lwt = spec.get("leaderWorkerTemplate") or {}
            size = max(1, int_or(lwt.get("size"), 1))
            worker = lwt.get("workerTemplate") or {}
            leader = lwt.get("leaderTemplate") or worker
            pod_sets = [{"name": "leader", "count": 1, "template": leader}]
            if size > 1:
                pod_sets.append({"name": "workers", "count": size - 1, "template": worker})
            for group in range(int_or(spec.get("replicas"), 1)):
                wl = workload_name("leaderworkerset", f"{name}-{group}", str(meta.get("uid")))
                out[(namespace, wl)] = new_workload(
                    lws, namespace, wl, str(queue), pod_sets, {"lws": name, "group": str(group)}
                )
        for pod in self._ctx.store.list_objects(self._ctx.rt("pod")).items:
            meta = meta_of(pod)
            labels = meta.get("labels") or {}
            queue = labels.get(KUEUE_QUEUE_LABEL)
            if not queue or labels.get(LWS_NAME) or meta.get("deletionTimestamp"):
                continue
            if _terminated(pod):
                continue
            namespace, name = str(meta.get("namespace", "")), str(meta["name"])
            wl = workload_name("pod", name, str(meta.get("uid")))
            template = {"spec": pod.get("spec") or {}}
            pod_sets = [{"name": "main", "count": 1, "template": template}]
            out[(namespace, wl)] = new_workload(
                pod, namespace, wl, str(queue), pod_sets, {"pod": name}
            )
        return out

    def _need(self, workload: Mapping[str, Any]) -> list[tuple[str, int, int]]:
        """(pod set, count, GPUs per pod) of a Workload."""
        namespace = str(meta_of(workload).get("namespace", ""))
        return [
            (
                str(ps.get("name")),
                int_or(ps.get("count"), 1),
                self.template_gpus(namespace, (ps.get("template") or {}).get("spec") or {}),
            )
            for ps in (workload.get("spec") or {}).get("podSets") or []
        ]

    async def sync_kueue(self) -> None:
        """Create and delete Workloads for labelled gangs, admit what fits, report usage."""
        if self._rt(WORKLOAD) is None:
            return
        store = self._ctx.store
        desired = self._desired_workloads()
        existing = {
            (str(meta_of(w).get("namespace", "")), str(meta_of(w)["name"])): w
            for w in self._list(WORKLOAD)
        }
        for key, workload in existing.items():
            if key not in desired and (meta_of(workload).get("labels") or {}).get(OWNED):
                with contextlib.suppress(ApiError):
                    await store.delete(*WORKLOAD, key[1], namespace=key[0])
        for key, manifest in desired.items():
            if key not in existing:
                with contextlib.suppress(ApiError):
                    await store.create(manifest, field_manager=KUEUE_MANAGER)
        await self._admit()

    async def _admit(self) -> None:
        cluster_queues = {str(meta_of(q)["name"]): q for q in self._list(CLUSTER_QUEUE)}
        local_queues = {
            (str(meta_of(q).get("namespace", "")), str(meta_of(q)["name"])): q
            for q in self._list(LOCAL_QUEUE)
        }
        workloads = sorted(
            self._list(WORKLOAD),
            key=lambda w: (str(meta_of(w).get("creationTimestamp", "")), resource_version(w)),
        )
        usage: dict[str, dict[str, int]] = {name: {} for name in cluster_queues}
        admitted: dict[str, int] = {}
        pending: dict[str, int] = {}
        for wl in workloads:
            admission = (wl.get("status") or {}).get("admission") or {}
            queue = str(admission.get("clusterQueue", ""))
            if queue in usage:
                for assignment in admission.get("podSetAssignments") or []:
                    flavor = str((assignment.get("flavors") or {}).get(GPU, ""))
                    used = int_or((assignment.get("resourceUsage") or {}).get(GPU), 0)
                    usage[queue][flavor] = usage[queue].get(flavor, 0) + used
                admitted[queue] = admitted.get(queue, 0) + 1
        now = now_rfc3339()
        for wl in workloads:
            if (wl.get("status") or {}).get("admission"):
                continue
            meta = meta_of(wl)
            namespace = str(meta.get("namespace", ""))
            local_name = str((wl.get("spec") or {}).get("queueName", ""))
            local = local_queues.get((namespace, local_name))
            cq_name = str(((local or {}).get("spec") or {}).get("clusterQueue", ""))
            cq = cluster_queues.get(cq_name)
            if local is None:
                await self._pending(
                    wl, "Inadmissible", f"LocalQueue {local_name} doesn't exist", now
                )
                continue
            if cq is None:
                await self._pending(
                    wl, "Inadmissible", f"ClusterQueue {cq_name} doesn't exist", now
                )
                continue
            need = self._need(wl)
            total = sum(count * gpus for _, count, gpus in need)
            chosen, shortfall = None, None
            for flavor, nominal in gpu_flavors(cq):
                free = nominal - usage[cq_name].get(flavor, 0)
                if total <= free:
                    chosen = flavor
                    break
                if shortfall is None:
                    shortfall = (flavor, total - free)
            if chosen is None:
                pending[cq_name] = pending.get(cq_name, 0) + 1
                first = need[0][0] if need else "main"
                where = (
                    f"in flavor {shortfall[0]}, {shortfall[1]} more needed"
                    if shortfall is not None
                    else "in any flavor"
                )
                await self._pending(
                    wl,
                    "Pending",
                    f"couldn't assign flavors to pod set {first}: insufficient unused quota "
                    f"for {GPU} {where}",
                    now,
                )
                continue
            usage[cq_name][chosen] = usage[cq_name].get(chosen, 0) + total
            admitted[cq_name] = admitted.get(cq_name, 0) + 1
            await self._admit_one(wl, cq_name, chosen, need, now)
        for name, cq in cluster_queues.items():
            flavors = [flavor for flavor, _ in gpu_flavors(cq)]
            status = {
                "flavorsUsage": [
                    {
                        "name": flavor,
                        "resources": [
                            {
                                "name": GPU,
                                "total": str(usage[name].get(flavor, 0)),
                                "borrowed": "0",
                            }
                        ],
                    }
                    for flavor in flavors
                ],
                "admittedWorkloads": admitted.get(name, 0),
                "reservingWorkloads": admitted.get(name, 0),
                "pendingWorkloads": pending.get(name, 0),
                "conditions": merge_conditions(
                    (cq.get("status") or {}).get("conditions"),
                    [condition("Active", True, "Ready", "Can admit new workloads")],
                    now,
                ),
            }
            await self._status(CLUSTER_QUEUE, cq, status, KUEUE_MANAGER)

    async def _pending(self, wl: Mapping[str, Any], reason: str, message: str, now: str) -> None:
        old = (wl.get("status") or {}).get("conditions")
        conditions = merge_conditions(
            old, [condition("QuotaReserved", False, reason, message)], now
        )
        await self._status(WORKLOAD, wl, {"conditions": conditions}, KUEUE_MANAGER)

    async def _admit_one(
        self,
        wl: Mapping[str, Any],
        cluster_queue: str,
        flavor: str,
        need: list[tuple[str, int, int]],
        now: str,
    ) -> None:
        message = f"Quota reserved in ClusterQueue {cluster_queue}"
        conditions = merge_conditions(
            (wl.get("status") or {}).get("conditions"),
            [
                condition("QuotaReserved", True, "QuotaReserved", message),
                condition("Admitted", True, "Admitted", "The workload is admitted"),
            ],
            now,
        )
        status = {
            "admission": {
                "clusterQueue": cluster_queue,
                "podSetAssignments": [
                    {
                        "name": name,
                        "count": count,
                        "flavors": {GPU: flavor},
                        "resourceUsage": {GPU: str(count * gpus)},
                    }
                    for name, count, gpus in need
                ],
            },
            "conditions": conditions,
        }
        await self._status(WORKLOAD, wl, status, KUEUE_MANAGER)

    def kueue_gate(self, pod: Mapping[str, Any]) -> str | None:
        """Why Kueue holds ``pod`` back (its Workload is not admitted), or None."""
        if self._rt(WORKLOAD) is None:
            return None
        meta = meta_of(pod)
        namespace = str(meta.get("namespace", ""))
        labels = meta.get("labels") or {}
        lws_name = labels.get(LWS_NAME)
        if lws_name:
            lws = self._ctx.peek("lws", namespace, str(lws_name))
            if lws is None or not (meta_of(lws).get("labels") or {}).get(KUEUE_QUEUE_LABEL):
                return None
            group = labels.get(LWS_GROUP_INDEX, "0")
            name = workload_name(
                "leaderworkerset", f"{lws_name}-{group}", str(meta_of(lws).get("uid"))
            )
        elif labels.get(KUEUE_QUEUE_LABEL):
            name = workload_name("pod", str(meta["name"]), str(meta.get("uid")))
        else:
            return None
        workload = self._get(WORKLOAD, namespace, name)
        if workload is not None and (workload.get("status") or {}).get("admission"):
            return None
        why = ""
        for cond in ((workload or {}).get("status") or {}).get("conditions") or []:
            if cond.get("type") == "QuotaReserved" and cond.get("status") == "False":
                why = f": {cond.get('message')}"
        return f"waiting for Kueue to admit workload {namespace}/{name}{why}"
