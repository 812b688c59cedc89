"""Less rollout work per replica (issue 11): which replica reports the deployment must hear, the
status a user sees with the replicas' own reports laid over it, and a periodic resync that
asks the Fleet whether its placement is current instead of placing again."""

from __future__ import annotations

from rollout_builders import T0, spec, state_with, status

from modelfleet.contracts.fleet_payloads import PlaceResponse
from modelfleet.contracts.status import ReplicaPhase, ReplicaProgress, ReplicaStep
from modelfleet.deployment import decisions as rollout
from modelfleet.deployment.state import CheckCurrent, PlaceFor, Reap, Roll
from modelfleet.replica.progress import in_flight, parent_needs, with_progress

MD = spec(2)
P, R, F, D = (
    ReplicaPhase.PROGRESSING,
    ReplicaPhase.READY,
    ReplicaPhase.FAILED,
    ReplicaPhase.DEGRADED,
)


def report(phase: ReplicaPhase, step: ReplicaStep, reason: str = "") -> ReplicaProgress:
    return ReplicaProgress(name="a", phase=phase, step=step, reason=reason)


def test_only_ready_degraded_failed_and_done_are_signalled_once_each() -> None:
    told: ReplicaProgress | None = None
    sent = []
    for p in [
        report(P, ReplicaStep.NAMESPACE),
        report(P, ReplicaStep.WORKLOADS),
        report(P, ReplicaStep.ROUTING_READY),
        report(R, ReplicaStep.SERVING),
        report(R, ReplicaStep.SERVING),
        report(D, ReplicaStep.SERVING, "pod lost"),
        report(D, ReplicaStep.SERVING, "pod lost"),
        report(D, ReplicaStep.SERVING, "node gone"),
        report(ReplicaPhase.TERMINATING, ReplicaStep.TEARDOWN),
        report(ReplicaPhase.TERMINATED, ReplicaStep.DONE),
    ]:
        if parent_needs(p, told):
            sent.append((p.phase, p.reason))
            told = p
    assert sent == [
        (R, ""),
        (D, "pod lost"),
        (D, "node gone"),
        (ReplicaPhase.TERMINATED, ""),
    ]


def test_a_failure_is_told_when_it_begins_and_when_its_cleanup_is_done() -> None:
    first = report(F, ReplicaStep.COMPENSATING, "deadline")
    assert parent_needs(first, None)
    assert parent_needs(report(F, ReplicaStep.DONE, "deadline"), first)
    assert not parent_needs(report(F, ReplicaStep.COMPENSATING, "deadline"), first)


def test_the_status_shows_the_step_a_replica_reports_while_it_rolls_out() -> None:
    state = state_with(
        MD,
        status(MD, "a", "east", ReplicaPhase.PENDING, ReplicaStep.PLACED),
        status(MD, "b", "west"),
    )
    shown = rollout.report(state)
    assert in_flight(shown) == ["a"]
    queried = {
        "a": report(P, ReplicaStep.LEADER_READY),
        "b": ReplicaProgress(name="b", phase=D, step=ReplicaStep.SERVING, reason="x"),
        "zz": report(P, ReplicaStep.ROUTING),
    }
    merged = with_progress(shown, queried)
    a, b = merged.replicas
    assert (a.phase, a.step) == (P, ReplicaStep.LEADER_READY)
    # The deployment's own word stands for a replica it knows past its rollout.
    assert (b.phase, b.step) == (R, ReplicaStep.SERVING)
    assert [r.name for r in merged.replicas] == ["a", "b"]


def _resting_after_a_placement(version: int) -> rollout.DeploymentState:
    state = state_with(MD, status(MD, "a", "east"), status(MD, "b", "west"), dirty=True)
    state = rollout.woke(state, T0)
    state, _ = rollout.next_action(state, T0)  # Reap -> Place
    assert isinstance(state.ops[0], PlaceFor)
    state = rollout.placed(state, PlaceResponse(version=version))
    assert state.fleet_version == version
    state, action = rollout.next_action(state, T0)
    while not isinstance(action, rollout.Rest):
        state, action = rollout.next_action(state, T0)
    return state


