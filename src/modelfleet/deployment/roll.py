"""How a roll replaces replicas: which outdated replica goes next (those not serving first),
surged (the new one first, the old drained once it is proven) or replaced in place
(unavailable-first, only while ``replicas - maxUnavailable`` replicas that passed health stay
serving), or the roll reported blocked; the dry placement that gates a roll to a template not
yet checked; borrowed replicas returning home once the roll is over.

Part of the ModelDeployment's decisions: ``decide`` runs these for the ``Roll``, ``DryPlace`` and
``ReturnHome`` ops and asks ``needs_gate`` when a pass starts; ``events`` words its summaries with
``blocked`` and ``replace_in_place``. Functions change the working copy of the state they are
handed.

May import: ``api``, the ``contracts`` models, ``deployment.state``, ``deployment.actions``,
``deployment.analysis`` (canary steps) and ``deployment.failures``, the standard library. Pure:
no I/O, no clock (the time is an argument), no Temporal.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from modelfleet.api.deployments import BorrowPolicy
from modelfleet.contracts.status import ReplicaPhase, ReplicaStatus
from modelfleet.deployment.actions import Action, DryPlace, Wait
from modelfleet.deployment.analysis import canary_step
from modelfleet.deployment.failures import (
    after_ready,
    ago,
    fail_replacement,
    failed_after_roll,
    failed_replacement,
)
from modelfleet.deployment.state import (
    DeploymentState,
    Op,
    PlaceFor,
    ReturnHome,
    Roll,
    TearDown,
    effective_spec,
    note,
    promote,
    template_hash,
)
from modelfleet.deployment.state import DryPlace as DryPlaceOp

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


def proving(state: DeploymentState, now: datetime, old: str) -> Wait | None:
    """The wait for the first Ready replica other than ``old`` still within its
    minReadySeconds, if any."""
    min_ready = timedelta(seconds=state.spec.spec.strategy.min_ready_seconds)
    for name, r in sorted(state.replicas.items()):
        if name != old and r.phase is ReplicaPhase.READY and not proven(r, min_ready, now):
            assert r.ready_since is not None
            return Wait(name=name, until="proven", deadline=r.ready_since + min_ready)
    return None


def dry_place(s: DeploymentState, op: DryPlaceOp, now: datetime) -> Action | None:
    """The dry placement a ``DryPlace`` op asks for: the whole new template (the gate of a
    roll), or the replacement of ``op.old`` in place, which waits first while that would take
    serving capacity below ``replicas - maxUnavailable``; ``None`` when the pass ended."""
    if op.purpose == "gate":
        return DryPlace(desired=max(s.spec.spec.replicas, 1), without=sorted(s.replicas))
    if not in_place_allowed(s, op.old, now):
        wait = proving(s, now, op.old)
        if wait is not None:
            # Capacity that is Ready but not yet proven: decide again once it is.
            return wait
        s.summary = (
            f"{WAITING_FOR_HEALTH}: replacing {op.old} in place would leave fewer than "
            f"replicas - maxUnavailable serving (counted by replicas that pass health)"
        )
        s.ops.clear()
        return None
    return DryPlace(desired=len(s.replicas), without=[op.old])


def needs_gate(s: DeploymentState) -> bool:
    target = template_hash(s.spec)
    # Paused: no roll starts, so nothing to check. No last good template: nothing to fall back
    # on. The last good one: it is proven to run.
    if s.paused or s.last_good is None or target in (s.held, s.checked, template_hash(s.last_good)):
        return False
    return any(
        r.phase is ReplicaPhase.READY and r.template_hash != target for r in s.replicas.values()
    )


def roll_next(s: DeploymentState, op: Roll, now: datetime) -> None:
    """Choose the next replica to replace and how: one that is not serving is replaced in
    place; a serving one is surged when the strategy allows and the fleet has room, else
    replaced in place within maxUnavailable, else the rollout is blocked."""
    current = template_hash(effective_spec(s))
    if not op.target and needs_gate(s):
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
        fail_replacement(
            s,
            f"rollout paused: replica {crashed.name} of the new template failed: "
            f"{after_ready(crashed, now)}",
        )
        return
    late = failed_after_roll(s, now)
    if late is not None and s.previous_good is not None and s.rolled_out_at is not None:
        since = s.rolled_out_at
        s.last_good, s.previous_good, s.rolled_out_at = s.previous_good, None, None
        fail_replacement(
            s,
            f"replica {late.name} of the template rolled out {ago(since, now)} ago failed "
            f"within its rollback window: {after_ready(late, now)}",
        )
        return
    step = canary_step(s, op, now)
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


def borrows(s: DeploymentState) -> bool:
    """Whether a surge of this deployment may borrow a cluster outside home."""
    return s.spec.spec.strategy.borrow is BorrowPolicy.FLEET


def return_home(s: DeploymentState, op: ReturnHome) -> None:
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
