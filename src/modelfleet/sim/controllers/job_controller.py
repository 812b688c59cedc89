"""The Job controller of a simulated cluster, for the download Jobs that stage model weights: a
Job runs one pod at a time from its template (``restartPolicy: Never``), counts succeeded and
failed pods, retries up to ``backoffLimit`` and then reports ``Failed`` (reason
``BackoffLimitExceeded``), or ``Complete`` once a pod succeeded, as the real controller does.

What its pods do once the kubelet has them running is the downloader's part: the pod "downloads"
``MODEL_BYTES`` (env of its container, 1 GiB when absent) at the cluster's
``download_mib_per_second``, printing the downloader's progress lines
(``modelfleet-progress bytes=<done> total=<total>``) to its log as it goes, then exits 0; or, when
the Job matches ``fail_downloads``, exits 1 half-way with the hub's error (401, or a connection
reset). Timings come from :func:`download_plan` (pure).

Development/test emulator only: product code never imports ``modelfleet.sim``. Writes through the
cluster's store (:class:`~.context.ClusterContext`) and uses the loop's timers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from modelfleet.sim.apiserver.object_table import now_rfc3339
from modelfleet.sim.controllers.context import ClusterContext, meta_of
from modelfleet.sim.controllers.object_helpers import (
    CONTROLLER_MANAGER,
    condition,
    merge_conditions,
    pod_from_template,
    pod_is_ready,
)
from modelfleet.sim.faults import FaultConfig

__all__ = [
    "JOB_CONTROLLER",
    "PROGRESS_PREFIX",
    "DownloadPlan",
    "JobController",
    "download_plan",
    "job_status",
]

JOB_CONTROLLER = "job-controller"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
PROGRESS_PREFIX = "modelfleet-progress"
BYTES_ENV = "MODEL_BYTES"
DEFAULT_BYTES = 1 << 30
# Progress lines per download (at most), and the shortest gap between two.
_STEPS = 20
_MIN_STEP_SECONDS = 0.05
_ERRORS = {
    "auth": "huggingface_hub.errors.HfHubHTTPError: 401 Client Error: Unauthorized for url: "
    "https://huggingface.co/api/models/{repo} (invalid or missing HF_TOKEN)",
    "network": "ConnectionResetError: [Errno 104] Connection reset by peer "
    "(while downloading {repo})",
}


@dataclass(frozen=True)
class DownloadPlan:
    total: int
    seconds: float
    # Fraction of the download after which the pod fails; None when it succeeds.
    fail_at: float | None
    error: str


def _env(pod: Mapping[str, Any], name: str) -> str | None:
    for container in (pod.get("spec") or {}).get("containers") or []:
        for var in container.get("env") or []:
            if var.get("name") == name and "value" in var:
                return str(var["value"])
    return None


def download_plan(
    pod: Mapping[str, Any], job: str, namespace: str, faults: FaultConfig
) -> DownloadPlan:
    """How long ``pod``'s download takes on this cluster, and whether (and where) it fails."""
    raw = _env(pod, BYTES_ENV)
    try:
        total = max(0, int(raw)) if raw is not None else DEFAULT_BYTES
    except ValueError:
        total = DEFAULT_BYTES
    seconds = total / (faults.download_mib_per_second * (1 << 20))
    fails = faults.download_fails(job, namespace)
    repo = _env(pod, "MODEL_REPO") or "the model"
    return DownloadPlan(
        total=total,
        seconds=seconds,
        fail_at=0.5 if fails else None,
        error=_ERRORS[faults.download_error].format(repo=repo),
    )


def job_status(
    job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], now: str
) -> dict[str, Any]:
    """The Job's status from its pods (pure)."""
    spec = job.get("spec") or {}
    limit = int(spec.get("backoffLimit", 6))
    phases = [str((p.get("status") or {}).get("phase") or "Pending") for p in pods]
    succeeded = phases.count("Succeeded")
    failed = phases.count("Failed")
    active = len(phases) - succeeded - failed
    old = job.get("status") or {}
    status: dict[str, Any] = {
        "active": active,
        "succeeded": succeeded,
        "failed": failed,
        "ready": sum(1 for p in pods if pod_is_ready(p)),
        "startTime": old.get("startTime") or now,
    }
    conditions: list[dict[str, Any]] = []
    if succeeded >= int(spec.get("completions", 1)):
        conditions = [
            condition(
                "SuccessCriteriaMet",
                True,
                "CompletionsReached",
                "Reached expected number of succeeded pods",
            ),
            condition(
                "Complete", True, "CompletionsReached", "Reached expected number of succeeded pods"
            ),
        ]
        status["completionTime"] = old.get("completionTime") or now
    elif failed > limit:
        conditions = [
            condition(
                "FailureTarget",
                True,
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            ),
            condition(
                "Failed",
                True,
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            ),
        ]
    if conditions:
        status["conditions"] = merge_conditions(old.get("conditions"), conditions, now)
    return status


def _finished(job: Mapping[str, Any]) -> bool:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return True
    return False


@dataclass
class _Download:
    plan: DownloadPlan
    started: float
    handle: asyncio.TimerHandle | None = None


