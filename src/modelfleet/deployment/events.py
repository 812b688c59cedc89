"""How the deployment's state changes when something happens: the user's apply, scale and
delete, a replica's progress, the Fleet's answer to a placement, a released replica, and the
state carried across continue-as-new.

Pure: each function returns a new state and never mutates its input.
"""

from __future__ import annotations

from datetime import datetime

from modelfleet.api.deployments import ModelDeployment
from modelfleet.contracts.canary_payloads import FiguresReading
from modelfleet.contracts.fleet_payloads import (
    DryPlaceRequest,
    PlaceRequest,
    PlaceResponse,
    ReplicaRemoval,
)
from modelfleet.contracts.status import ReplicaPhase, ReplicaProgress, ReplicaStep
from modelfleet.deployment.actions import DryPlace, Place
from modelfleet.deployment.analysis import canary_rolling
from modelfleet.deployment.decide import NO_OTHER_CLUSTER
from modelfleet.deployment.failures import fail_replacement, failed_after_roll
from modelfleet.deployment.roll import WAITING_FOR_HEALTH, blocked, replace_in_place
from modelfleet.deployment.state import (
    Analyse,
    AwaitReady,
    CheckCurrent,
    DeploymentState,
    Op,
    PlaceFor,
    Stage,
    Start,
    TearDown,
    change_cause,
    effective_spec,
    note,
    promote,
    record_revision,
    retire,
    still_retired,
    template_hash,
)
from modelfleet.deployment.state import DryPlace as DryPlaceOp
from modelfleet.scheduling.standing import Standing


def started(state: DeploymentState, at: datetime) -> DeploymentState:
    """A run begins at ``at``: the first run records the creation time and revision 1; a run
    continued as new carries both."""
    if state.created is not None and state.revisions:
        return state
    s = state.model_copy(deep=True)
    if s.created is None:
        s.created = at
    if not s.revisions:
        record_revision(s, at, "created")
    return s


def applied(
    state: DeploymentState, spec: ModelDeployment, at: datetime | None = None
) -> DeploymentState:
    """A new spec (already validated); the same spec again changes nothing. A new revision's
    cause is the spec's change-cause annotation (``undo (to revision N)``, ``restart``), else
    ``apply``.

    A deployment that has Ready replicas of the template it runs but no ``last_good`` yet (they
    ran a template pinned by a pause) remembers what it runs as last good before taking the new
    one."""
    if spec.to_wire() == state.spec.to_wire():
        return state
    update: dict[str, object] = {"spec": spec, "generation": state.generation + 1, "dirty": True}
    running = template_hash(effective_spec(state))
    if state.last_good is None and any(
        r.phase is ReplicaPhase.READY and r.template_hash == running
        for r in state.replicas.values()
    ):
        update["last_good"] = effective_spec(state)
    s = state.model_copy(update=update)
    record_revision(s, at, change_cause(spec))
    return s


def scaled(
    state: DeploymentState, replicas: int, at: datetime | None = None, cause: str = "scale"
) -> DeploymentState:
    if replicas == state.spec.spec.replicas:
        return state
    spec = state.spec.model_copy(deep=True)
    spec.spec.replicas = replicas
    s = state.model_copy(update={"spec": spec, "generation": state.generation + 1, "dirty": True})
    record_revision(s, at, cause)
    return s


def paused(state: DeploymentState, at: datetime) -> DeploymentState:
    """``rollout pause``: no new roll starts and new replicas keep the template in effect now;
    a replacement under way finishes. Pausing a paused deployment changes nothing."""
    if state.paused:
        return state
    s = state.model_copy(deep=True)
    s.paused, s.pinned = True, effective_spec(state).model_copy(deep=True)
    note(s, at, "rollout paused")
    return s


def resumed(state: DeploymentState, at: datetime) -> DeploymentState:
    """``rollout resume``: the next pass rolls to the spec's template."""
    if not state.paused:
        return state
    s = state.model_copy(deep=True)
    s.paused, s.pinned, s.dirty = False, None, True
    note(s, at, "rollout resumed")
    return s


def deleted(state: DeploymentState) -> DeploymentState:
    return state.model_copy(update={"deleting": True})


def resync(state: DeploymentState) -> DeploymentState:
    return state.model_copy(update={"dirty": True})


