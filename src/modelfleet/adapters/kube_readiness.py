"""Readiness of one object on a workload cluster, told the way an operator wants to read it.

A rendering ``ReadinessRule`` names an object and the condition that means "ready" (``Available``
for Deployments and LeaderWorkerSets). When the condition is not True, the reason says why in
Kubernetes' own words: the object is missing, its controller has not caught up with the latest
spec, or its pods' story (Pending and why the scheduler refused them, image pull errors, crash
loops, containers that run but are not ready). It also picks out the evidence that a workload
will not come up by itself: a crash loop (``backing_off``) and an image pull error that does not
heal (``pull_failure``: the image is not in the registry, or the registry refuses the node's
credentials; rate limits and timeouts heal, so they are left to the progress deadline).

Pure: works on the JSON dicts the adapter fetched. It may not do I/O or import SDKs; the adapter
(``modelfleet.adapters.kube_client``) does the fetching.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from modelfleet.rendering.readiness import ReadinessRule

__all__ = [
    "LWS_NAME_LABEL",
    "PULL_FAILURE_AFTER",
    "PullFailure",
    "Readiness",
    "backing_off",
    "evaluate",
    "most_restarts",
    "permanent_pull_error",
    "pod_problem",
    "pod_selector",
    "pull_failure",
    "unpullable",
]

LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
_WORKLOAD_KINDS = {("apps/v1", "Deployment"), ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")}
# Enough distinct problems to diagnose; more would bury the first one.
_MAX_PROBLEMS = 3
# A container waits with these while its image cannot be pulled: ErrImagePull right after a
# failed attempt, ImagePullBackOff until the next (since Kubernetes 1.32 its message carries the
# last attempt's error). InvalidImageName is never retried.
_PULL_WAITING = frozenset({"ErrImagePull", "ImagePullBackOff"})
# Pull errors that heal by themselves: the registry rate-limits, is overloaded or out of reach.
# Checked first: a rate limit's text may also speak of authentication.
_TRANSIENT_PULL = re.compile(
    r"toomanyrequests|too many requests|rate limit|timeout|timed out|deadline ?exceeded"
    r"|connection (?:refused|reset)|no route to host|temporary failure|try again"
    r"|service unavailable|bad gateway|gateway timeout|internal server error"
    r"|registry is unavailable|unexpected eof|context canceled|no space left",
    re.IGNORECASE,
)
# containerd's and the registries' words for an image that will not come: it is not there, or
# the node may not have it.
_PERMANENT_PULL = re.compile(
    r"not found|manifest unknown|name unknown|pull access denied|repository does not exist"
    r"|unauthorized|authorization failed|insufficient_scope|403 forbidden|access denied|denied: "
    r"|invalid reference format",
    re.IGNORECASE,
)
# How long after its pod started a permanent pull error fails the workload. The kubelet's first
# image back-off is 10 s, so by then it has tried at least twice and reports the last attempt's
# error: a registry that briefly answered "not found" (an image pushed a moment late) has had
# its second chance, and the wait is still far below any progress deadline.
PULL_FAILURE_AFTER = timedelta(seconds=20)


@dataclass(frozen=True)
class PullFailure:
    """A container whose image pull fails in a way that does not heal by itself."""

    # The kubelet's words (the waiting message: containerd's error).
    error: str
    # When its pod started (``status.startTime``); None when the kubelet did not say.
    since: datetime | None


@dataclass(frozen=True)
class Readiness:
    ready: bool
    reason: str
    # The object's own readiness condition is False: the cluster reports a change, which is
    # more than one sample that found the object missing or its status not caught up yet.
    reported: bool = False
    # The most restarts of one container of the workload's pods (0 when pods were not read):
    # the evidence of a crash loop, reported with a replica that left Ready.
    restarts: int = 0
    # A container of the workload's pods is waiting in CrashLoopBackOff (the kubelet backs
    # off restarting it).
    backing_off: bool = False
    # A container of the workload's pods cannot have its image, for good (``pull_failure``).
    pull_failure: PullFailure | None = None


def _container_statuses(pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [
        s
        for pod in pods
        for s in [
            *((pod.get("status") or {}).get("initContainerStatuses") or []),
            *((pod.get("status") or {}).get("containerStatuses") or []),
        ]
        if isinstance(s, Mapping)
    ]


def most_restarts(pods: Sequence[Mapping[str, Any]]) -> int:
    """The highest ``restartCount`` of any container of ``pods``."""
    return max((int(s.get("restartCount") or 0) for s in _container_statuses(pods)), default=0)


def backing_off(pods: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the kubelet backs off restarting a container of ``pods`` (CrashLoopBackOff)."""
    return any(
        ((s.get("state") or {}).get("waiting") or {}).get("reason") == "CrashLoopBackOff"
        for s in _container_statuses(pods)
    )