class JobController:
    def __init__(self, ctx: ClusterContext) -> None:
        self._ctx = ctx
        self._downloads: dict[str, _Download] = {}

    def stop(self) -> None:
        for download in self._downloads.values():
            if download.handle is not None:
                download.handle.cancel()
        self._downloads.clear()

    def pod_gone(self, uid: str) -> None:
        download = self._downloads.pop(uid, None)
        if download is not None and download.handle is not None:
            download.handle.cancel()

    def _pods(self, job: Mapping[str, Any]) -> list[dict[str, Any]]:
        meta = meta_of(job)
        uid = meta.get("uid")
        return [
            p
            for p in self._ctx.pods(str(meta.get("namespace", "")), None)
            if any(r.get("uid") == uid for r in meta_of(p).get("ownerReferences") or [])
            and not meta_of(p).get("deletionTimestamp")
        ]

    async def reconcile(self, namespace: str, name: str) -> None:
        ctx = self._ctx
        job = ctx.peek("job", namespace, name)
        if job is None or meta_of(job).get("deletionTimestamp"):
            return  # owner-reference garbage collection removes the pods
        pods = self._pods(job)
        if not _finished(job):
            status = job_status(job, pods, now_rfc3339())
            if not status.get("conditions") and status["active"] == 0:
                pod = pod_from_template(
                    (job.get("spec") or {}).get("template") or {},
                    job,
                    {JOB_NAME_LABEL: name, CONTROLLER_UID_LABEL: str(meta_of(job)["uid"])},
                )
                pod["metadata"]["generateName"] = f"{name}-"
                await ctx.store.create(pod, field_manager=JOB_CONTROLLER)
                pods = self._pods(job)
            for pod in pods:
                uid = str(meta_of(pod)["uid"])
                phase = (pod.get("status") or {}).get("phase")
                if phase == "Running" and pod_is_ready(pod) and uid not in self._downloads:
                    self._start(pod, name, namespace)
        job = ctx.peek("job", namespace, name)
        if job is None or _finished(job):
            return
        await ctx.write_status("job", job, job_status(job, self._pods(job), now_rfc3339()))

    def _start(self, pod: Mapping[str, Any], job: str, namespace: str) -> None:
        plan = download_plan(pod, job, namespace, self._ctx.faults())
        uid = str(meta_of(pod)["uid"])
        self._downloads[uid] = _Download(plan, time.monotonic())
        self._schedule(pod, 0.0)

    def _schedule(self, pod: Mapping[str, Any], delay: float) -> None:
        meta = meta_of(pod)
        uid = str(meta["uid"])
        download = self._downloads.get(uid)
        if download is None or self._ctx.stopped:
            return
        key = ("download", str(meta.get("namespace", "")), str(meta["name"]), uid)
        loop = asyncio.get_running_loop()
        download.handle = loop.call_later(max(0.0, delay), self._ctx.enqueue, key)

    async def tick(self, namespace: str, pod_name: str, uid: str) -> None:
        """A download step: print progress, and finish (or fail) when it is time."""
        ctx = self._ctx
        download = self._downloads.get(uid)
        pod = ctx.peek("pod", namespace, pod_name)
        if download is None or pod is None or meta_of(pod).get("uid") != uid:
            self.pod_gone(uid)
            return
        plan = download.plan
        elapsed = time.monotonic() - download.started
        fraction = 1.0 if plan.seconds <= 0 else min(1.0, elapsed / plan.seconds)
        container = str(((pod.get("spec") or {}).get("containers") or [{}])[0].get("name", ""))
        book = ctx.store.pod_logs
        if plan.fail_at is not None and fraction >= plan.fail_at:
            done = int(plan.total * plan.fail_at)
            book.append(
                pod, container, [f"{PROGRESS_PREFIX} bytes={done} total={plan.total}", plan.error]
            )
            await self._exit(pod, container, 1, "Error")
            return
        done = int(plan.total * fraction)
        book.append(pod, container, [f"{PROGRESS_PREFIX} bytes={done} total={plan.total}"])
        if fraction >= 1.0:
            book.append(pod, container, ["hydrated: wrote /mnt/models/.modelfleet-hydrated"])
            await self._exit(pod, container, 0, "Completed")
            return
        step = max(plan.seconds / _STEPS, _MIN_STEP_SECONDS)
        if plan.fail_at is not None:
            step = min(step, max(plan.fail_at * plan.seconds - elapsed, 0.0) + _MIN_STEP_SECONDS)
        self._schedule(pod, step)

    async def _exit(self, pod: Mapping[str, Any], container: str, code: int, reason: str) -> None:
        self.pod_gone(str(meta_of(pod)["uid"]))
        now = now_rfc3339()
        statuses = [
            {
                **status,
                "ready": False,
                "started": False,
                "state": {"terminated": {"exitCode": code, "reason": reason, "finishedAt": now}},
            }
            for status in (pod.get("status") or {}).get("containerStatuses") or []
        ]
        old = (pod.get("status") or {}).get("conditions") or []
        ended = merge_conditions(
            old,
            [
                condition("Ready", False, "PodCompleted", ""),
                condition("ContainersReady", False, "PodCompleted", ""),
            ],
            now,
        )
        kept = [c for c in old if c.get("type") not in ("Ready", "ContainersReady")]
        conditions = [*kept, *ended]
        meta = meta_of(pod)
        await self._ctx.store.patch_status(
            "v1",
            "Pod",
            str(meta["name"]),
            {
                "phase": "Succeeded" if code == 0 else "Failed",
                "conditions": conditions,
                "containerStatuses": statuses,
            },
            namespace=meta.get("namespace"),
            field_manager=CONTROLLER_MANAGER,
        )
        self._ctx.store.pod_logs.terminated(pod, container)