def test_a_quiet_resync_checks_first_and_skips_the_placement_when_current() -> None:
    state = rollout.woke(_resting_after_a_placement(7), T0)
    assert [type(op) for op in state.ops] == [Reap, CheckCurrent, PlaceFor, Roll]
    state, action = rollout.next_action(state, T0)
    assert action == rollout.CheckPlacement(version=7)
    skipped = rollout.placement_checked(state, True)
    assert [type(op) for op in skipped.ops] == [Roll]
    _, action = rollout.next_action(skipped, T0)
    assert isinstance(action, rollout.EndPass)
    # Not current (or the Fleet could not say): place as before.
    placing = rollout.placement_checked(state, False)
    _, action = rollout.next_action(placing, T0)
    assert action == rollout.Place(desired=2, sequence=2)


def test_a_change_or_a_gap_places_without_asking() -> None:
    resting = _resting_after_a_placement(7)
    # A change (scale, apply, resync signal) ends the rest dirty: place at once.
    assert CheckCurrent not in {type(op) for op in rollout.woke(rollout.resync(resting), T0).ops}
    # A replica missing, or no version yet (older Fleet): place.
    short = resting.model_copy(update={"replicas": {"a": resting.replicas["a"]}})
    assert CheckCurrent not in {type(op) for op in rollout.woke(short, T0).ops}
    unknown = resting.model_copy(update={"fleet_version": 0})
    assert CheckCurrent not in {type(op) for op in rollout.woke(unknown, T0).ops}


def test_the_version_is_carried_across_continue_as_new() -> None:
    resting = _resting_after_a_placement(3)
    assert rollout.carried(resting).fleet_version == 3


def _rest_then_resync(
    state: rollout.DeploymentState, current: bool
) -> tuple[rollout.DeploymentState, float]:
    """From a resting deployment: the rest it takes (seconds), then its quiet resync, the
    Fleet answering ``current``, carried out until it rests again."""
    state, action = rollout.next_action(state, T0)
    assert isinstance(action, rollout.Rest)
    rest = action.timeout.total_seconds()
    state = rollout.woke(state, T0)
    state, action = rollout.next_action(state, T0)
    assert isinstance(action, rollout.CheckPlacement)
    state = rollout.placement_checked(state, current)
    while True:
        state, action = rollout.next_action(state, T0)
        if isinstance(action, rollout.Place):
            state = rollout.placed(state, PlaceResponse(version=action.sequence + 10))
        elif isinstance(action, rollout.Rest):
            return state, rest


def test_quiet_resyncs_rest_longer_each_time_up_to_five_minutes() -> None:
    state = _resting_after_a_placement(7)
    rests = []
    for _ in range(6):
        state, rest = _rest_then_resync(state, current=True)
        rests.append(rest)
    assert rests == [60, 120, 240, 300, 300, 300]
    assert rollout.carried(state).quiet_resyncs == 6  # kept across continue-as-new
    # The Fleet says something changed: it places, and the next rest is 60 s again.
    state, _ = _rest_then_resync(state, current=False)
    assert rollout.next_action(state, T0)[1] == rollout.Rest(timeout=rollout.RESYNC_INTERVAL)


def test_a_change_starts_the_short_resync_again() -> None:
    state = _resting_after_a_placement(7)
    for _ in range(4):
        state, _ = _rest_then_resync(state, current=True)
    # A scale, an apply or the Fleet's nudge: the pass it starts places, then 60 s rests.
    state = rollout.woke(rollout.resync(state), T0)
    places = 0
    while True:
        state, action = rollout.next_action(state, T0)
        if isinstance(action, rollout.Place):
            places += 1
            state = rollout.placed(state, PlaceResponse(version=20))
        elif isinstance(action, rollout.Rest):
            break
    assert places == 1
    assert action == rollout.Rest(timeout=rollout.RESYNC_INTERVAL)
