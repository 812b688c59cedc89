"""The kubelet of a simulated cluster: a bound pod starts (its containers creating), becomes
Ready after a start-up delay, and, under the workload faults of :mod:`.workload_faults`, stays
pulling its image forever or crash-loops with the kubelet's back-off.

Development/test emulator only: product code never imports ``modelfleet.sim``. Writes pod status
through the cluster's store and schedules the next step on the loop's timers (through
:class:`~.context.ClusterContext`); time is real. Status contents come from :mod:`.pod_status`.
"""

from __future__ import annotations

import contextlib
import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from modelfleet.sim.apiserver.object_table import now_rfc3339
from modelfleet.sim.controllers import workload_faults
from modelfleet.sim.controllers.context import ClusterContext, PodAction, meta_of
from modelfleet.sim.controllers.pod_status import (
    crash_loop_status,
    ready_status,
    starting_status,
)

__all__ = ["DEFAULT_IMAGE_STARTUP", "KUBELET", "STARTUP_ANNOTATION", "Kubelet", "StartupPolicy"]

KUBELET = "kubelet"
STARTUP_ANNOTATION = "sim.modelfleet.dev/startup-seconds"
# Rough times from pod start to a passing readiness probe on warm nodes (image cached, weights
# on local disk for small models). Any image not listed takes ``fallback_seconds``.
DEFAULT_IMAGE_STARTUP: tuple[tuple[str, float], ...] = (
    ("*vllm*", 30.0),
    ("*sglang*", 30.0),
    ("*tensorrt*", 45.0),
    ("*endpoint-picker*", 3.0),
    ("*llm-d-router*", 3.0),
    ("*inference-scheduler*", 3.0),
)


@dataclass(frozen=True)
class StartupPolicy:
    """How long a bound pod takes to become Ready.

    Precedence: the ``sim.modelfleet.dev/startup-seconds`` annotation (on the pod template or the
    workload), then ``per_workload`` (globs over workload names or ``namespace/name``, first
    match wins), then ``default_seconds`` when set (a global override, e.g. 0 in tests), then
    the slowest matching ``per_image`` entry among the pod's containers, then
    ``fallback_seconds``.
    """

    default_seconds: float | None = None
    per_workload: tuple[tuple[str, float], ...] = ()
    per_image: tuple[tuple[str, float], ...] = DEFAULT_IMAGE_STARTUP
    fallback_seconds: float = 5.0
    # The kubelet's first crash-loop back-off; it doubles per restart up to five minutes.
    crash_backoff_seconds: float = 10.0

    def seconds_for(
        self,
        *,
        workload: str,
        namespace: str,
        annotations: Sequence[Mapping[str, str]],
        images: Iterable[str],
    ) -> float:
        for notes in annotations:
            raw = notes.get(STARTUP_ANNOTATION)
            if raw is not None:
                with contextlib.suppress(ValueError):
                    return max(0.0, float(raw))
        qualified = f"{namespace}/{workload}"
        for pattern, seconds in self.per_workload:
            if fnmatch.fnmatchcase(workload, pattern) or fnmatch.fnmatchcase(qualified, pattern):
                return seconds
        if self.default_seconds is not None:
            return self.default_seconds
        matched = [
            seconds
            for image in images
            for pattern, seconds in self.per_image
            if fnmatch.fnmatchcase(image, pattern)
        ]
        return max(matched) if matched else self.fallback_seconds


class Kubelet:
    """Pod start-up, readiness and crash loops on one simulated cluster."""

    def __init__(self, ctx: ClusterContext, startup: StartupPolicy, pod_cidr_prefix: str) -> None:
        self._ctx = ctx
        self.startup = startup
        self._pod_prefix = pod_cidr_prefix
        self._ip_counter = 0

    async def pod_bound(self, pod: Mapping[str, Any], node: str, extra: Mapping[str, Any]) -> None:
        """``pod`` was just bound to ``node``: report it starting (``extra`` adds status fields,
        such as the scheduler's resourceClaimStatuses) and time its readiness."""
        ctx = self._ctx
        stuck = workload_faults.never_ready(ctx.faults(), ctx.workload_of(pod))
        status = {**starting_status(pod, node, now_rfc3339(), pulling_forever=stuck), **extra}
        await self._write(pod, status)
        if not stuck:
            ctx.set_timer(pod, self._startup_seconds(pod), "ready", settling=True)

    def _startup_seconds(self, pod: Mapping[str, Any]) -> float:
        ctx = self._ctx
        workload, namespace = ctx.workload_of(pod)
        owner = ctx.owner_key(pod)
        notes: list[Mapping[str, str]] = [meta_of(pod).get("annotations") or {}]
        if owner is not None:
            obj = ctx.peek(owner[0], owner[1], owner[2])
            if obj is not None:
                notes.append(meta_of(obj).get("annotations") or {})
        images = [str(c.get("image", "")) for c in (pod.get("spec") or {}).get("containers") or []]
        return self.startup.seconds_for(
            workload=workload, namespace=namespace, annotations=notes, images=images
        )

    async def tick(self, namespace: str, name: str, uid: str, action: PodAction) -> None:
        """A pod timer fired: become Ready, crash, or restart and crash again."""
        pod = self._ctx.peek("pod", namespace, name)
        if pod is None or meta_of(pod).get("uid") != uid or meta_of(pod).get("deletionTimestamp"):
            return
        first = self.startup.crash_backoff_seconds
        if action == "ready":
            await self._ready(pod)
        elif action == "crash":
            await self._crash(pod, restarts=1, backoff=first)
        else:
            statuses = (pod.get("status") or {}).get("containerStatuses") or []
            restarts = int(statuses[0].get("restartCount", 0)) + 1 if statuses else 1
            backoff = workload_faults.restart_backoff(first, restarts)
            await self._crash(pod, restarts=restarts, backoff=backoff)

    async def _write(self, pod: Mapping[str, Any], status: Mapping[str, Any]) -> None:
        meta = meta_of(pod)
        await self._ctx.store.patch_status(
            "v1",
            "Pod",
            str(meta["name"]),
            status,
            namespace=meta.get("namespace"),
            field_manager=KUBELET,
        )

    async def _ready(self, pod: Mapping[str, Any]) -> None:
        self._ip_counter += 1
        n = self._ip_counter
        pod_ip = f"{self._pod_prefix}.{(n // 250) % 250}.{n % 250 + 2}"
        await self._write(pod, ready_status(pod, pod_ip, now_rfc3339()))
        ctx = self._ctx
        delay = workload_faults.crash_delay(ctx.faults(), ctx.workload_of(pod))
        if delay is not None:
            ctx.set_timer(pod, delay, "crash", settling=True)

    async def _crash(self, pod: Mapping[str, Any], *, restarts: int, backoff: float) -> None:
        status = crash_loop_status(pod, restarts=restarts, backoff=backoff, now=now_rfc3339())
        if status is None:
            return
        await self._write(pod, status)
        self._ctx.set_timer(pod, backoff, "restart", settling=False)