def errors_counted(
    state: DeploymentState,
    name: str,
    requests: int,
    errors: int,
    at: datetime | None = None,
    unread: str = "",
) -> DeploymentState:
    """What the proven replacement ``name``'s engines answered meanwhile (0 and 0 when they
    could not be read: ``unread`` says why); the next decision judges it
    (``failures.error_verdict``). The decision log keeps the figure."""
    s = state.model_copy(deep=True)
    for op in s.ops:
        if isinstance(op, AwaitReady) and op.name == name:
            op.errors_checked, op.answered, op.answered_5xx = True, requests, errors
    if at is not None:
        figure = unread or f"{errors} of {requests} requests answered 5xx"
        note(s, at, f"{name} proved itself for minReadySeconds: {figure}")
    return s


def figures_read(
    state: DeploymentState, reading: FiguresReading, at: datetime | None = None
) -> DeploymentState:
    """The pending canary analysis' reading: at the window's start its baseline, at its end
    the window's figures (judged by the next decision, ``canary.verdict``)."""
    s = state.model_copy(deep=True)
    op = s.ops[0] if s.ops else None
    if not isinstance(op, Analyse):
        return s  # ended meanwhile (aborted, promoted)
    if reading.errors and at is not None:
        unread = "; ".join(f"{n}: {why}" for n, why in sorted(reading.errors.items()))
        note(s, at, f"canary step {op.percent}%: engines not read: {unread}")
    if op.baseline is None:
        op.baseline = reading.counts
    else:
        op.figures = reading.figures
    return s


def canary_in_progress(state: DeploymentState) -> str:
    """Why ``rollout promote|abort`` has nothing to act on ("" when a canary roll is under
    way)."""
    ref = state.spec.ref
    if state.spec.spec.strategy.canary is None:
        return f"{ref} has no canary strategy (spec.strategy.canary)"
    current = template_hash(effective_spec(state))
    if state.canary is None or state.canary.target != current or not canary_rolling(state, current):
        return f"no canary in progress for {ref}: no roll to a new template is under way"
    if state.canary.promoted:
        return f"the canary of {ref} is already promoted"
    return ""


def promoted_canary(state: DeploymentState, at: datetime) -> DeploymentState:
    """``rollout promote``: the canary roll skips its remaining analyses and goes to 100%."""
    s = state.model_copy(deep=True)
    assert s.canary is not None
    s.canary.promoted, s.dirty = True, True
    note(s, at, "canary promoted by `rollout promote`: rolling to every replica")
    if s.summary.startswith("canary"):
        s.summary = ""
    return s


def aborted_canary(state: DeploymentState, at: datetime) -> DeploymentState:
    """``rollout abort``: the pass ends and the deployment rolls back to its last good
    template now."""
    s = state.model_copy(deep=True)
    assert s.canary is not None
    step = s.canary.passed
    note(s, at, "canary aborted by `rollout abort`")
    fail_replacement(s, f"canary aborted by `rollout abort` after {step} step(s) passed")
    return s


def progressed(state: DeploymentState, progress: ReplicaProgress) -> DeploymentState:
    """A replica reported; a replica that has finished makes the next pass reap it."""
    if progress.name not in state.replicas:
        return state
    s = state.model_copy(deep=True)
    status = s.replicas[progress.name]
    if progress.phase is ReplicaPhase.READY and status.phase is not ReplicaPhase.READY:
        status.ready_since = progress.at
    status.phase, status.step, status.reason = progress.phase, progress.step, progress.reason
    status.updated = progress.at
    status.restarts = progress.restarts
    status.infrastructure = progress.infrastructure
    if s.summary.startswith(WAITING_FOR_HEALTH) and progress.phase is ReplicaPhase.READY:
        # A roll waits for capacity that passes health: this may be it.
        s.dirty = True
    if (
        progress.phase is ReplicaPhase.READY
        and status.template_hash == template_hash(s.spec)
        and status.template_hash != s.held
        and not any(isinstance(op, AwaitReady | Analyse) for op in s.ops)
        and not (s.canary is not None and s.canary.target == status.template_hash)
    ):
        # A replica of the spec's template serves: that template is now the one to return to.
        # Not while a replacement proves itself: a roll makes its template the last good one
        # when it is over (``roll.roll_next``), so a crash loop during it can still roll back.
        promote(s, progress.at)
    if progress.at is not None and failed_after_roll(s, progress.at) is not None:
        # A slow crasher of the template that just rolled: the next pass rolls it back, now
        # rather than at the next periodic resync.
        s.dirty = True
    if progress.phase in (ReplicaPhase.FAILED, ReplicaPhase.TERMINATED) and (
        progress.step is ReplicaStep.DONE
    ):
        s.dirty = True
    return s


