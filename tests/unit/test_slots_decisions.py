"""Admission control (issue 22): the RolloutSlots workflow's decisions (who holds a slot, who
waits, in which order, how a lost slot comes back) and the deployment's side (when a pass waits,
what the answer means, when the slot is given back, what ``get`` and ``describe`` show)."""

from __future__ import annotations

from datetime import timedelta

from rollout_builders import T0, spec, state_with, status

from modelfleet.admission import state as slots
from modelfleet.admission.state import SlotNotice, SlotSettings, SlotsState
from modelfleet.contracts.status import ReplicaPhase, ReplicaStep
from modelfleet.deployment import decisions as rollout
from modelfleet.deployment import slots as dslots
from modelfleet.deployment.decisions import DeploymentState, Stage

MD = spec(1)


def gate(n: int = 2, lease: int = 600) -> SlotsState:
    return SlotsState(settings=SlotSettings(slots=n, lease_seconds=lease))


def told(s: SlotsState) -> dict[str, SlotNotice]:
    return {o.to: o.notice for o in slots.taken(s, 1000)}


# --- the RolloutSlots workflow -------------------------------------------------------------


def test_at_most_the_bound_hold_slots_and_the_rest_queue_in_order() -> None:
    s = gate(2)
    for who in "abcde":
        slots.requested(s, who, T0)
    assert sorted(s.holders) == ["a", "b"]
    assert list(s.queue) == ["c", "d", "e"]
    notices = told(s)
    assert notices["a"] == notices["b"] == SlotNotice(granted=True)
    assert [notices[w].ahead for w in "cde"] == [0, 1, 2]
    assert not any(notices[w].granted for w in "cde")


def test_a_release_grants_the_head_of_the_queue() -> None:
    s = gate(1)
    for who in "abc":
        slots.requested(s, who, T0)
    told(s)
    slots.released(s, "a", T0)
    assert list(s.holders) == ["b"]
    assert list(s.queue) == ["c"]
    assert told(s) == {"b": SlotNotice(granted=True)}


def test_asking_again_is_answered_again_never_counted_twice() -> None:
    s = gate(1)
    for who in ("a", "b", "a", "b"):
        slots.requested(s, who, T0)
    assert list(s.holders) == ["a"]
    assert list(s.queue) == ["b"]
    assert told(s) == {"a": SlotNotice(granted=True), "b": SlotNotice(granted=False, ahead=0)}


def test_a_waiter_that_stops_waiting_leaves_the_queue() -> None:
    s = gate(1)
    for who in "abc":
        slots.requested(s, who, T0)
    slots.released(s, "b", T0)
    assert list(s.queue) == ["c"]
    slots.released(s, "a", T0)
    assert list(s.holders) == ["c"]


def test_an_undeliverable_notice_gives_the_slot_to_the_next() -> None:
    s = gate(1)
    slots.requested(s, "gone", T0)
    slots.requested(s, "b", T0)
    told(s)
    slots.undeliverable(s, "gone", T0)
    assert list(s.holders) == ["b"]
    assert not s.queue


def test_a_slot_held_past_its_lease_goes_to_the_next() -> None:
    s = gate(1, lease=600)
    slots.requested(s, "stuck", T0)
    slots.requested(s, "b", T0)
    told(s)
    slots.expired(s, T0 + timedelta(seconds=599))
    assert list(s.holders) == ["stuck"]
    slots.expired(s, T0 + timedelta(seconds=600))
    assert list(s.holders) == ["b"]
    assert s.expired_total == 1


def test_while_some_wait_holders_are_pinged_once_a_minute() -> None:
    s = gate(1)
    slots.requested(s, "a", T0)
    slots.requested(s, "b", T0)
    told(s)
    assert slots.next_due(s, T0) == slots.PING_AFTER
    slots.expired(s, T0 + timedelta(seconds=30))
    assert not s.outbox
    slots.expired(s, T0 + timedelta(seconds=60))
    assert told(s) == {"a": SlotNotice(granted=True)}
    slots.expired(s, T0 + timedelta(seconds=61))
    assert not s.outbox  # not again until another minute has passed


def test_nobody_waiting_means_no_pings_and_nothing_held_means_no_timer() -> None:
    s = gate(2)
    assert slots.next_due(s, T0) is None
    slots.requested(s, "a", T0)
    told(s)
    slots.expired(s, T0 + timedelta(seconds=120))
    assert not s.outbox
    assert slots.next_due(s, T0) == timedelta(seconds=600)


def test_a_larger_bound_grants_at_once_a_smaller_lets_holders_finish() -> None:
    s = gate(1)
    for who in "abc":
        slots.requested(s, who, T0)
    slots.configured(s, SlotSettings(slots=3), T0)
    assert sorted(s.holders) == ["a", "b", "c"]
    slots.configured(s, SlotSettings(slots=1), T0)
    slots.requested(s, "d", T0)
    assert len(s.holders) == 3
    assert list(s.queue) == ["d"]
    for who in "ab":
        slots.released(s, who, T0)
    assert "d" in s.queue  # still one over the bound
    slots.released(s, "c", T0)
    assert list(s.holders) == ["d"]


def test_a_batch_tells_each_deployment_only_its_last_notice() -> None:
    s = gate(1)
    slots.requested(s, "a", T0)
    slots.requested(s, "b", T0)
    slots.released(s, "a", T0)
    assert told(s) == {"a": SlotNotice(granted=True), "b": SlotNotice(granted=True)}


# --- the deployment's side ----------------------------------------------------------------


