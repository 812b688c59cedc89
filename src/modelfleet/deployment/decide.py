"""The rollout decisions: given the deployment's state and the time, what to do next.

``next_action`` works through the pass in progress (``DeploymentState.ops``) and returns the
state with that step taken plus one action for the workflow to carry out. This module drives
the pass: when to rest and wake (the quiet resync's back-off), which finished replicas to
forget, what a teardown still needs (signal, wait, release), starting a placed replica, and
awaiting a replacement until it has proven itself (or retrying it elsewhere when its cluster
blocked it). What it delegates: which replica to roll and how (``roll``), a canary's steps
(``analysis``), and what counts as failed and the rollback (``failures``).

May import: ``api``, the ``contracts`` models, the other ``deployment`` decision modules, the
standard library. Pure: no I/O, no clock (the time is an argument), no Temporal; the input is
never mutated (``next_action`` and ``woke`` work on a copy).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from modelfleet.contracts.status import ReplicaPhase, ReplicaStatus, ReplicaStep
from modelfleet.deployment.actions import (
    Action,
    CheckErrors,
    CheckPlacement,
    EndPass,
    Finish,
    Forget,
    Place,
    Rest,
    SignalTeardown,
    StartReplica,
    Wait,
)
from modelfleet.deployment.analysis import analyse, analysis_over
from modelfleet.deployment.failures import (
    after_ready,
    avoid,
    avoid_after_failure,
    blocked_by_cluster,
    error_verdict,
    fail_replacement,
    failed_replacement,
    judges_errors,
)
from modelfleet.deployment.roll import (
    borrows,
    dry_place,
    needs_gate,
    proven,
    return_home,
    roll_next,
)
from modelfleet.deployment.state import (
    Analyse,
    AwaitReady,
    CheckCurrent,
    DeploymentState,
    PlaceFor,
    Reap,
    ReturnHome,
    Roll,
    Stage,
    Start,
    TearDown,
    effective_spec,
    note,
    template_hash,
)
from modelfleet.deployment.state import DryPlace as DryPlaceOp

RESYNC_INTERVAL = timedelta(seconds=60)
# A settled deployment (every replica placed, the Fleet's answer still current) rests longer
# after each quiet resync, up to this: what changes under it is signalled (scale, apply, a
# replica's Ready/Degraded/Failed/Done, the Fleet's nudge when a cluster stays NotReady), so
# the resync is only the net under those. At 60 s every deployment cost the Fleet a query a
# minute: 1.7 activities/s and 18 events/s for 100 idle deployments.
LONGEST_QUIET_RESYNC = timedelta(seconds=300)
# A replacement blocked by its cluster (``blocked_by_cluster``) is placed again elsewhere this
# many times; past that the change rolls back as any failed replacement does.
MAX_CLUSTER_RETRIES = 2
NO_OTHER_CLUSTER = "replacement blocked by its cluster and no other cluster has room"
_FINISHED = (ReplicaPhase.FAILED, ReplicaPhase.TERMINATED)


def resync_interval(quiet_resyncs: int) -> timedelta:
    """How long a deployment rests after ``quiet_resyncs`` quiet resyncs in a row."""
    doubled: timedelta = RESYNC_INTERVAL * (2 ** min(quiet_resyncs, 8))
    return min(doubled, LONGEST_QUIET_RESYNC)


def next_action(state: DeploymentState, now: datetime) -> tuple[DeploymentState, Action]:
    """The state with the next step taken, and what the workflow must do for it.

    The caller carries the action out (and reports its outcome through ``events``) before it
    asks again: the returned state already counts the action as under way."""
    s = state.model_copy(deep=True)
    while True:
        _note_summary(s, now)
        if s.stage is Stage.REST:
            if not s.deleting:
                return s, Rest(timeout=resync_interval(s.quiet_resyncs))
            _begin_delete(s)
        if not s.ops:
            if s.stage is Stage.DELETE:
                return s, Finish()
            s.stage = Stage.REST
            if not s.dirty:  # no change arrived during the pass: its verdict is current
                s.observed = s.generation
            return s, EndPass()
        action = _step(s, now)
        if action is not None:
            return s, action


def _note_summary(s: DeploymentState, now: datetime) -> None:
    """Log a new verdict (cannot place, blocked, held back, paused) once, not every pass."""
    if s.summary != s.noted:
        if s.summary:
            note(s, now, s.summary)
        s.noted = s.summary


def rest_over(state: DeploymentState) -> bool:
    """Whether a resting workflow should wake: something changed or it is being deleted."""
    return state.dirty or state.deleting


def woke(state: DeploymentState, now: datetime) -> DeploymentState:
    """Start a pass (or the teardown of everything) after a rest, whether a change or the
    periodic resync ended it.

    A change never removes a serving replica before its replacement is Ready (issue 16), so a
    pass that would roll serving replicas to a template not yet checked starts with its dry
    placement (nothing reserved; a template that fits nowhere is held back). A periodic resync
    that finds the deployment settled first asks the Fleet (a query) whether its last placement
    is still current and sends no placement Update if it is (issue 11); each such quiet resync
    doubles the next rest (``resync_interval``)."""
    s = state.model_copy(deep=True)
    if s.deleting:
        _begin_delete(s)
        return s
    quiet = not s.dirty  # the periodic resync, not a change, ended the rest
    s.dirty = False
    s.avoid = {c: until for c, until in s.avoid.items() if until > now}
    s.avoid_reasons = {c: r for c, r in s.avoid_reasons.items() if c in s.avoid}
    s.stage = Stage.PASS
    s.ops = [Reap(), PlaceFor(purpose="reconcile", guard=True), Roll()]
    if needs_gate(s):
        s.ops.insert(1, DryPlaceOp(purpose="gate"))
    elif quiet and _settled(s):
        s.ops.insert(1, CheckCurrent(version=s.fleet_version))
        return s  # ``placement_checked`` counts the quiet resyncs
    s.quiet_resyncs = 0
    return s


def _settled(s: DeploymentState) -> bool:
    """Nothing here asks for a placement: an earlier reconcile was answered, every desired
    replica is placed and none has finished (a finished one is reaped and replaced)."""
    return (
        s.fleet_version > 0
        and len(s.replicas) == s.spec.spec.replicas
        and all(r.step is not ReplicaStep.DONE for r in s.replicas.values())
    )


def wait_over(state: DeploymentState, wait: Wait) -> bool:
    """Whether ``wait`` is over without its deadline: ``proven`` also ends at its deadline
    (the workflow's timer), after which ``next_action`` decides with the new time."""
    if wait.until == "window":
        return analysis_over(state)
    status = state.replicas.get(wait.name)
    if status is None:
        return True
    if wait.until != "done" and not state.ops:
        # ``rollout abort`` ended the pass (the replica's fate is the next pass's).
        return True
    if wait.until == "done":
        return status.step is ReplicaStep.DONE
    if state.deleting or failed_replacement(state) is not None:
        return True
    if wait.until == "proven":
        return status.phase is not ReplicaPhase.READY
    # Degraded and Unknown are a replica that was Ready and left it (maybe within one task).
    return status.phase in (
        ReplicaPhase.READY,
        ReplicaPhase.FAILED,
        ReplicaPhase.DEGRADED,
        ReplicaPhase.UNKNOWN,
    )


def _begin_delete(s: DeploymentState) -> None:
    s.stage = Stage.DELETE
    s.ops = [TearDown(name=n, reason="deployment deleted") for n in sorted(s.replicas)]


def _step(s: DeploymentState, now: datetime) -> Action | None:
    """Take the first op one step; ``None`` when it only rewrote the ops (decide again)."""
    op = s.ops[0]
    if isinstance(op, Reap):
        return _reap(s, op, now)
    if isinstance(op, PlaceFor):
        s.sequence += 1
        desired = len(s.replicas) + 1 if op.purpose in ("surge", "return") else s.spec.spec.replicas
        return Place(desired=desired, sequence=s.sequence, borrow=op.borrow)
    if isinstance(op, CheckCurrent):
        return CheckPlacement(version=op.version)
    if isinstance(op, DryPlaceOp):
        return dry_place(s, op, now)
    if isinstance(op, TearDown):
        return _teardown(s, op, now)
    if isinstance(op, Start):
        s.ops.pop(0)
        return _start(s, op, now)
    if isinstance(op, AwaitReady):
        return _await_ready(s, op, now)
    if isinstance(op, ReturnHome):
        return_home(s, op)
        return None
    if isinstance(op, Analyse):
        return analyse(s, op, now)
    roll_next(s, op, now)
    return None


def _reap(s: DeploymentState, op: Reap, now: datetime) -> Action | None:
    """Forget the next replica whose workflow ended by itself (failed and compensated, or
    terminated); a failure also keeps new replicas off its cluster for a while."""
    name = next(
        (n for n in sorted(s.replicas) if n > op.after and s.replicas[n].step is ReplicaStep.DONE),
        None,
    )
    if name is None:
        s.ops.pop(0)
        return None
    status = s.replicas[name]
    if status.phase is ReplicaPhase.FAILED:
        avoid_after_failure(s, name, status, now)
    op.after = name
    return Forget(name=name)


def _teardown(s: DeploymentState, op: TearDown, now: datetime) -> Action:
    status = s.replicas.get(op.name)
    if op.signalled:
        if status is not None and status.step is not ReplicaStep.DONE:
            return Wait(name=op.name, until="done")
    elif status is not None and status.phase not in _FINISHED:
        status.phase, status.step, status.reason = (
            ReplicaPhase.TERMINATING,
            ReplicaStep.TEARDOWN,
            op.reason,
        )
        op.signalled = True
        note(s, now, f"removing {op.name} on {status.cluster}: {op.reason}")
        return SignalTeardown(name=op.name)
    # Gone, finished, or done tearing down: only its capacity is left to release.
    if status is not None and status.phase is ReplicaPhase.FAILED:
        # Released before a reap would see it: its cluster is avoided as the reap's would be.
        avoid_after_failure(s, op.name, status, now)
    s.ops.pop(0)
    return Forget(name=op.name)


def _start(s: DeploymentState, op: Start, now: datetime) -> Action:
    replica = op.replica
    s.placed[replica.name] = replica
    s.replicas[replica.name] = ReplicaStatus(
        name=replica.name,
        cluster=replica.spec.cluster_name,
        index=replica.spec.index,
        phase=ReplicaPhase.PENDING,
        step=ReplicaStep.PLACED,
        template_hash=template_hash(effective_spec(s)),
        pools={e.name: e.members[0].node_pool_name for e in replica.spec.engines},
        updated=now,
        borrowed=op.borrowed,
    )
    if op.borrowed:
        note(s, now, f"surged {replica.name} on {replica.spec.cluster_name}: {op.borrowed}")
    else:
        note(s, now, f"placed {replica.name} on {replica.spec.cluster_name}")
    return StartReplica(
        replica=replica,
        progress_deadline_seconds=s.spec.spec.strategy.progress_deadline_seconds,
        crash_loop_restarts=s.spec.spec.strategy.crash_loop_restarts,
    )


def _await_ready(s: DeploymentState, op: AwaitReady, now: datetime) -> Action | None:
    """Wait for the new replica to become Ready, then to stay Ready for minReadySeconds (a
    durable timer); only then do the replicas it replaces go. Failing either way (or another
    replacement of the template crash-looping meanwhile) rolls back."""
    wait = Wait(name=op.name, until="settled")
    if not wait_over(s, wait):
        return wait
    status = s.replicas.get(op.name)
    crashed = failed_replacement(s)
    if crashed is not None and not s.deleting:
        failed = op.paused
        if crashed.name != op.name:
            failed = f"rollout paused: replica {crashed.name} of the new template failed"
        fail_replacement(s, f"{failed}: {after_ready(crashed, now)}")
        return None
    if (
        status is not None
        and blocked_by_cluster(status)
        and not s.deleting
        and op.retries < MAX_CLUSTER_RETRIES
    ):
        _retry_elsewhere(s, op, status, now)
        return None
    if status is None or status.phase is not ReplicaPhase.READY:
        # The old replicas keep serving; the deployment rolls back to its last good template.
        why = after_ready(status, now) if status is not None else "gone"
        fail_replacement(s, f"{op.paused}: {why}" if why else op.paused)
        return None
    min_ready = timedelta(seconds=s.spec.spec.strategy.min_ready_seconds)
    if not s.deleting and not proven(status, min_ready, now):
        assert status.ready_since is not None
        return Wait(name=op.name, until="proven", deadline=status.ready_since + min_ready)
    if not s.deleting and judges_errors(s) and not op.errors_checked:
        return CheckErrors(name=op.name, cluster=status.cluster)
    too_many = error_verdict(op, s.spec.spec.strategy.max_error_percent)
    if too_many and not s.deleting:
        fail_replacement(s, f"{op.paused}: {too_many}")
        return None
    s.ops.pop(0)
    for name in reversed(op.also_replace):
        s.ops.insert(0, TearDown(name=name, reason=f"replaced by {op.name}"))
    if op.then_replace:
        why = (
            f"back home: replaced by {op.name} on {status.cluster}"
            if op.home
            else "replaced by a newer replica (surge)"
        )
        s.ops.insert(0, TearDown(name=op.then_replace, reason=why))
    return None


def _retry_elsewhere(
    s: DeploymentState, op: AwaitReady, status: ReplicaStatus, now: datetime
) -> None:
    """The replacement ``op`` awaited was blocked by its cluster: avoid that cluster and place
    the replacement again (elsewhere) instead of rolling the change back. It is placed as a
    surge, one more than the replicas held: the failed one keeps its slot until it has cleaned
    up and is reaped, which on a cluster nobody reaches takes its cleanup timeout. A surge's
    old replica is replaced once the new one is Ready, as before; the retry of an in-place
    replacement (no old replica left) only fills the place."""
    avoid(s, op.name, status, now)
    note(
        s,
        now,
        f"{op.name} on {status.cluster} was blocked by its cluster ({status.reason}); "
        f"placing its replacement on another cluster",
    )
    s.ops.pop(0)
    roll = next((o for o in s.ops if isinstance(o, Roll)), None)
    unavailable = roll.max_unavailable if roll is not None else 0
    retry = PlaceFor(
        purpose="surge",
        old=op.then_replace,
        fallback=bool(op.then_replace) and unavailable > 0,
        guard=True,
        retries=op.retries + 1,
        borrow=borrows(s),
    )
    s.ops = [retry, *s.ops]