def place_request(
    state: DeploymentState, place: Place, request_id: str, now: datetime
) -> PlaceRequest:
    """The Fleet request for ``place``; clusters whose avoidance has expired are not sent.
    Replicas that do not serve the current template are ranked (``standing``), so what the
    placement removes is the least serving first."""
    avoid = avoided(state, now)
    return PlaceRequest(
        request_id=request_id,
        deployment=effective_spec(state),
        desired=place.desired,
        avoid_clusters=sorted(avoid),
        avoid_reasons={c: why for c, why in avoid.items() if why},
        retired=sorted(still_retired(state.retired, now)),
        standing=standing(state),
        borrow=place.borrow,
    )


def avoided(state: DeploymentState, now: datetime) -> dict[str, str]:
    """Clusters that get no new replica of this deployment now, and why: those avoided after a
    failure until their time is up, and those where a replica failed and is not reaped yet (a
    replacement decided before the reap, such as the scale-back after a rollback, must not go
    back to the cluster its predecessor just failed on)."""
    avoid = {c: state.avoid_reasons.get(c, "") for c, until in state.avoid.items() if until > now}
    for name, r in sorted(state.replicas.items()):
        if r.phase is ReplicaPhase.FAILED and r.cluster not in avoid:
            avoid[r.cluster] = f"replica {name} failed" + (f": {r.reason}" if r.reason else "")
    return {c: why for c, why in sorted(avoid.items())}


def standing(state: DeploymentState) -> dict[str, Standing]:
    """How each replica that does not serve the deployment's current template stands: failed,
    not Ready (pending, progressing, degraded, terminating), or Ready on an older template."""
    current = template_hash(effective_spec(state))
    out: dict[str, Standing] = {}
    for name, r in sorted(state.replicas.items()):
        if r.phase in (ReplicaPhase.FAILED, ReplicaPhase.TERMINATED):
            out[name] = Standing.FAILED
        elif r.phase is not ReplicaPhase.READY:
            out[name] = Standing.NOT_READY
        elif r.template_hash != current:
            out[name] = Standing.OLD_TEMPLATE
    return out


def dry_place_request(
    state: DeploymentState, dry: DryPlace, request_id: str, now: datetime
) -> DryPlaceRequest:
    """The Fleet request for a dry placement of the spec's template (never the held-back one:
    the point is to ask about the new template)."""
    avoid = avoided(state, now)
    return DryPlaceRequest(
        request_id=request_id,
        deployment=state.spec,
        desired=dry.desired,
        avoid_clusters=sorted(avoid),
        avoid_reasons={c: why for c, why in avoid.items() if why},
        without=dry.without,
        standing=standing(state),
    )


def dry_placed(state: DeploymentState, response: PlaceResponse) -> DeploymentState:
    """The Fleet answered the pending ``DryPlace``. Nothing placed: a gate holds the template
    back (the deployment keeps running its last good one), a replacement pauses the rollout
    with the old replica still serving. Either way the status says why, in the scheduler's
    words."""
    s = state.model_copy(deep=True)
    op = s.ops.pop(0)
    assert isinstance(op, DryPlaceOp), f"a dry placement answer while the next op is {op.op}"
    if response.placed:
        if op.purpose == "gate":
            s.checked = template_hash(s.spec)
        return s
    why = _why_not(response)
    s.rejections = response.rejections
    if op.purpose == "gate" and s.last_good is not None:
        s.held = template_hash(s.spec)
        s.held_reason = f"change blocked: the new template cannot be placed: {why}"
        s.summary = s.held_reason
        return s
    s.summary = f"rollout paused: no room for a replacement of {op.old}: {why}"
    s.ops.clear()
    return s


def _why_not(response: PlaceResponse) -> str:
    reasons = "; ".join(f"{c}: {r}" for c, r in sorted(response.rejections.items()))
    failed = [c.message for c in response.conditions if c.status == "False" and c.message]
    return reasons or "; ".join(failed) or response.summary or "no cluster can hold it"


