"""The deployment's side of the rollout bound (issue 22, admission control), as pure functions
of its state: when a pass must wait for a rollout slot, what the RolloutSlots workflow's answer
means, and when the slot is given back.

A pass with something to start (a new replica, a replacement, a roll) waits for a slot; the
slot is held while the pass runs and while any replica it started is still starting, then given
back. A deployment waits in the
``Waiting`` phase with a condition saying how many rollouts are ahead of it.

May import: the ``contracts`` models, ``admission.state``, ``deployment.state``, the standard
library. Pure: no I/O, no clock, no Temporal; the input is never mutated.
"""

from __future__ import annotations

from datetime import datetime

from modelfleet.admission.state import SlotNotice
from modelfleet.contracts.status import ReplicaPhase, ReplicaStep
from modelfleet.deployment.state import (
    CheckCurrent,
    DeploymentState,
    Stage,
    effective_spec,
    note,
    template_hash,
)

NONE, WAITING, HELD = "", "waiting", "held"
# A replica in these phases (and not done) is still rolling out: its slot is kept.
_STARTING = (ReplicaPhase.PENDING, ReplicaPhase.PROGRESSING)
# Not counted as running: replaced by the pass.
_GONE = (ReplicaPhase.FAILED, ReplicaPhase.TERMINATING, ReplicaPhase.TERMINATED)


def wants_slot(state: DeploymentState) -> bool:
    """Whether the pass just begun must wait for a slot before it goes on: it has something
    to start (fewer live replicas than wanted, a failed one to replace, one of another template
    to roll). A scale-down, a change held by a pause and a quiet resync (a query whether the
    placement is current) go on at once."""
    if state.deleting or state.stage is not Stage.PASS or state.slot == HELD:
        return False
    if any(isinstance(op, CheckCurrent) for op in state.ops):
        return False
    current = template_hash(effective_spec(state))
    live = [r for r in state.replicas.values() if r.phase not in _GONE]
    return len(live) < state.spec.spec.replicas or any(r.template_hash != current for r in live)


def release_due(state: DeploymentState) -> bool:
    """Whether the slot held is to be given back: deleted, or the pass ended and nothing it
    started is still starting."""
    if state.slot != HELD:
        return False
    if state.deleting:
        return True
    return state.stage is Stage.REST and not any(
        r.phase in _STARTING and r.step is not ReplicaStep.DONE for r in state.replicas.values()
    )


def asked(state: DeploymentState) -> DeploymentState:
    """The request is on its way: waiting until answered (-1: not told how many are ahead).
    Logged only once queued (``answered``): most requests are granted at once."""
    return state.model_copy(update={"slot": WAITING, "slot_ahead": -1})


def answered(state: DeploymentState, notice: SlotNotice, now: datetime) -> DeploymentState:
    """The RolloutSlots workflow's notice. A grant nobody waits for is kept as held, so the
    next check gives it back (``release_due``)."""
    if notice.granted:
        if state.slot == HELD:
            return state  # a liveness ping
        s = state.model_copy(update={"slot": HELD, "slot_ahead": 0})
        if state.slot == WAITING and state.slot_ahead >= 0:
            note(s, now, "rollout slot granted")
        return s
    if state.slot != WAITING:
        return state
    s = state.model_copy(update={"slot_ahead": notice.ahead})
    if state.slot_ahead < 0:
        note(s, now, waiting_message(s))
    return s


def unbounded(state: DeploymentState) -> DeploymentState:
    """No slot can be had (no RolloutSlots workflow runs): roll out without one rather than
    wait for ever. Not logged: a fleet without that workflow would log it every pass."""
    return state.model_copy(update={"slot": NONE, "slot_ahead": 0})


def given_back(state: DeploymentState) -> DeploymentState:
    return state.model_copy(update={"slot": NONE, "slot_ahead": 0})


def waiting_message(state: DeploymentState) -> str:
    """The condition's message while waiting ("" when not waiting)."""
    if state.slot != WAITING:
        return ""
    if state.slot_ahead < 0:
        return "waiting for a rollout slot"
    ahead = state.slot_ahead
    return f"waiting for a rollout slot: {ahead} rollout{'' if ahead == 1 else 's'} ahead"