def passing(state: DeploymentState) -> DeploymentState:
    return rollout.woke(state.model_copy(update={"dirty": True}), T0)


def test_a_pass_that_may_place_waits_for_a_slot_a_quiet_resync_does_not() -> None:
    new = state_with(MD)
    assert dslots.wants_slot(passing(new))
    settled = state_with(MD, status(MD, "a", "east"), dirty=False, fleet_version=3)
    quiet = rollout.woke(settled, T0)  # the periodic resync: only a "still current?" query
    assert quiet.stage is Stage.PASS
    assert not dslots.wants_slot(quiet)
    assert not dslots.wants_slot(passing(new).model_copy(update={"slot": dslots.HELD}))
    assert not dslots.wants_slot(rollout.woke(rollout.deleted(new), T0))


def test_only_a_pass_with_something_to_start_waits() -> None:
    two = spec(2)
    running = state_with(two, status(two, "a", "east"), status(two, "b", "west"), dirty=False)
    assert not dslots.wants_slot(passing(running))  # nothing to start
    assert not dslots.wants_slot(passing(rollout.scaled(running, 1)))  # a scale-down
    assert dslots.wants_slot(passing(rollout.scaled(running, 3)))  # a scale-up
    assert dslots.wants_slot(passing(rollout.applied(running, spec(2, image="vllm:2"))))
    failed = state_with(
        two,
        status(two, "a", "east"),
        status(two, "b", "west", ReplicaPhase.FAILED, ReplicaStep.DONE),
        dirty=False,
    )
    assert dslots.wants_slot(passing(failed))  # its replacement
    paused = rollout.paused(running, T0)
    assert not dslots.wants_slot(passing(rollout.applied(paused, spec(2, image="vllm:2"))))


def test_waiting_shows_in_the_phase_and_a_condition_with_how_many_are_ahead() -> None:
    s = dslots.asked(passing(state_with(MD)))
    report = rollout.report(s)
    assert report.phase == "Waiting"
    assert report.summary == "waiting for a rollout slot"
    s = dslots.answered(s, SlotNotice(granted=False, ahead=37), T0)
    report = rollout.report(s)
    assert report.phase == "Waiting"
    waiting = [c for c in report.conditions if c.reason == "WaitingForRolloutSlot"]
    assert [(c.type, c.status, c.message) for c in waiting] == [
        ("Progressing", "False", "waiting for a rollout slot: 37 rollouts ahead")
    ]
    assert s.log[-1].message == "waiting for a rollout slot: 37 rollouts ahead"
    s = dslots.answered(s, SlotNotice(granted=True), T0)
    assert s.slot == dslots.HELD
    assert s.log[-1].message == "rollout slot granted"
    assert rollout.report(s).phase != "Waiting"
    assert not any(c.reason == "WaitingForRolloutSlot" for c in rollout.report(s).conditions)


def test_a_pending_deployment_waiting_to_try_again_stays_pending() -> None:
    pending = state_with(
        MD,
        conditions=[
            {"type": "ReplicasScheduled", "status": "False", "reason": "NoFit", "message": "x"}
        ],
        summary="0/3 clusters fit",
    )
    assert rollout.report(pending).phase == "Pending"
    waiting = dslots.answered(dslots.asked(pending), SlotNotice(granted=False, ahead=4), T0)
    report = rollout.report(waiting)
    assert report.phase == "Pending"
    assert any(c.reason == "WaitingForRolloutSlot" for c in report.conditions)
    assert report.summary.startswith("waiting for a rollout slot: 4 rollouts ahead")


def test_a_slot_granted_at_once_is_not_logged() -> None:
    s = dslots.answered(dslots.asked(passing(state_with(MD))), SlotNotice(granted=True), T0)
    assert s.slot == dslots.HELD
    assert not s.log


def test_the_slot_is_kept_while_a_replica_starts_and_given_back_after() -> None:
    starting = state_with(
        MD,
        status(MD, "a", "east", ReplicaPhase.PROGRESSING, ReplicaStep.LEADER_READY),
        slot=dslots.HELD,
        stage=Stage.REST,
    )
    assert not dslots.release_due(starting)
    assert not dslots.release_due(starting.model_copy(update={"stage": Stage.PASS}))
    ready = state_with(MD, status(MD, "a", "east"), slot=dslots.HELD, stage=Stage.REST)
    assert dslots.release_due(ready)
    failed = state_with(
        MD,
        status(MD, "a", "east", ReplicaPhase.FAILED, ReplicaStep.DONE),
        slot=dslots.HELD,
        stage=Stage.REST,
    )
    assert dslots.release_due(failed)
    # Pending with the scheduler's reason (nothing placed): the slot goes back at rest.
    assert dslots.release_due(state_with(MD, slot=dslots.HELD, stage=Stage.REST))
    assert dslots.release_due(rollout.deleted(starting.model_copy(update={"stage": Stage.PASS})))
    assert not dslots.release_due(dslots.given_back(ready))


def test_a_grant_nobody_waits_for_is_given_back() -> None:
    resting = state_with(MD, status(MD, "a", "east"), stage=Stage.REST)
    s = dslots.answered(resting, SlotNotice(granted=True), T0)
    assert dslots.release_due(s)
    # A queued notice for a deployment that no longer waits changes nothing.
    assert dslots.answered(resting, SlotNotice(granted=False, ahead=3), T0) == resting


def test_without_a_slots_workflow_the_pass_goes_on_unbounded() -> None:
    s = dslots.unbounded(dslots.asked(passing(state_with(MD))))
    assert s.slot == dslots.NONE
    assert rollout.report(s).phase != "Waiting"
