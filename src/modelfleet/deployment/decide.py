"""The rollout decisions: given the deployment's state and the time, what to do next.

``next_action`` works through the pass in progress (``DeploymentState.ops``) and returns the
state with that step taken plus one action for the workflow to carry out. It decides which
finished replicas to forget (and which clusters to avoid after a failure), which replica to
roll next, surge or replace in place (unavailable-first) or report the rollout blocked, when a
rollout pauses, and what a teardown still needs (signal, wait, release).

Pure: no I/O, no clock (the time is an argument), no Temporal; the input is never mutated.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from modelfleet.api.deployments import BorrowPolicy
from modelfleet.contracts.status import ReplicaPhase, ReplicaStatus, ReplicaStep
from modelfleet.deployment import canary
from modelfleet.deployment.actions import (
    Action,
    CheckErrors,
    CheckPlacement,
    DryPlace,
    EndPass,
    Finish,
    Forget,
    Place,
    ReadFigures,
    Rest,
    SignalTeardown,
    StartReplica,
    Wait,
)
from modelfleet.deployment.state import (
    Analyse,
    AwaitReady,
    CanaryProgress,
    CheckCurrent,
    DeploymentState,
    Op,
    PlaceFor,
    Reap,
    ReturnHome,
    Roll,
    Stage,
    Start,
    TearDown,
    effective_spec,
    note,
    promote,
    rollback_window_end,
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
AVOID_AFTER_FAILURE = timedelta(minutes=10)
# A replacement blocked by its cluster (``blocked_by_cluster``) is placed again elsewhere this
# many times; past that the change rolls back as any failed replacement does.
MAX_CLUSTER_RETRIES = 2
# Fewer inference requests than this during a replacement's minReadySeconds say nothing about
# its error rate (one 5xx of three is no verdict): it passes.
ERROR_SAMPLE = 20
NO_OTHER_CLUSTER = "replacement blocked by its cluster and no other cluster has room"
BLOCKED = "rollout blocked: no room to surge and maxUnavailable is 0"
# A deployment of one replica with maxUnavailable unset (``Strategy.unavailable``): not taken to
# zero; the roll surges when the fleet has room (the next resync, or a change, tries again).
WAITING_FOR_ROOM = (
    "rollout waiting for room to surge: a deployment of one replica is not replaced in place "
    "by default (it would serve nothing until its replacement is Ready); set "
    "strategy.maxUnavailable: 1 to allow it"
)
# The summary of a roll that would replace a serving replica in place while too few others
# pass health: it waits (a replica becoming Ready wakes it) instead of dropping below
# ``replicas - maxUnavailable``.
WAITING_FOR_HEALTH = "rollout waiting for healthy capacity"
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
    if _needs_gate(s):
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


def _needs_gate(s: DeploymentState) -> bool:
    target = template_hash(s.spec)
    # Paused: no roll starts, so nothing to check. No last good template: nothing to fall back
    # on. The last good one: it is proven to run.
    if s.paused or s.last_good is None or target in (s.held, s.checked, template_hash(s.last_good)):
        return False
    return any(
        r.phase is ReplicaPhase.READY and r.template_hash != target for r in s.replicas.values()
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


def analysis_over(state: DeploymentState) -> bool:
    """Whether a canary window should end before its timer: deleted, promoted, aborted (the
    pass ended), or one of its replicas left Ready (the analysis starts again, or the failed
    replacement rolls back)."""
    head = state.ops[0] if state.ops else None
    progress = state.canary
    if state.deleting or not isinstance(head, Analyse) or progress is None or progress.promoted:
        return True
    return any(
        n not in state.replicas or state.replicas[n].phase is not ReplicaPhase.READY
        for n in (*head.canary, *head.stable)
    )


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


def _ago(since: datetime, now: datetime) -> str:
    return f"{max(0, int((now - since).total_seconds()))} s"


def proven(status: ReplicaStatus, min_ready: timedelta, now: datetime) -> bool:
    """Ready for at least ``min_ready`` (one Ready before ``ready_since`` was kept counts)."""
    if status.phase is not ReplicaPhase.READY:
        return False
    return status.ready_since is None or now - status.ready_since >= min_ready


def in_place_allowed(state: DeploymentState, old: str, now: datetime) -> bool:
    """Whether replacing ``old`` in place keeps serving capacity at ``replicas -
    maxUnavailable`` or more, counted by replicas that pass health and have proven
    themselves (Ready for minReadySeconds), not by objects."""
    strategy = state.spec.spec.strategy
    min_ready = timedelta(seconds=strategy.min_ready_seconds)
    serving = [n for n, r in state.replicas.items() if n != old and proven(r, min_ready, now)]
    replicas = state.spec.spec.replicas
    return len(serving) >= replicas - strategy.unavailable(replicas)


def _proving(state: DeploymentState, now: datetime, old: str) -> Wait | None:
    """The wait for the first Ready replica other than ``old`` still within its
    minReadySeconds, if any."""
    min_ready = timedelta(seconds=state.spec.spec.strategy.min_ready_seconds)
    for name, r in sorted(state.replicas.items()):
        if name != old and r.phase is ReplicaPhase.READY and not proven(r, min_ready, now):
            assert r.ready_since is not None
            return Wait(name=name, until="proven", deadline=r.ready_since + min_ready)
    return None


def after_ready(status: ReplicaStatus, now: datetime) -> str:
    """Why a replica failed, with the figures when it had been Ready: how long after Ready,
    and the restarts its engines showed."""
    if status.ready_since is None:
        return status.reason
    seconds = int(((status.updated or now) - status.ready_since).total_seconds())
    what = "crash-looping" if crash_looping(status) else f"{status.phase} again"
    restarts = f"{status.restarts} restart{'s' if status.restarts != 1 else ''}"
    return f"{what} {seconds} s after Ready ({restarts}): {status.reason or status.phase}"


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
        if op.purpose == "gate":
            return DryPlace(desired=max(s.spec.spec.replicas, 1), without=sorted(s.replicas))
        if not in_place_allowed(s, op.old, now):
            proving = _proving(s, now, op.old)
            if proving is not None:
                # Capacity that is Ready but not yet proven: decide again once it is.
                return proving
            s.summary = (
                f"{WAITING_FOR_HEALTH}: replacing {op.old} in place would leave fewer than "
                f"replicas - maxUnavailable serving (counted by replicas that pass health)"
            )
            s.ops.clear()
            return None
        return DryPlace(desired=len(s.replicas), without=[op.old])
    if isinstance(op, TearDown):
        return _teardown(s, op, now)
    if isinstance(op, Start):
        s.ops.pop(0)
        return _start(s, op, now)
    if isinstance(op, AwaitReady):
        return _await_ready(s, op, now)
    if isinstance(op, ReturnHome):
        _return_home(s, op)
        return None
    if isinstance(op, Analyse):
        return _analyse(s, op, now)
    _roll(s, op, now)
    return None


def _return_home(s: DeploymentState, op: ReturnHome) -> None:
    """Surge a replacement at home for the next borrowed replica that serves the current
    template (new first, the borrowed one drains once it is proven, as in a roll: serving
    never drops); none left, or a pause or delete under way: the op is done."""
    current = template_hash(effective_spec(s))
    name = None
    if not (s.deleting or s.paused):
        name = next(
            (
                n
                for n, r in sorted(s.replicas.items())
                if r.borrowed
                and n not in op.tried
                and r.phase is ReplicaPhase.READY
                and r.template_hash == current
            ),
            None,
        )
    if name is None:
        s.ops.pop(0)
        return
    op.tried = [*op.tried, name]
    s.ops.insert(0, PlaceFor(purpose="return", old=name, guard=True))


def borrows(s: DeploymentState) -> bool:
    """Whether a surge of this deployment may borrow a cluster outside home."""
    return s.spec.spec.strategy.borrow is BorrowPolicy.FLEET


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
        _avoid_after_failure(s, name, status, now)
    op.after = name
    return Forget(name=name)


def _avoid(s: DeploymentState, name: str, status: ReplicaStatus, now: datetime) -> None:
    """Keep placements off the cluster ``name`` failed on, for a while, saying why."""
    s.avoid[status.cluster] = now + AVOID_AFTER_FAILURE
    s.avoid_reasons[status.cluster] = f"replica {name} failed: {status.reason}"


def _avoid_after_failure(
    s: DeploymentState, name: str, status: ReplicaStatus, now: datetime
) -> None:
    _avoid(s, name, status, now)
    note(s, now, f"removed failed {name} on {status.cluster} (avoided for a while)")


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
        _avoid_after_failure(s, op.name, status, now)
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
        _fail_replacement(s, f"{failed}: {after_ready(crashed, now)}")
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
        _fail_replacement(s, f"{op.paused}: {why}" if why else op.paused)
        return None
    min_ready = timedelta(seconds=s.spec.spec.strategy.min_ready_seconds)
    if not s.deleting and not proven(status, min_ready, now):
        assert status.ready_since is not None
        return Wait(name=op.name, until="proven", deadline=status.ready_since + min_ready)
    if not s.deleting and _judges_errors(s) and not op.errors_checked:
        return CheckErrors(name=op.name, cluster=status.cluster)
    too_many = error_verdict(op, s.spec.spec.strategy.max_error_percent)
    if too_many and not s.deleting:
        _fail_replacement(s, f"{op.paused}: {too_many}")
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


def _judges_errors(s: DeploymentState) -> bool:
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


def blocked_by_cluster(status: ReplicaStatus) -> bool:
    """A replacement that failed because its cluster could not be reached (a step hung or the
    API refused until the deadline), not because of what it runs."""
    return status.phase is ReplicaPhase.FAILED and status.infrastructure


def _retry_elsewhere(
    s: DeploymentState, op: AwaitReady, status: ReplicaStatus, now: datetime
) -> None:
    """The replacement ``op`` awaited was blocked by its cluster: avoid that cluster and place
    the replacement again (elsewhere) instead of rolling the change back. It is placed as a
    surge, one more than the replicas held: the failed one keeps its slot until it has cleaned
    up and is reaped, which on a cluster nobody reaches takes its cleanup timeout. A surge's
    old replica is replaced once the new one is Ready, as before; the retry of an in-place
    replacement (no old replica left) only fills the place."""
    _avoid(s, op.name, status, now)
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


def roll_back_now(s: DeploymentState, why: str) -> None:
    """End the pass and roll back to the last good template (in place: ``rollout abort``)."""
    _fail_replacement(s, why)


def _fail_replacement(s: DeploymentState, why: str) -> None:
    """A replacement failed: the pass stops with the old replicas still serving and the
    deployment rolls back to its last good template."""
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


def _roll(s: DeploymentState, op: Roll, now: datetime) -> None:
    """Choose the next replica to replace and how: one that is not serving is replaced in
    place; a serving one is surged when the strategy allows and the fleet has room, else
    replaced in place within maxUnavailable, else the rollout is blocked."""
    current = template_hash(effective_spec(s))
    if not op.target and _needs_gate(s):
        # Resumed (or otherwise freed to roll) after this pass began without the dry
        # placement of the new template: the next pass checks it first.
        s.dirty = True
        s.ops.pop(0)
        return
    if not op.target:
        strategy = s.spec.spec.strategy
        op.target = current
        op.max_surge = strategy.max_surge
        op.max_unavailable = strategy.unavailable(s.spec.spec.replicas)
    elif op.target != current:
        # The spec changed under this roll; it also marked the state dirty, so the next pass
        # rolls to the new template (comparing with the old one would replace every replica
        # it started again and again).
        s.ops.pop(0)
        return
    if s.deleting or s.paused:
        # Paused: what is under way finishes, no further replica is rolled (kubectl's pause).
        s.ops.pop(0)
        return
    crashed = failed_replacement(s)
    if crashed is not None:
        _fail_replacement(
            s,
            f"rollout paused: replica {crashed.name} of the new template failed: "
            f"{after_ready(crashed, now)}",
        )
        return
    late = failed_after_roll(s, now)
    if late is not None and s.previous_good is not None and s.rolled_out_at is not None:
        since = s.rolled_out_at
        s.last_good, s.previous_good, s.rolled_out_at = s.previous_good, None, None
        _fail_replacement(
            s,
            f"replica {late.name} of the template rolled out {_ago(since, now)} ago failed "
            f"within its rollback window: {after_ready(late, now)}",
        )
        return
    step = _canary_step(s, op, now)
    if step is not None:
        s.ops.insert(0, step)
        return
    old = _next_outdated(s.replicas.values(), op.target)
    if old is None:
        s.ops.pop(0)
        if s.canary is not None and s.canary.target == op.target:
            note(s, now, "canary: every replica runs the new template")
            s.canary = None
        # The roll is over: its template is the one a later change returns to (while it
        # rolled, a crash loop of its replicas could still roll it back).
        if (
            op.target == template_hash(s.spec)
            and op.target != s.held
            and any(
                r.phase is ReplicaPhase.READY and r.template_hash == op.target
                for r in s.replicas.values()
            )
        ):
            promote(s, now)
        if any(r.borrowed for r in s.replicas.values()):
            # Rolled (or nothing to roll): borrowed replicas go home where there is room.
            s.ops.insert(0, ReturnHome())
        return
    rest = s.ops[1:]
    head: list[Op]
    if old.phase is not ReplicaPhase.READY:
        # A replica that is not serving costs nothing to replace in place.
        head = [TearDown(name=old.name, reason="template changed"), PlaceFor(purpose="fill")]
    elif op.max_surge > 0:
        head = [
            PlaceFor(
                purpose="surge",
                old=old.name,
                fallback=op.max_unavailable > 0,
                guard=True,
                borrow=borrows(s),
            )
        ]
    elif op.max_unavailable > 0:
        head = replace_in_place(old.name)
    else:
        s.summary = blocked(s)
        s.ops.clear()
        return
    s.ops = [*head, op, *rest]


def blocked(s: DeploymentState) -> str:
    """Why a roll with no room to surge and no unavailability allowed does not go on."""
    strategy = s.spec.spec.strategy
    if strategy.max_unavailable is None and s.spec.spec.replicas == 1:
        return WAITING_FOR_ROOM
    return BLOCKED


def replace_in_place(name: str) -> list[Op]:
    """Unavailable-first: tear the replica down, then place and await its replacement; only
    after a dry placement of the replacement succeeded."""
    return [
        DryPlaceOp(purpose="replace", old=name),
        TearDown(name=name, reason="replaced (no room to surge)"),
        PlaceFor(purpose="fill-await", guard=True),
    ]


def _next_outdated(replicas: Iterable[ReplicaStatus], target: str) -> ReplicaStatus | None:
    """Replicas not serving go first (replacing them costs nothing), then by name."""
    outdated = sorted(
        (r for r in replicas if r.template_hash != target),
        key=lambda r: (r.phase is ReplicaPhase.READY, r.name),
    )
    return outdated[0] if outdated else None


# A window without enough requests to judge is extended this many times (the baseline kept, so
# the requests add up); then the roll waits for ``rollout promote`` or ``rollout abort`` (and
# analyses again at the next pass).
MAX_EXTENSIONS = 2
INCONCLUSIVE = "canary analysis inconclusive"


def canary_rolling(s: DeploymentState, target: str) -> bool:
    """A roll to ``target`` that goes in canary steps: the strategy has a canary, there is a
    last good template to return to, and ``target`` is the spec's new template (never the
    rollback to the last good one)."""
    return (
        s.spec.spec.strategy.canary is not None
        and s.last_good is not None
        and target == template_hash(s.spec)
        and target != s.held
        and target != template_hash(s.last_good)
    )


def _canary_step(s: DeploymentState, op: Roll, now: datetime) -> Analyse | None:
    """The analysis the roll must pass before it replaces another replica, if any: when as
    many replicas run the new template (Ready, proven) as the next step asks. A step of every
    replica needs none (there is nothing stable left to compare with, and nothing left to
    hold back)."""
    strategy = s.spec.spec.strategy.canary
    if strategy is None or not canary_rolling(s, op.target):
        return None
    if s.canary is None or s.canary.target != op.target:
        s.canary = CanaryProgress(target=op.target)
        note(s, now, f"canary: rolling in steps of {', '.join(f'{p}%' for p in strategy.steps)}")
    progress = s.canary
    if progress.promoted or progress.passed >= len(strategy.steps):
        return None
    replicas = s.spec.spec.replicas
    percent = strategy.steps[progress.passed]
    want = canary.step_replicas(replicas, percent)
    if want >= replicas:
        return None
    ready = sorted(
        (n for n, r in s.replicas.items() if r.phase is ReplicaPhase.READY),
    )
    new = [n for n in ready if s.replicas[n].template_hash == op.target]
    if len(new) < want:
        return None
    stable = [n for n in ready if n not in new]
    return Analyse(
        target=op.target,
        step=progress.passed,
        percent=percent,
        canary=new,
        stable=stable,
        clusters={n: s.replicas[n].cluster for n in (*new, *stable)},
    )


def _analyse(s: DeploymentState, op: Analyse, now: datetime) -> Action | None:
    """Read the baseline, wait out the window, read again, judge: pass goes to the next step,
    fail rolls back with the figures, too few requests extends the window (then waits for a
    person)."""
    strategy = s.spec.spec.strategy.canary
    progress = s.canary
    if (
        strategy is None
        or progress is None
        or progress.promoted
        or progress.target != op.target
        or s.deleting
        or s.paused
        or template_hash(effective_spec(s)) != op.target
        or analysis_over(s)
    ):
        # Promoted, changed, or a replica left Ready: the roll decides again (a failed
        # replacement rolls back there; otherwise the step is analysed afresh).
        s.ops.pop(0)
        return None
    analysis = strategy.analysis
    namespace = s.spec.namespace
    if op.baseline is None or op.until is None:
        if op.baseline is None:
            return ReadFigures(namespace=namespace, replicas=op.clusters)
        op.until = now + timedelta(seconds=analysis.window_seconds)
        s.summary = (
            f"canary at {op.percent}% ({len(op.canary)} of {s.spec.spec.replicas} replicas on "
            f"the new template): analysing for {analysis.window_seconds} s"
        )
        return None
    if op.figures is None:
        if now < op.until:
            return Wait(name=op.canary[0], until="window", deadline=op.until)
        return ReadFigures(
            namespace=namespace,
            replicas=op.clusters,
            baseline=op.baseline,
            canary=op.canary,
            stable=op.stable,
        )
    judged = canary.verdict(op.figures, analysis)
    figures = canary.figures_text(op.figures)
    where = f"canary step {op.percent}% ({len(op.canary)} of {s.spec.spec.replicas} replicas)"
    if judged.outcome == "pass":
        line = f"{where} passed: {figures}"
        note(s, now, line)
        _record_analysis(s, op.target, line)
        progress.passed = op.step + 1
        s.summary = ""
        s.ops.pop(0)
        return None
    if judged.outcome == "fail":
        line = f"{where} failed: {judged.reason} ({figures})"
        _record_analysis(s, op.target, line)
        _fail_replacement(s, line)
        return None
    if op.extended < MAX_EXTENSIONS:
        op.extended += 1
        op.until = now + timedelta(seconds=analysis.window_seconds)
        op.figures = None
        note(s, now, f"{where}: window extended ({op.extended}): {judged.reason}")
        return None
    line = f"{INCONCLUSIVE} at step {op.percent}%: {judged.reason} ({figures})"
    _record_analysis(s, op.target, line)
    s.summary = (
        f"{line}; the roll waits: `modelfleet rollout promote` goes on, `rollout abort` rolls "
        f"back (the next resync analyses again)"
    )
    s.ops.clear()
    return None


def _record_analysis(s: DeploymentState, target: str, line: str) -> None:
    """Keep an analysis' figures on the revision of ``target`` (``rollout history``)."""
    s.revisions = [
        r.model_copy(update={"analyses": [*r.analyses, line][-10:]}) if r.template == target else r
        for r in s.revisions
    ]