def permanent_pull_error(reason: str, message: str) -> bool:
    """Whether a container waiting with ``reason`` and the kubelet's ``message`` cannot have its
    image until someone changes something: the image or tag does not exist, or the registry
    refuses the node's credentials. Rate limits (429 toomanyrequests), timeouts and registries
    that do not answer heal by themselves, and so does anything not recognised."""
    if reason == "InvalidImageName":
        return True
    if reason not in _PULL_WAITING:
        return False
    return not _TRANSIENT_PULL.search(message) and bool(_PERMANENT_PULL.search(message))


def _started(pod: Mapping[str, Any]) -> datetime | None:
    raw = (pod.get("status") or {}).get("startTime")
    if not isinstance(raw, str):
        return None
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None


def pull_failure(pods: Sequence[Mapping[str, Any]]) -> PullFailure | None:
    """The permanent pull error of a container of ``pods``, from the pod that started first
    (its start bounds how long the error has lasted), or None."""
    found = []
    for pod in pods:
        for s in _container_statuses([pod]):
            waiting = (s.get("state") or {}).get("waiting") or {}
            reason, message = str(waiting.get("reason") or ""), str(waiting.get("message") or "")
            if permanent_pull_error(reason, message):
                found.append(PullFailure(error=message or reason, since=_started(pod)))
                break
    return min(found, key=lambda f: (f.since is None, f.since or datetime.min), default=None)


def unpullable(error: str, since: datetime | None, now: datetime) -> bool:
    """Whether a workload whose pods report the permanent pull ``error`` (``pull_failure``),
    in a pod started at ``since``, is failed ``now``: once ``PULL_FAILURE_AFTER`` has passed,
    not at the progress deadline. Without a start time nothing is known to have been retried."""
    return bool(error) and since is not None and now - since >= PULL_FAILURE_AFTER


def is_workload(api_version: str, kind: str) -> bool:
    """Whether readiness of this kind is explained through its pods."""
    return (api_version, kind) in _WORKLOAD_KINDS


def _requirement(expr: Mapping[str, Any]) -> str | None:
    key = expr.get("key")
    op = expr.get("operator")
    values = [str(v) for v in expr.get("values") or []]
    if not isinstance(key, str):
        return None
    if op == "In":
        return f"{key} in ({','.join(values)})"
    if op == "NotIn":
        return f"{key} notin ({','.join(values)})"
    if op == "Exists":
        return key
    if op == "DoesNotExist":
        return f"!{key}"
    return None


def pod_selector(obj: Mapping[str, Any]) -> str | None:
    """The label selector of a workload's pods, as a ``labelSelector`` query string."""
    kind = obj.get("kind")
    name = (obj.get("metadata") or {}).get("name", "")
    if kind == "LeaderWorkerSet":
        # The LWS controller stamps this on leaders and workers alike.
        return f"{LWS_NAME_LABEL}={name}"
    selector = (obj.get("spec") or {}).get("selector") or {}
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        req = _requirement(expr)
        if req is not None:
            parts.append(req)
    return ",".join(parts) or None


