"""When a rollout has failed, and how it rolls back: a replacement crash-looping after Ready, a
slow crasher within the rollback window, a replacement its cluster blocked, too many 5xx answers
while a replacement proved itself; keeping placements off a cluster a replica failed on; holding
the spec's template back so the deployment returns to its last good one.

Part of the ModelDeployment's decisions: ``decide`` (the pass), ``roll`` and ``analysis`` call
these when a step fails, ``events`` when a person aborts. The verdicts (``failed_replacement``,
``error_verdict``, ...) only read; ``fail_replacement``, ``avoid`` and their kin change the
working copy of the state they are handed (``decide.next_action`` made it).

May import: ``api``, the ``contracts`` models, ``deployment.state`` and ``deployment.actions``,
the standard library. Pure: no I/O, no clock (the time is an argument), no Temporal.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from modelfleet.contracts.status import ReplicaPhase, ReplicaStatus
from modelfleet.deployment.state import (
    AwaitReady,
    DeploymentState,
    effective_spec,
    note,
    rollback_window_end,
    template_hash,
)

AVOID_AFTER_FAILURE = timedelta(minutes=10)
# Fewer inference requests than this during a replacement's minReadySeconds say nothing about
# its error rate (one 5xx of three is no verdict): it passes.
ERROR_SAMPLE = 20


def crash_looping(status: ReplicaStatus) -> bool:
    """Its engines restart (or the kubelet backs off restarting them): a crash loop."""
    return status.restarts > 0 or "CrashLoopBackOff" in status.reason


def failed_replacement(state: DeploymentState) -> ReplicaStatus | None:
    """A replica of the template being rolled out that was Ready and now crash-loops, while
    there is a last good template to return to: the roll has failed."""
    if state.last_good is None:
        return None
    # The cheap test first: this runs as a wait condition after every event, and hashing a
    # template is a JSON dump and a SHA-256 of it.
    suspects = [
        r
        for _, r in sorted(state.replicas.items())
        if r.ready_since is not None and r.phase is ReplicaPhase.DEGRADED and crash_looping(r)
    ]
    if not suspects:
        return None
    current = template_hash(effective_spec(state))
    if current == template_hash(state.last_good):
        return None
    return next((r for r in suspects if r.template_hash == current), None)


def in_rollback_window(state: DeploymentState, now: datetime) -> bool:
    """A roll finished less than ``rollbackWindowSeconds`` ago and replaced a good template."""
    end = rollback_window_end(state)
    return end is not None and now < end


def failed_after_roll(state: DeploymentState, now: datetime) -> ReplicaStatus | None:
    """A replica of the template that last rolled out, crash-looping after it was Ready, within
    the roll's rollback window: a slow crasher (it outlived minReadySeconds), rolled back to
    the template before it as a crash loop during the roll is."""
    if not in_rollback_window(state, now) or state.last_good is None:
        return None
    assert state.previous_good is not None
    current = template_hash(effective_spec(state))
    if current != template_hash(state.last_good) or current == template_hash(state.previous_good):
        return None
    return next(
        (
            r
            for _, r in sorted(state.replicas.items())
            if r.ready_since is not None
            and r.phase is ReplicaPhase.DEGRADED
            and crash_looping(r)
            and r.template_hash == current
        ),
        None,
    )


def ago(since: datetime, now: datetime) -> str:
    return f"{max(0, int((now - since).total_seconds()))} s"


def after_ready(status: ReplicaStatus, now: datetime) -> str:
    """Why a replica failed, with the figures when it had been Ready: how long after Ready,
    and the restarts its engines showed."""
    if status.ready_since is None:
        return status.reason
    seconds = int(((status.updated or now) - status.ready_since).total_seconds())
    what = "crash-looping" if crash_looping(status) else f"{status.phase} again"
    restarts = f"{status.restarts} restart{'s' if status.restarts != 1 else ''}"
    return f"{what} {seconds} s after Ready ({restarts}): {status.reason or status.phase}"


def blocked_by_cluster(status: ReplicaStatus) -> bool:
    """A replacement that failed because its cluster could not be reached (a step hung or the
    API refused until the deadline), not because of what it runs."""
    return status.phase is ReplicaPhase.FAILED and status.infrastructure


def judges_errors(s: DeploymentState) -> bool:
    """A roll to a new template with somewhere to roll back to, and the check not turned off."""
    if s.spec.spec.strategy.max_error_percent >= 100 or s.last_good is None:
        return False
    return template_hash(effective_spec(s)) != template_hash(s.last_good)


def error_verdict(op: AwaitReady, max_percent: int) -> str:
    """Why a proven replacement fails on its engines' answers ("" when it does not): more than
    ``max_percent`` of at least ``ERROR_SAMPLE`` inference requests answered 5xx."""
    if not op.errors_checked or op.answered < ERROR_SAMPLE:
        return ""
    share = 100 * op.answered_5xx / op.answered
    if share <= max_percent:
        return ""
    return (
        f"its engines answered {op.answered_5xx} of {op.answered} requests with 5xx "
        f"({share:.0f}%, above maxErrorPercent {max_percent}%) while it proved itself"
    )


def avoid(s: DeploymentState, name: str, status: ReplicaStatus, now: datetime) -> None:
    """Keep placements off the cluster ``name`` failed on, for a while, saying why."""
    s.avoid[status.cluster] = now + AVOID_AFTER_FAILURE
    s.avoid_reasons[status.cluster] = f"replica {name} failed: {status.reason}"


def avoid_after_failure(
    s: DeploymentState, name: str, status: ReplicaStatus, now: datetime
) -> None:
    avoid(s, name, status, now)
    note(s, now, f"removed failed {name} on {status.cluster} (avoided for a while)")


def fail_replacement(s: DeploymentState, why: str) -> None:
    """A replacement failed (or ``rollout abort`` said so): the pass stops with the old
    replicas still serving and the deployment rolls back to its last good template."""
    s.summary = why
    s.ops.clear()
    _roll_back(s, why)


def _roll_back(s: DeploymentState, why: str) -> None:
    """Hold the spec's template back: the deployment returns to its last good template; the
    revision held back says so (``rollout history``)."""
    current = template_hash(effective_spec(s))
    if s.last_good is None or template_hash(s.last_good) == current:
        return
    s.canary = None
    s.held = template_hash(s.spec)
    s.held_reason = f"rolled back to the last good template: {why}"
    s.summary = s.held_reason
    s.dirty = True
    s.revisions = [
        r.model_copy(update={"outcome": f"rolled back: {why}"}) if r.template == s.held else r
        for r in s.revisions
    ]
