"""The LeaderWorkerSet controller of a simulated cluster: one leader and ``size - 1`` workers per
group, with the LWS labels, annotations, hostnames and environment the real controller sets, a
headless Service for the group's DNS names, and the LWS status (a group is ready when all its
pods are).

Development/test emulator only: product code never imports ``modelfleet.sim``. Writes through the
cluster's store (:class:`~.context.ClusterContext`); the pod and status builders are pure.

Simplifications (deliberate): pods are owned by the LWS (no StatefulSets); a template change
recreates the stale pods in place. Group restart policies and ``startupPolicy: LeaderReady`` are
not modelled: workers are created with their leader (``LeaderCreated``).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from modelfleet.sim.apiserver.object_table import now_rfc3339
from modelfleet.sim.apiserver.status_errors import ApiError
from modelfleet.sim.controllers.context import ClusterContext, meta_of
from modelfleet.sim.controllers.object_helpers import (
    CONTROLLER_MANAGER,
    LWS_GROUP_INDEX,
    LWS_GROUP_KEY,
    LWS_LEADER_ANNOTATION,
    LWS_NAME,
    LWS_REVISION,
    LWS_SIZE_ANNOTATION,
    LWS_WORKER_INDEX,
    condition,
    merge_conditions,
    owner_reference,
    pod_from_template,
    pod_is_ready,
    stable_digest,
)

__all__ = ["LeaderWorkerSetController", "lws_pod", "lws_pod_names", "lws_status"]


class LeaderWorkerSetController:
    def __init__(self, ctx: ClusterContext) -> None:
        self._ctx = ctx

    def _live_pods(self, namespace: str, name: str) -> list[dict[str, Any]]:
        return [
            p
            for p in self._ctx.pods(namespace, f"{LWS_NAME}={name}")
            if not meta_of(p).get("deletionTimestamp")
        ]

    async def reconcile(self, namespace: str, name: str) -> None:
        ctx = self._ctx
        lws = ctx.peek("lws", namespace, name)
        if lws is None or meta_of(lws).get("deletionTimestamp"):
            return
        spec = lws.get("spec") or {}
        replicas = int(spec.get("replicas", 1))
        lwt = spec.get("leaderWorkerTemplate") or {}
        size = int(lwt.get("size") or 1)
        revision = stable_digest(lwt)
        await self._ensure_headless_service(lws)
        existing = {str(meta_of(p)["name"]): p for p in self._live_pods(namespace, name)}
        wanted = lws_pod_names(name, replicas, size)
        wanted_names = {pod for pod, _, _ in wanted}
        for pod_name, stale in existing.items():
            if pod_name not in wanted_names:
                await ctx.delete_pod(stale)
        for pod_name, group, worker in wanted:
            pod = existing.get(pod_name)
            if pod is not None and meta_of(pod).get("labels", {}).get(LWS_REVISION) == revision:
                continue
            if pod is not None:
                await ctx.delete_pod(pod)
            await ctx.store.create(
                lws_pod(lws, group, worker, revision), field_manager=CONTROLLER_MANAGER
            )
        lws = ctx.peek("lws", namespace, name)
        if lws is None:
            return
        pods = self._live_pods(namespace, name)
        await ctx.write_status("lws", lws, lws_status(lws, pods, revision, now_rfc3339()))

    async def _ensure_headless_service(self, lws: Mapping[str, Any]) -> None:
        meta = meta_of(lws)
        name, namespace = str(meta["name"]), str(meta.get("namespace", "default"))
        if self._ctx.peek("service", namespace, name) is not None:
            return  # the LWS controller never replaces a Service it finds
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {LWS_NAME: name},
                "ownerReferences": [owner_reference(lws)],
            },
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": True,
                "selector": {LWS_NAME: name},
            },
        }
        with contextlib.suppress(ApiError):
            await self._ctx.store.create(service, field_manager=CONTROLLER_MANAGER)


def lws_pod_names(name: str, replicas: int, size: int) -> list[tuple[str, int, int]]:
    """(pod name, group, worker index) of every pod an LWS wants; worker 0 is the leader."""
    out = []
    for group in range(replicas):
        for worker in range(size):
            pod = f"{name}-{group}" if worker == 0 else f"{name}-{group}-{worker}"
            out.append((pod, group, worker))
    return out


def _prepend_env(containers: list[dict[str, Any]], env: list[dict[str, str]]) -> None:
    for container in containers:
        own = [
            e for e in container.get("env") or [] if e.get("name") not in {x["name"] for x in env}
        ]
        container["env"] = [*env, *own]


def lws_pod(lws: Mapping[str, Any], group: int, worker: int, revision: str) -> dict[str, Any]:
    """Pod ``worker`` of group ``group`` of a LeaderWorkerSet, as the LWS controller makes it."""
    name = lws["metadata"]["name"]
    namespace = lws["metadata"].get("namespace", "default")
    lwt = (lws.get("spec") or {}).get("leaderWorkerTemplate") or {}
    size = int(lwt.get("size") or 1)
    worker_template = lwt.get("workerTemplate") or {}
    template = (lwt.get("leaderTemplate") or worker_template) if worker == 0 else worker_template
    group_key = hashlib.sha1(f"{namespace}/{name}-{group}".encode()).hexdigest()
    labels = {
        LWS_NAME: name,
        LWS_GROUP_INDEX: str(group),
        LWS_WORKER_INDEX: str(worker),
        LWS_GROUP_KEY: group_key,
        LWS_REVISION: revision,
    }
    pod = pod_from_template(template, lws, labels)
    leader = f"{name}-{group}"
    pod_name = leader if worker == 0 else f"{leader}-{worker}"
    pod["metadata"]["name"] = pod_name
    annotations = pod["metadata"].setdefault("annotations", {})
    annotations[LWS_SIZE_ANNOTATION] = str(size)
    if worker:
        annotations[LWS_LEADER_ANNOTATION] = leader
    spec = pod["spec"]
    spec["hostname"] = pod_name
    spec["subdomain"] = name
    env = [
        {"name": "LWS_LEADER_ADDRESS", "value": f"{leader}.{name}.{namespace}"},
        {"name": "LWS_GROUP_SIZE", "value": str(size)},
        {"name": "LWS_WORKER_INDEX", "value": str(worker)},
    ]
    _prepend_env(spec.get("containers") or [], env)
    return pod


def lws_status(
    lws: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    revision: str,
    now: str,
) -> dict[str, Any]:
    """The status the LWS controller would report: a group is ready when all its pods are."""
    spec = lws.get("spec") or {}
    meta = lws["metadata"]
    replicas = int(spec.get("replicas", 1))
    size = int((spec.get("leaderWorkerTemplate") or {}).get("size") or 1)
    groups: dict[int, list[Mapping[str, Any]]] = {}
    for pod in pods:
        try:
            group = int(pod["metadata"].get("labels", {}).get(LWS_GROUP_INDEX, "-1"))
        except ValueError:
            continue
        groups.setdefault(group, []).append(pod)
    ready_groups = sum(
        1
        for g in range(replicas)
        if len(groups.get(g, [])) == size and all(pod_is_ready(p) for p in groups[g])
    )
    updated_groups = sum(
        1
        for g in range(replicas)
        if len(groups.get(g, [])) == size
        and all(p["metadata"].get("labels", {}).get(LWS_REVISION) == revision for p in groups[g])
    )
    available = ready_groups >= replicas
    conditions = [
        condition(
            "Available",
            available,
            "AllGroupsReady" if available else "GroupsNotReady",
            "All replicas are ready"
            if available
            else f"{ready_groups}/{replicas} groups are ready",
        ),
        condition(
            "Progressing",
            not available,
            "GroupsProgressing" if not available else "AllGroupsReady",
            "Replicas are progressing" if not available else "All replicas are ready",
        ),
    ]
    old_conditions = (lws.get("status") or {}).get("conditions")
    name = meta["name"]
    return {
        "observedGeneration": meta.get("generation", 1),
        "replicas": len([g for g in groups if g < replicas]),
        "readyReplicas": ready_groups,
        "updatedReplicas": updated_groups,
        "hpaPodSelector": f"{LWS_NAME}={name},{LWS_WORKER_INDEX}=0",
        "conditions": merge_conditions(old_conditions, conditions, now),
    }