def _condition(obj: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == type_:
            return cond
    return None


def _container_problem(status: Mapping[str, Any]) -> str | None:
    name = status.get("name", "?")
    state = status.get("state") or {}
    restarts = int(status.get("restartCount") or 0)
    waiting = state.get("waiting")
    if isinstance(waiting, Mapping):
        reason = waiting.get("reason") or "Waiting"
        message = waiting.get("message") or ""
        text = f"container {name} {reason}"
        if reason == "CrashLoopBackOff" or restarts:
            text += f" (restarted {restarts} time{'s' if restarts != 1 else ''})"
        if reason == "CrashLoopBackOff":
            last = (status.get("lastState") or {}).get("terminated") or {}
            if last:
                text += (
                    f", last exit {last.get('reason') or 'Error'} "
                    f"(exit code {last.get('exitCode', '?')})"
                )
        return f"{text}: {message}" if message else text
    terminated = state.get("terminated")
    if isinstance(terminated, Mapping):
        reason = terminated.get("reason") or "Terminated"
        return (
            f"container {name} terminated: {reason} (exit code {terminated.get('exitCode', '?')})"
        )
    if not status.get("ready", False):
        return f"container {name} is running but not ready (readiness probe not passing)"
    return None


def pod_problem(pod: Mapping[str, Any]) -> str | None:
    """Why one pod is not Ready, or None when it is."""
    status = pod.get("status") or {}
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "terminating"
    scheduled = _condition(pod, "PodScheduled")
    if scheduled is not None and scheduled.get("status") == "False":
        reason = scheduled.get("reason") or "Unschedulable"
        message = scheduled.get("message") or ""
        return f"Pending, {reason}: {message}" if message else f"Pending, {reason}"
    ready = _condition(pod, "Ready")
    if ready is not None and ready.get("status") == "True":
        return None
    problems = [
        p
        for s in [
            *(status.get("initContainerStatuses") or []),
            *(status.get("containerStatuses") or []),
        ]
        if isinstance(s, Mapping) and (p := _container_problem(s)) is not None
    ]
    if problems:
        return "; ".join(problems)
    phase = status.get("phase") or "Pending"
    if scheduled is None:
        return f"{phase}, not scheduled yet"
    return f"{phase}, containers starting"


def _pods_story(pods: Sequence[Mapping[str, Any]]) -> tuple[int, str]:
    """(ready pods, the distinct problems of the others, each with the pods that have it)."""
    by_problem: dict[str, list[str]] = {}
    ready = 0
    for pod in sorted(pods, key=lambda p: str((p.get("metadata") or {}).get("name", ""))):
        problem = pod_problem(pod)
        if problem is None:
            ready += 1
            continue
        by_problem.setdefault(problem, []).append(str(pod["metadata"].get("name", "?")))
    parts = []
    for problem, names in list(by_problem.items())[:_MAX_PROBLEMS]:
        who = f"pod {names[0]}" if len(names) == 1 else f"pods {', '.join(names)}"
        parts.append(f"{who}: {problem}")
    hidden = len(by_problem) - _MAX_PROBLEMS
    if hidden > 0:
        parts.append(f"and {hidden} more problem{'s' if hidden != 1 else ''}")
    return ready, "; ".join(parts)


def _where(rule: ReadinessRule) -> str:
    return f"{rule.kind} {rule.namespace}/{rule.name}"


def evaluate(
    rule: ReadinessRule,
    obj: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]] | None = None,
) -> Readiness:
    """Readiness of ``obj`` under ``rule``; ``pods`` are the workload's pods, when it has any."""
    where = _where(rule)
    if obj is None:
        return Readiness(False, f"{where} not found")
    # The rule owns the definition of "ready"; this module only explains a "not yet".
    if rule.satisfied_by(obj):
        return Readiness(True, f"{where} is {rule.condition}")
    metadata = obj.get("metadata") or {}
    status = obj.get("status") or {}
    generation = metadata.get("generation")
    observed = status.get("observedGeneration")
    # A condition computed for an older spec says nothing about the one just applied.
    if isinstance(generation, int) and isinstance(observed, int) and observed < generation:
        return Readiness(
            False,
            f"{where}: controller has not observed generation {generation} yet "
            f"(observed {observed})",
        )
    cond = _condition(obj, rule.condition)
    reported = cond is not None and cond.get("status") == "False"
    if cond is None:
        head = f"{where} not {rule.condition}: no {rule.condition} condition reported yet"
    else:
        head = f"{where} not {rule.condition}"
        detail = cond.get("message") or cond.get("reason")
        if detail:
            head += f" ({detail})"
    if pods is None:
        return Readiness(False, head, reported)
    if not pods:
        return Readiness(False, f"{head}: no pods created yet", reported)
    ready, story = _pods_story(pods)
    summary = f"{head}: {ready}/{len(pods)} pods ready"
    return Readiness(
        False,
        f"{summary}; {story}" if story else summary,
        reported,
        most_restarts(pods),
        backing_off(pods),
        pull_failure(pods),
    )