def placed(state: DeploymentState, response: PlaceResponse) -> DeploymentState:
    """The Fleet answered the pending ``PlaceFor``: queue what its answer asks for."""
    s = state.model_copy(deep=True)
    before = (s.conditions, s.rejections)
    s.conditions = response.conditions
    s.rejections = response.rejections
    s.summary = response.summary
    for kept in response.kept:
        s.placed[kept.name] = kept
        status = s.replicas.get(kept.name)
        if status is not None:
            # The Fleet says which are outside home; the reason they were borrowed stays.
            why = response.borrowed.get(kept.name, "")
            status.borrowed = (status.borrowed or why) if why else ""
    op = s.ops.pop(0)
    assert isinstance(op, PlaceFor), f"a placement answer while the next op is {op.op}"
    if op.purpose == "reconcile":
        s.fleet_version = response.version
    head: list[Op]
    if op.purpose in ("surge", "return"):
        # Victims named in a surge answer wait for the next pass's reconcile placement.
        if response.placed:
            surged = response.placed[0].name
            going_home = op.purpose == "return"
            head = [
                Start(replica=response.placed[0], borrowed=response.borrowed.get(surged, "")),
                AwaitReady(
                    name=surged,
                    paused=f"returning {op.old} home paused: replica {surged} failed"
                    if going_home
                    else f"rollout paused: surge replica {surged} failed",
                    then_replace=op.old,
                    home=going_home,
                    retries=op.retries,
                ),
            ]
        elif op.purpose == "return":
            # Home is still full: the borrowed replica keeps serving where it is; a later
            # pass (a resync, a change) asks again.
            # The answer was about one replica more than the deployment asks for: the
            # deployment's own placement verdict stands.
            s.conditions, s.rejections = before
            status = s.replicas.get(op.old)
            where = status.cluster if status is not None else "its cluster"
            s.summary = (
                f"{op.old} stays on {where} (borrowed): no room at home: {_why_not(response)}"
            )
            s.ops = [*s.ops]
            return s
        elif op.fallback:
            head = replace_in_place(op.old)
        elif not op.old:
            # The retry of a replacement its cluster blocked (``decide._retry_elsewhere``),
            # with no other cluster to go to: nothing serving was removed for it; the next
            # pass places it again.
            s.summary = f"{NO_OTHER_CLUSTER}: {_why_not(response)}"
            s.ops.clear()
            return s
        else:
            s.summary = blocked(s)
            s.ops.clear()
            return s
    else:
        # Guarded: serving replicas of an older template that the placement evicts (the new
        # template no longer fits where they run) keep serving until the replacements placed
        # in this answer are Ready; other victims (scale-down, gone clusters) go at once.
        deferred = [v.replica.name for v in response.victims if op.guard and _serving_old(s, v)]
        head = [
            TearDown(name=v.replica.name, reason=v.reason)
            for v in response.victims
            if v.replica.name not in deferred
        ]
        head += [
            Start(replica=r, borrowed=response.borrowed.get(r.name, "")) for r in response.placed
        ]
        if op.purpose == "fill-await" or deferred:
            head += [
                AwaitReady(
                    name=r.name,
                    paused=f"rollout paused: replica {r.name} failed",
                    also_replace=deferred if i == len(response.placed) - 1 else [],
                    retries=op.retries,
                )
                for i, r in enumerate(response.placed)
            ]
    s.ops = [*head, *s.ops]
    return s


def _serving_old(s: DeploymentState, victim: ReplicaRemoval) -> bool:
    status = s.replicas.get(victim.replica.name)
    return (
        status is not None
        and status.phase is ReplicaPhase.READY
        and status.template_hash != template_hash(effective_spec(s))
    )


def placement_checked(state: DeploymentState, current: bool) -> DeploymentState:
    """The Fleet answered the pending ``CheckCurrent`` (``current`` False also when it could
    not be asked): a current placement needs no reconcile placement this pass."""
    s = state.model_copy(deep=True)
    op = s.ops.pop(0)
    assert isinstance(op, CheckCurrent), f"a placement check while the next op is {op.op}"
    if current and s.ops and isinstance(s.ops[0], PlaceFor) and s.ops[0].purpose == "reconcile":
        s.ops.pop(0)
    s.quiet_resyncs = s.quiet_resyncs + 1 if current else 0
    return s


def fleet_failed(state: DeploymentState, reason: str) -> DeploymentState:
    """The Fleet did not answer a placement (or a dry one) within its total timeout: the pass
    ends with nothing changed and says why; the next resync tries again."""
    s = state.model_copy(deep=True)
    s.summary = f"placement failed, retrying on the next resync: {reason}"
    s.ops.clear()
    return s


def forgotten(state: DeploymentState, name: str, now: datetime | None = None) -> DeploymentState:
    """The replica's capacity is released: it leaves the state. With ``now``, its name is
    retired: no replica placed within ``RETIRED_FOR`` gets it."""
    s = state.model_copy(deep=True)
    s.replicas.pop(name, None)
    s.placed.pop(name, None)
    if now is not None:
        s.retired = retire(s.retired, name, now)
    return s


def carried(state: DeploymentState) -> DeploymentState:
    """The input of the next run after continue-as-new: it starts with a reconcile pass."""
    return state.model_copy(update={"dirty": True, "stage": Stage.REST, "ops": []})
