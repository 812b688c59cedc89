"""The kubelet of a simulated cluster: a bound pod starts (its containers creating), becomes
Ready after a start-up delay, and, under the workload faults of :mod:`.workload_faults`, stays
pulling its image forever, fails to pull it (``ErrImagePull``, then ``ImagePullBackOff`` until
its next attempt, with the crash-loop back-off's timing), crash-loops with the kubelet's
back-off, exits at start because its image rejects its arguments, or (an image that crashes
after some time) serves again after each restart until its next crash.

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
from modelfleet.sim.controllers import engine_logs, workload_faults
from modelfleet.sim.controllers.context import ClusterContext, PodAction, meta_of
from modelfleet.sim.controllers.events import EventType
from modelfleet.sim.controllers.pod_status import (
    crash_loop_status,
    pull_failed_status,
    ready_status,
    restarted_status,
    starting_status,
)

__all__ = ["DEFAULT_IMAGE_STARTUP", "KUBELET", "STARTUP_ANNOTATION", "Kubelet", "StartupPolicy"]

KUBELET = "kubelet"
# A pull the registry refuses fails within a second; the kubelet's next sync of the pod, a moment
# later, reports the back-off.
PULL_ATTEMPT_SECONDS = 0.5
PULL_SYNC_SECONDS = 1.0
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


def _containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((pod.get("spec") or {}).get("containers") or [])


def _restarts(pod: Mapping[str, Any]) -> int:
    """The first container's restart count so far."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return int(statuses[0].get("restartCount", 0)) if statuses else 0


