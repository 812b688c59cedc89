"""The gang scheduler of an InferenceCluster (``spec.scheduler``): none (the default Kubernetes
scheduler, gangs held together by LeaderWorkerSet alone), NVIDIA KAI (pods carry
``schedulerName: kai-scheduler`` and a PodGroup sizes each gang) or Kueue (workloads carry the
``kueue.x-k8s.io/queue-name`` label and Kueue admits each gang whole).

Kept apart from ``api.clusters`` so that the cluster model only gains one field. Pure: pydantic
and the standard library; ``api.rules.validate`` calls ``scheduler_rules``.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum

from pydantic import Field

from modelfleet.api.manifest_errors import FieldError, Path
from modelfleet.api.meta import Model, dns1123_label_problem


class SchedulerType(StrEnum):
    NONE = "None"
    KAI = "KAI"
    KUEUE = "Kueue"


class KAIScheduler(Model):
    # The KAI Queue (cluster-scoped, scheduling.run.ai/v2) every gang of this cluster joins.
    queue: str = Field(min_length=1, max_length=63)


class KueueScheduler(Model):
    # The LocalQueue that workloads name; modelfleet creates it in each workload namespace it
    # uses (namespaces are its own, ``mf-<ns>``), pointing at ``clusterQueue``.
    local_queue: str = Field(min_length=1, max_length=63)
    # The ClusterQueue (the cluster owner's, with its quota) whose usage is this cluster's
    # capacity.
    cluster_queue: str = Field(min_length=1, max_length=63)


class GangScheduler(Model):
    type: SchedulerType = SchedulerType.NONE
    kai: KAIScheduler | None = None
    kueue: KueueScheduler | None = None

    @property
    def queue(self) -> str | None:
        """The queue gangs are submitted to (KAI Queue or Kueue LocalQueue), or None."""
        if self.type is SchedulerType.KAI and self.kai is not None:
            return self.kai.queue
        if self.type is SchedulerType.KUEUE and self.kueue is not None:
            return self.kueue.local_queue
        return None


def scheduler_rules(path: Path, scheduler: GangScheduler | None) -> Iterator[FieldError]:
    """The sibling block matches ``type``; queue names are names Kubernetes accepts."""
    if scheduler is None:
        return
    blocks = {SchedulerType.KAI: scheduler.kai, SchedulerType.KUEUE: scheduler.kueue}
    for kind, block in blocks.items():
        field = kind.value.lower()
        if kind is scheduler.type and block is None:
            yield FieldError((*path, field), f"required when type is {kind.value}")
        if kind is not scheduler.type and block is not None:
            yield FieldError((*path, field), f"must not be set when type is {scheduler.type.value}")
    if scheduler.kai is not None:
        problem = dns1123_label_problem(scheduler.kai.queue)
        if problem:
            yield FieldError((*path, "kai", "queue"), f"invalid queue name: {problem}")
    if scheduler.kueue is not None:
        problem = dns1123_label_problem(scheduler.kueue.local_queue)
        if problem:
            yield FieldError((*path, "kueue", "localQueue"), f"invalid LocalQueue name: {problem}")
        problem = dns1123_label_problem(scheduler.kueue.cluster_queue)
        if problem:
            yield FieldError(
                (*path, "kueue", "clusterQueue"), f"invalid ClusterQueue name: {problem}"
            )
