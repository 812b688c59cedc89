"""Workload faults in a simulated cluster: which pods never become ready, which images cannot be
pulled (and containerd's words for why), which crash after becoming ready, which engines reject
their arguments at start, and how the kubelet's restart back-off grows. The settings come from
the cluster's :class:`~modelfleet.sim.faults.FaultConfig`
(``never_ready``, ``crash_after_ready``, ``crash_after_ready_seconds``, and per image
``image_faults``); :mod:`.kubelet` acts on these decisions.

Faults are read when a pod starts (bind time) and when it becomes Ready, so changing them affects
pods started afterwards. A new workload fault goes here (the decision) and in the kubelet or the
controller that shows it (the writes).

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure; no I/O.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

from modelfleet.sim.faults import FaultConfig, ImageFault, PullError

__all__ = [
    "ARGPARSE_EXIT_CODE",
    "MAX_BACKOFF_SECONDS",
    "REJECT_AFTER_SECONDS",
    "crash_delay",
    "engine_fault",
    "never_ready",
    "pull_error",
    "pull_error_message",
    "rejected_args",
    "restart_backoff",
    "runs_again",
]

# The kubelet's crash-loop back-off doubles per restart up to five minutes.
MAX_BACKOFF_SECONDS = 300.0
# An engine that rejects its arguments dies while parsing them, before loading anything:
# about the Python start-up and imports of vLLM. argparse exits with code 2.
REJECT_AFTER_SECONDS = 1.0
ARGPARSE_EXIT_CODE = 2


def _engine(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    first = containers[0]
    return first if isinstance(first, Mapping) else {}


def engine_fault(faults: FaultConfig, pod: Mapping[str, Any]) -> ImageFault | None:
    """The per-image fault of the pod's engine (its first container), or None."""
    return faults.image_fault(str(_engine(pod).get("image", "")))


def rejected_args(fault: ImageFault | None, pod: Mapping[str, Any]) -> list[str]:
    """The engine's arguments its image does not recognise (``--flag`` or ``--flag=value``
    tokens whose flag matches a ``reject_args`` glob), in order; empty: it starts."""
    if fault is None or not fault.reject_args:
        return []
    engine = _engine(pod)
    tokens = [str(t) for t in (engine.get("command") or []) + (engine.get("args") or [])]
    out = []
    for token in tokens:
        flag = token.split("=", 1)[0]
        if flag.startswith("--") and any(fnmatch.fnmatchcase(flag, p) for p in fault.reject_args):
            out.append(token)
    return out


def runs_again(fault: ImageFault | None, pod: Mapping[str, Any]) -> bool:
    """Whether a restarted container starts serving again before its next crash (an image
    that crashes some time after start) rather than dying at once (rejected arguments, and
    the cluster-wide ``crash_after_ready`` fault, whose restarts crash straight away)."""
    return (
        fault is not None
        and fault.crash_after_seconds is not None
        and not rejected_args(fault, pod)
    )


def never_ready(faults: FaultConfig, workload: tuple[str, str]) -> bool:
    """The workload's pods stay in ``ImagePullBackOff`` (bound, never started), their registry
    not answering: a pull error that may heal, so nothing but a deadline gives up on it."""
    return faults.workload_never_ready(*workload)


def pull_error(faults: FaultConfig, pod: Mapping[str, Any]) -> PullError | None:
    """Why the pod's engine image cannot be pulled (its image's ``pull_error``), or None."""
    fault = engine_fault(faults, pod)
    return fault.pull_error if fault is not None else None


def _reference(image: str) -> str:
    """``image`` as containerd resolves it: Docker Hub names in full, ``latest`` if untagged."""
    first, _, rest = image.partition("/")
    if not rest or not ("." in first or ":" in first or first == "localhost"):
        image = f"docker.io/{image if rest else f'library/{image}'}"
    last = image.rsplit("/", 1)[-1]
    return image if ":" in last or "@" in last else f"{image}:latest"


def pull_error_message(kind: PullError, image: str) -> str:
    """containerd's error for a failed pull of ``image``, as the kubelet passes it on (the
    ``ErrImagePull`` waiting message and the ``Failed to pull image`` event)."""
    ref = _reference(image)
    host, _, path = ref.partition("/")
    repo = path.rsplit(":", 1)[0].split("@", 1)[0]
    head = f'failed to pull and unpack image "{ref}"'
    resolve = f'failed to resolve reference "{ref}"'
    registry = "registry-1.docker.io" if host == "docker.io" else host
    if kind == "not-found":
        return f"rpc error: code = NotFound desc = {head}: {resolve}: {ref}: not found"
    if kind == "unauthorized":
        return (
            f"rpc error: code = Unknown desc = {head}: {resolve}: pull access denied, "
            "repository does not exist or may require authorization: server message: "
            "insufficient_scope: authorization failed"
        )
    if kind == "rate-limited":
        return (
            f"rpc error: code = Unknown desc = {head}: failed to copy: httpReadSeeker: failed "
            f"open: unexpected status code https://{registry}/v2/{repo}/manifests/"
            f"{ref.rsplit(':', 1)[-1]}: 429 Too Many Requests - Server message: "
            "toomanyrequests: You have reached your unauthenticated pull rate limit. "
            "https://www.docker.com/increase-rate-limit"
        )
    return (
        f"rpc error: code = DeadlineExceeded desc = {head}: {resolve}: failed to do request: "
        f'Head "https://{registry}/v2/{repo}/manifests/{ref.rsplit(":", 1)[-1]}": '
        "dial tcp 52.1.184.176:443: i/o timeout"
    )


def crash_delay(
    faults: FaultConfig, workload: tuple[str, str], pod: Mapping[str, Any] | None = None
) -> float | None:
    """Seconds after Ready at which the pod crashes, or None if it does not: its image's
    ``crash_after_seconds`` first, then the cluster's ``crash_after_ready`` workloads."""
    fault = engine_fault(faults, pod) if pod is not None else None
    if fault is not None and fault.crash_after_seconds is not None:
        return fault.crash_after_seconds
    if not faults.workload_crashes(*workload):
        return None
    return faults.crash_after_ready_seconds or 0.0


def restart_backoff(first_seconds: float, restarts: int) -> float:
    """The back-off before restart number ``restarts`` (1 is the first)."""
    return min(MAX_BACKOFF_SECONDS, first_seconds * 2.0 ** (restarts - 1))