class Kubelet:
    """Pod start-up, readiness and crash loops on one simulated cluster."""

    def __init__(self, ctx: ClusterContext, startup: StartupPolicy, pod_cidr_prefix: str) -> None:
        self._ctx = ctx
        self.startup = startup
        self._pod_prefix = pod_cidr_prefix
        self._ip_counter = 0
        # Failed pulls so far per pod uid (the kubelet's image back-off per pod and image).
        self._pulls_failed: dict[str, int] = {}

    async def pod_bound(self, pod: Mapping[str, Any], node: str, extra: Mapping[str, Any]) -> None:
        """``pod`` was just bound to ``node``: report it starting (``extra`` adds status fields,
        such as the scheduler's resourceClaimStatuses) and time its readiness."""
        ctx = self._ctx
        stuck = workload_faults.never_ready(ctx.faults(), ctx.workload_of(pod))
        status = {**starting_status(pod, node, now_rfc3339(), pulling_forever=stuck), **extra}
        await self._write(pod, status)
        unpullable = workload_faults.pull_error(ctx.faults(), pod)
        for number, container in enumerate(_containers(pod)):
            image = str(container.get("image", ""))
            await self._event(pod, container, "Normal", "Pulling", f'Pulling image "{image}"')
            if stuck:
                error = workload_faults.pull_error_message("timeout", image)
                await self._pull_failed_events(pod, container, error)
                await self._back_off_events(pod, container)
            if unpullable is not None and number == 0:
                break  # the kubelet pulls the others after the engine's image
        if stuck:
            return
        if unpullable is not None:
            # A pull fails in well under a second (the registry answers at once), and is not
            # pending work: it goes on failing with the back-off for as long as the pod lives.
            ctx.set_timer(pod, PULL_ATTEMPT_SECONDS, "pull", settling=False)
            return
        self._run(pod)

    def _run(self, pod: Mapping[str, Any]) -> None:
        """The images are there: time the engine's start (Ready, or its exit at start)."""
        ctx = self._ctx
        fault = workload_faults.engine_fault(ctx.faults(), pod)
        if workload_faults.rejected_args(fault, pod):
            # The engine parses its command line first and exits: it is never Ready.
            ctx.set_timer(pod, workload_faults.REJECT_AFTER_SECONDS, "crash", settling=True)
        else:
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
            self._pulls_failed.pop(uid, None)
            return
        first = self.startup.crash_backoff_seconds
        if action in ("pull", "pull_back_off"):
            await self._pull(pod, action, first)
            return
        restarts = _restarts(pod) + 1
        backoff = workload_faults.restart_backoff(first, restarts)
        if action == "ready":
            await self._ready(pod)
        elif action == "crash":
            await self._crash(pod, restarts=restarts, backoff=backoff)
        elif workload_faults.runs_again(workload_faults.engine_fault(self._ctx.faults(), pod), pod):
            await self._restart(pod)
        else:
            await self._crash(pod, restarts=restarts, backoff=backoff)

    async def _pull(self, pod: Mapping[str, Any], action: PodAction, first: float) -> None:
        """An attempt to pull the engine's image fails (``ErrImagePull``); a moment later the
        kubelet's next sync finds it backing off (``ImagePullBackOff``) until the next attempt,
        the back-off doubling per failure up to five minutes."""
        containers = _containers(pod)
        kind = workload_faults.pull_error(self._ctx.faults(), pod)
        if not containers:
            return
        engine = containers[0]
        if kind is None:
            # The registry serves it now (the fault was cleared): the next attempt succeeds.
            if action == "pull":
                self._pulls_failed.pop(str(meta_of(pod).get("uid")), None)
                image = engine.get("image", "")
                await self._event(pod, engine, "Normal", "Pulling", f'Pulling image "{image}"')
                self._run(pod)
            else:
                self._ctx.set_timer(pod, PULL_ATTEMPT_SECONDS, "pull", settling=False)
            return
        image = str(engine.get("image", ""))
        error = workload_faults.pull_error_message(kind, image)
        uid = str(meta_of(pod).get("uid"))
        now = now_rfc3339()
        if action == "pull":
            failed = self._pulls_failed[uid] = self._pulls_failed.get(uid, 0) + 1
            if failed > 1:
                await self._event(pod, engine, "Normal", "Pulling", f'Pulling image "{image}"')
            await self._write(pod, pull_failed_status(pod, backing_off=False, error=error, now=now))
            await self._pull_failed_events(pod, engine, error)
            self._ctx.set_timer(pod, PULL_SYNC_SECONDS, "pull_back_off", settling=False)
            return
        failed = self._pulls_failed.get(uid, 1)
        await self._write(pod, pull_failed_status(pod, backing_off=True, error=error, now=now))
        await self._back_off_events(pod, engine)
        wait = workload_faults.restart_backoff(first, failed) - PULL_SYNC_SECONDS
        self._ctx.set_timer(pod, max(PULL_ATTEMPT_SECONDS, wait), "pull", settling=False)

    async def _pull_failed_events(
        self, pod: Mapping[str, Any], container: Mapping[str, Any], error: str
    ) -> None:
        image = container.get("image", "")
        await self._event(
            pod, container, "Warning", "Failed", f'Failed to pull image "{image}": {error}'
        )
        await self._event(pod, container, "Warning", "Failed", "Error: ErrImagePull")

    async def _back_off_events(self, pod: Mapping[str, Any], container: Mapping[str, Any]) -> None:
        image = container.get("image", "")
        await self._event(pod, container, "Normal", "BackOff", f'Back-off pulling image "{image}"')
        await self._event(pod, container, "Warning", "Failed", "Error: ImagePullBackOff")

    async def _event(
        self,
        pod: Mapping[str, Any],
        container: Mapping[str, Any],
        event_type: EventType,
        reason: str,
        message: str,
    ) -> None:
        await self._ctx.events.record(
            pod,
            event_type,
            reason,
            message,
            component=KUBELET,
            host=str((pod.get("spec") or {}).get("nodeName") or ""),
            field_path=f"spec.containers{{{container.get('name', '')}}}",
        )

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

    async def _restart(self, pod: Mapping[str, Any]) -> None:
        """The crashed container starts again (after its back-off) and becomes Ready after the
        usual start-up, to crash again later (an image that crashes some time after start)."""
        restarts = _restarts(pod)
        await self._write(pod, restarted_status(pod, restarts=restarts, now=now_rfc3339()))
        containers = _containers(pod)
        if containers:
            self._ctx.store.pod_logs.new_run(pod, str(containers[0].get("name", "")))
        self._ctx.set_timer(pod, self._startup_seconds(pod), "ready", settling=True)

    async def _ready(self, pod: Mapping[str, Any]) -> None:
        self._ip_counter += 1
        n = self._ip_counter
        pod_ip = f"{self._pod_prefix}.{(n // 250) % 250}.{n % 250 + 2}"
        restarts = _restarts(pod)
        await self._write(pod, ready_status(pod, pod_ip, now_rfc3339(), restarts=restarts))
        for container in _containers(pod):
            image, cname = container.get("image", ""), container.get("name", "")
            await self._event(
                pod, container, "Normal", "Pulled", f'Successfully pulled image "{image}"'
            )
            await self._event(pod, container, "Normal", "Created", f"Created container: {cname}")
            await self._event(pod, container, "Normal", "Started", f"Started container {cname}")
        for container in _containers(pod):
            lines = engine_logs.startup_lines(container, pod_ip)
            self._ctx.store.pod_logs.append(pod, str(container.get("name", "")), lines)
        ctx = self._ctx
        delay = workload_faults.crash_delay(ctx.faults(), ctx.workload_of(pod), pod)
        if delay is not None:
            # A crash minutes away (a slow crasher) is the pod's steady state, not pending work.
            fault = workload_faults.engine_fault(ctx.faults(), pod)
            ctx.set_timer(pod, delay, "crash", settling=not workload_faults.runs_again(fault, pod))

    async def _crash(self, pod: Mapping[str, Any], *, restarts: int, backoff: float) -> None:
        fault = workload_faults.engine_fault(self._ctx.faults(), pod)
        rejected = workload_faults.rejected_args(fault, pod)
        ran = workload_faults.runs_again(fault, pod)
        exit_code = workload_faults.ARGPARSE_EXIT_CODE if rejected else 1
        status = crash_loop_status(
            pod, restarts=restarts, backoff=backoff, now=now_rfc3339(), exit_code=exit_code
        )
        if status is None:
            return
        await self._write(pod, status)
        containers = _containers(pod)
        if containers:
            crashed = containers[0]
            meta = meta_of(pod)
            if restarts == 1 and crashed.get("readinessProbe"):
                await self._event(
                    pod,
                    crashed,
                    "Warning",
                    "Unhealthy",
                    "Readiness probe failed: connection refused",
                )
            await self._event(
                pod,
                crashed,
                "Warning",
                "BackOff",
                f"Back-off restarting failed container {crashed.get('name')} in pod "
                f"{meta.get('name')}_{meta.get('namespace')}({meta.get('uid')})",
            )
            book = self._ctx.store.pod_logs
            cname = str(crashed.get("name", ""))
            if rejected:
                if restarts > 1:
                    book.new_run(pod, cname)
                book.append(pod, cname, engine_logs.rejected_args_lines(crashed, rejected))
            else:
                if restarts > 1 and not ran:
                    # The restarted container ran again (start-up lines) before crashing again;
                    # one that serves again between crashes logged its start when Ready.
                    book.new_run(pod, cname)
                    pod_ip = str((pod.get("status") or {}).get("podIP") or "")
                    book.append(pod, cname, engine_logs.startup_lines(crashed, pod_ip))
                book.append(pod, cname, engine_logs.crash_lines(crashed, restarts))
            book.terminated(pod, cname)
        self._ctx.set_timer(pod, backoff, "restart", settling=False)
