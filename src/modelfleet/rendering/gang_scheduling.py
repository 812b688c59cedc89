"""Wrapping an engine's workload for the cluster's gang scheduler (``ClusterFacts.scheduler``).

- KAI: every pod names ``schedulerName: kai-scheduler`` and carries the queue label; each gang of
  a LeaderWorkerSet (one per copy) gets a ``scheduling.run.ai/v2alpha2`` PodGroup named
  ``<workload>-<group index>`` with ``minMember`` = pods of the gang, so KAI binds all of a gang
  or none of it. KAI's pod grouper joins an LWS pod to the PodGroup of its group by that name
  (the LWS name and the ``leaderworkerset.sigs.k8s.io/group-index`` label); a Standalone pod is a
  gang of one and needs no PodGroup.
- Kueue: the workload carries ``kueue.x-k8s.io/queue-name``. For a LeaderWorkerSet that is all
  Kueue's own LWS integration needs: it makes one Workload per group and holds the group's pods
  (scheduling gate) until the Workload is admitted whole. A Deployment's pods carry the label too,
  as Kueue's pod integration expects (each pod a workload of one). The LocalQueue the label names
  is rendered into the workload namespace (``local_queue``), pointing at the cluster owner's
  ClusterQueue.

Pure and deterministic: dicts in, new dicts out; the input is never changed.
"""

from __future__ import annotations

import copy
from typing import Any

from modelfleet.api.deployments import PlacedEngine
from modelfleet.api.naming import LABEL_CLUSTER, LABEL_MANAGED_BY, LABEL_NAMESPACE
from modelfleet.api.schedulers import GangScheduler, SchedulerType
from modelfleet.rendering.context import RenderContext, sorted_map
from modelfleet.rendering.engines import gang_size

KAI_SCHEDULER_NAME = "kai-scheduler"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
PODGROUP_API_VERSION = "scheduling.run.ai/v2alpha2"
PODGROUP_KIND = "PodGroup"

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta1"
LOCAL_QUEUE_KIND = "LocalQueue"

# The LocalQueue is shared by every replica in its namespace: only labels true for all of them.
_SHARED_LABELS = (LABEL_NAMESPACE, LABEL_CLUSTER, LABEL_MANAGED_BY)


def podgroup_name(workload: str, group: int) -> str:
    """The PodGroup of gang ``group`` (the LWS group index) of ``workload``."""
    return f"{workload}-{group}"


def _pod_templates(workload: dict[str, Any]) -> list[dict[str, Any]]:
    spec = workload["spec"]
    if workload["kind"] == "LeaderWorkerSet":
        lwt = spec["leaderWorkerTemplate"]
        return [lwt["leaderTemplate"], lwt["workerTemplate"]]
    return [spec["template"]]


def _label(target: dict[str, Any], key: str, value: str) -> None:
    metadata = target.setdefault("metadata", {})
    metadata["labels"] = sorted_map({**metadata.get("labels", {}), key: value})


def _kai(
    ctx: RenderContext, engine: PlacedEngine, workload: dict[str, Any], queue: str
) -> list[dict[str, Any]]:
    for template in _pod_templates(workload):
        _label(template, KAI_QUEUE_LABEL, queue)
        template["spec"] = {"schedulerName": KAI_SCHEDULER_NAME, **template["spec"]}
    if workload["kind"] != "LeaderWorkerSet":
        return [workload]
    name = workload["metadata"]["name"]
    groups = [
        {
            "apiVersion": PODGROUP_API_VERSION,
            "kind": PODGROUP_KIND,
            "metadata": {
                **ctx.metadata(podgroup_name(name, group)),
                "labels": sorted_map({**ctx.labels(), KAI_QUEUE_LABEL: queue}),
            },
            "spec": {"minMember": gang_size(engine), "queue": queue},
        }
        for group in range(engine.copies)
    ]
    # PodGroups first: a gang's pods must find their group when they are created.
    return [*groups, workload]


def _kueue(workload: dict[str, Any], queue: str) -> list[dict[str, Any]]:
    _label(workload, KUEUE_QUEUE_LABEL, queue)
    if workload["kind"] != "LeaderWorkerSet":
        for template in _pod_templates(workload):
            _label(template, KUEUE_QUEUE_LABEL, queue)
    return [workload]


def wrap_workload(
    ctx: RenderContext, engine: PlacedEngine, workload: dict[str, Any]
) -> list[dict[str, Any]]:
    """``workload`` as the cluster's gang scheduler wants it, with the objects that go with it
    (KAI PodGroups), in apply order."""
    scheduler = ctx.facts.scheduler
    queue = scheduler.queue if scheduler is not None else None
    if scheduler is None or queue is None:
        return [workload]
    wrapped = copy.deepcopy(workload)
    if scheduler.type is SchedulerType.KAI:
        return _kai(ctx, engine, wrapped, queue)
    return _kueue(wrapped, queue)


def local_queue(ctx: RenderContext, scheduler: GangScheduler | None) -> dict[str, Any] | None:
    """The Kueue LocalQueue of the workload namespace, or None when the cluster has no Kueue.
    Shared by every replica in the namespace, like the namespace itself: never undone."""
    if scheduler is None or scheduler.type is not SchedulerType.KUEUE or scheduler.kueue is None:
        return None
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": LOCAL_QUEUE_KIND,
        "metadata": {
            "name": scheduler.kueue.local_queue,
            "namespace": ctx.namespace,
            "labels": sorted_map({k: v for k, v in ctx.labels().items() if k in _SHARED_LABELS}),
        },
        "spec": {"clusterQueue": scheduler.kueue.cluster_queue},
    }
