"""The pod status a simulated kubelet reports at each step of a pod's life: bound and starting
(or stuck pulling its image), running and Ready, crash-looping; container states, conditions,
and the deterministic host and image identities they carry.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure: pods in,
status dicts out; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modelfleet.sim.controllers.object_helpers import condition, merge_conditions, stable_digest
from modelfleet.sim.controllers.workload_faults import pull_error_message

__all__ = [
    "back_off_message",
    "crash_loop_status",
    "node_ip",
    "pull_failed_status",
    "ready_status",
    "restarted_status",
    "starting_status",
]


def _containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((pod.get("spec") or {}).get("containers") or [])


def _not_ready(pod: Mapping[str, Any]) -> str:
    names = [str(c.get("name")) for c in _containers(pod)]
    return f"containers with unready status: [{' '.join(names)}]"


def _waiting(container: Mapping[str, Any], reason: str, message: str) -> dict[str, Any]:
    waiting: dict[str, Any] = {"reason": reason}
    if message:
        waiting["message"] = message
    return {
        "name": container.get("name"),
        "image": container.get("image", ""),
        "imageID": "",
        "ready": False,
        "started": False,
        "restartCount": 0,
        "state": {"waiting": waiting},
    }


def _running(
    container: Mapping[str, Any], now: str, *, restarts: int = 0, ready: bool = True
) -> dict[str, Any]:
    image = str(container.get("image", ""))
    return {
        "name": container.get("name"),
        "image": image,
        "imageID": f"{image.split(':', 1)[0]}@sha256:{stable_digest(image) * 6 + 'abcd'}",
        "ready": ready,
        "started": True,
        "restartCount": restarts,
        "state": {"running": {"startedAt": now}},
    }


def node_ip(node: str) -> str:
    digest = stable_digest(node)
    return f"10.128.{int(digest[:2], 16)}.{int(digest[2:4], 16) % 250 + 2}"


def _conditions(
    pod: Mapping[str, Any], now: str, *, ready: bool, not_ready: str = ""
) -> list[dict[str, Any]]:
    return merge_conditions(
        (pod.get("status") or {}).get("conditions"),
        [
            condition("PodScheduled", True, "", ""),
            condition("Initialized", True, "", ""),
            condition("ContainersReady", ready, "" if ready else "ContainersNotReady", not_ready),
            condition("Ready", ready, "" if ready else "ContainersNotReady", not_ready),
        ],
        now,
    )


def back_off_message(image: str, error: str) -> str:
    """The kubelet's ``ImagePullBackOff`` message: since Kubernetes 1.32 it carries the error of
    the pull that failed last."""
    return f'Back-off pulling image "{image}": ErrImagePull: {error}'


def starting_status(
    pod: Mapping[str, Any], node: str, now: str, *, pulling_forever: bool
) -> dict[str, Any]:
    """Bound to ``node`` and starting: containers creating, or (the never-ready fault) stuck in
    ``ImagePullBackOff``, their registry not answering."""

    def waiting(c: Mapping[str, Any]) -> dict[str, Any]:
        if not pulling_forever:
            return _waiting(c, "ContainerCreating", "")
        image = str(c.get("image", ""))
        error = pull_error_message("timeout", image)
        return _waiting(c, "ImagePullBackOff", back_off_message(image, error))

    return {
        "phase": "Pending",
        "conditions": _conditions(pod, now, ready=False, not_ready=_not_ready(pod)),
        "hostIP": node_ip(node),
        "startTime": now,
        "containerStatuses": [waiting(c) for c in _containers(pod)],
    }


def pull_failed_status(
    pod: Mapping[str, Any], *, backing_off: bool, error: str, now: str
) -> dict[str, Any]:
    """The engine's image could not be pulled (``error``, containerd's words): ``ErrImagePull``
    right after a failed attempt, ``ImagePullBackOff`` while the kubelet waits to try again.
    The other containers wait to be created."""
    containers = _containers(pod)
    first = containers[0] if containers else {}
    image = str(first.get("image", ""))
    engine = (
        _waiting(first, "ImagePullBackOff", back_off_message(image, error))
        if backing_off
        else _waiting(first, "ErrImagePull", error)
    )
    return {
        "phase": "Pending",
        "conditions": _conditions(pod, now, ready=False, not_ready=_not_ready(pod)),
        "containerStatuses": [
            engine,
            *[_waiting(c, "ContainerCreating", "") for c in containers[1:]],
        ]
        if containers
        else [],
    }


def ready_status(
    pod: Mapping[str, Any], pod_ip: str, now: str, *, restarts: int = 0
) -> dict[str, Any]:
    """Running with every container ready (the first after ``restarts`` restarts)."""
    containers = _containers(pod)
    return {
        "phase": "Running",
        "podIP": pod_ip,
        "conditions": _conditions(pod, now, ready=True),
        "containerStatuses": [
            _running(c, now, restarts=restarts if i == 0 else 0) for i, c in enumerate(containers)
        ],
    }


def restarted_status(pod: Mapping[str, Any], *, restarts: int, now: str) -> dict[str, Any]:
    """The crashed first container restarted (``restarts`` so far): running, not yet ready."""
    containers = _containers(pod)
    first = containers[0] if containers else {}
    not_ready = f"containers with unready status: [{first.get('name')}]"
    return {
        "phase": "Running",
        "conditions": _conditions(pod, now, ready=False, not_ready=not_ready),
        "containerStatuses": [
            _running(c, now, restarts=restarts, ready=False) if i == 0 else _running(c, now)
            for i, c in enumerate(containers)
        ],
    }


def crash_loop_status(
    pod: Mapping[str, Any], *, restarts: int, backoff: float, now: str, exit_code: int = 1
) -> dict[str, Any] | None:
    """The first container in ``CrashLoopBackOff`` after ``restarts`` restarts (the others keep
    running); None for a pod without containers."""
    meta = pod.get("metadata") or {}
    containers = _containers(pod)
    if not containers:
        return None
    crashed = containers[0]
    message = (
        f"back-off {backoff:g}s restarting failed container={crashed.get('name')} "
        f"pod={meta.get('name')}_{meta.get('namespace')}({meta.get('uid')})"
    )
    statuses = [
        {
            **_waiting(crashed, "CrashLoopBackOff", message),
            "restartCount": restarts,
            "lastState": {
                "terminated": {
                    "exitCode": exit_code,
                    "reason": "Error",
                    "startedAt": now,
                    "finishedAt": now,
                }
            },
        },
        *[_running(c, now) for c in containers[1:]],
    ]
    not_ready = f"containers with unready status: [{crashed.get('name')}]"
    return {
        "phase": "Running",
        "conditions": _conditions(pod, now, ready=False, not_ready=not_ready),
        "containerStatuses": statuses,
    }
