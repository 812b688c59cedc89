"""Replacements prove themselves (issue 27): a new replica stays Ready for minReadySeconds
before an old one drains, a replacement that leaves Ready or crash-loops in that window (or
while the roll goes on) rolls the deployment back with the figures, and a roll replaces in
place only while enough replicas pass health."""

from __future__ import annotations

from datetime import timedelta

from rollout_builders import T0, replica, spec, state_with, status

from modelfleet.contracts.fleet_payloads import PlaceResponse
from modelfleet.contracts.status import ReplicaPhase, ReplicaProgress, ReplicaStep
from modelfleet.deployment import decisions as rollout
from modelfleet.deployment.decisions import DeploymentState
from modelfleet.deployment.state import record_revision

# The engines' error rate is judged elsewhere (test_rollout_error_rate.py): off here, so each
# replacement goes on once proven.
OLD = spec(2, image="vllm:1", max_error_percent=100)
NEW = spec(2, image="vllm:2", max_error_percent=100)
CRASH = (
    "Deployment m-c/engine not Available: 0/1 pods ready; pod engine-0: container engine "
    "CrashLoopBackOff (restarted 3 times), last exit Error (exit code 1)"
)


def at(seconds: float) -> object:
    return T0 + timedelta(seconds=seconds)


def report(
    state: DeploymentState,
    name: str,
    phase: ReplicaPhase,
    when: float,
    reason: str = "",
    restarts: int = 0,
) -> DeploymentState:
    step = ReplicaStep.DONE if phase is ReplicaPhase.FAILED else ReplicaStep.SERVING
    progress = ReplicaProgress(
        name=name, phase=phase, step=step, reason=reason, at=at(when), restarts=restarts
    )
    return rollout.progressed(state, progress)


def surging(md: object = NEW) -> DeploymentState:
    """A roll from OLD (its last good template, both replicas serving) to ``md``, its surge
    replica ``c`` started and awaited."""
    state = state_with(OLD, status(OLD, "a", "east"), status(OLD, "b", "west"), last_good=OLD)
    record_revision(state, T0, "created")
    state = rollout.applied(state, md, T0)  # type: ignore[arg-type]
    # Its dry placement already succeeded (the gate is tested elsewhere).
    state = state.model_copy(update={"checked": rollout.template_hash(NEW)})
    state = rollout.woke(state, T0)
    state, _ = rollout.next_action(state, T0)
    state = rollout.placed(state, PlaceResponse())  # the reconcile placement changed nothing
    state, action = rollout.next_action(state, T0)
    assert isinstance(action, rollout.Place)  # the surge
    state = rollout.placed(state, PlaceResponse(placed=[replica(NEW, "c", "north")]))
    state, action = rollout.next_action(state, T0)
    assert isinstance(action, rollout.StartReplica)
    state, action = rollout.next_action(state, T0)
    assert action == rollout.Wait(name="c", until="settled")
    return state


def test_a_ready_replacement_waits_min_ready_seconds_before_an_old_replica_drains() -> None:
    state = report(surging(), "c", ReplicaPhase.READY, 10)
    state, action = rollout.next_action(state, at(11))
    # A durable timer to 30 s after Ready, not a poll.
    assert action == rollout.Wait(name="c", until="proven", deadline=at(40))
    assert not rollout.wait_over(state, action)
    # Not the last good template yet: a crash in the window must still roll back.
    assert rollout.template_hash(state.last_good) == rollout.template_hash(OLD)  # type: ignore[arg-type]
    # Early, the decision is the same wait; at the deadline the old replica goes.
    assert rollout.next_action(state, at(39))[1] == action
    state, action = rollout.next_action(state, at(40))
    assert action == rollout.SignalTeardown(name="a")
    assert state.replicas["b"].phase is ReplicaPhase.READY


def test_min_ready_seconds_is_per_deployment() -> None:
    md = spec(2, image="vllm:2", max_error_percent=100)
    md.spec.strategy.min_ready_seconds = 120
    state = report(surging(md), "c", ReplicaPhase.READY, 10)
    _, action = rollout.next_action(state, at(11))
    assert action == rollout.Wait(name="c", until="proven", deadline=at(130))
    md.spec.strategy.min_ready_seconds = 0
    state = report(surging(md), "c", ReplicaPhase.READY, 10)
    assert rollout.next_action(state, at(11))[1] == rollout.SignalTeardown(name="a")


def test_a_replacement_crash_looping_after_ready_rolls_back_with_the_figures() -> None:
    state = report(surging(), "c", ReplicaPhase.READY, 10)
    state, wait = rollout.next_action(state, at(11))
    state = report(state, "c", ReplicaPhase.DEGRADED, 22, CRASH, restarts=3)
    assert rollout.wait_over(state, wait)  # the timer is cut short by the report
    state, action = rollout.next_action(state, at(23))
    assert action == rollout.EndPass()
    # Nothing old was touched; the spec's template is held back.
    assert {n: r.phase for n, r in state.replicas.items() if n != "c"} == {
        "a": ReplicaPhase.READY,
        "b": ReplicaPhase.READY,
    }
    assert state.held == rollout.template_hash(NEW)
    assert rollout.template_hash(rollout.effective_spec(state)) == rollout.template_hash(OLD)
    figures = "crash-looping 12 s after Ready (3 restarts)"
    assert state.held_reason.startswith(
        f"rolled back to the last good template: rollout paused: surge replica c failed: "
        f"{figures}: Deployment m-c/engine not Available"
    )
    status = rollout.report(state)
    assert any(c.reason == "RolledBack" and figures in c.message for c in status.conditions)
    assert figures in status.summary
    # ``rollout history``: the held-back revision says what became of it.
    assert state.revisions[-1].template == rollout.template_hash(NEW)
    assert state.revisions[-1].outcome.startswith("rolled back: rollout paused: surge replica c")
    assert figures in state.revisions[-1].outcome
    assert not state.revisions[0].outcome
    # ``describe``'s decisions.
    state, _ = rollout.next_action(state, at(24))
    assert any(figures in e.message for e in state.log)


def test_leaving_ready_without_restarts_in_the_window_also_fails_the_replacement() -> None:
    state = report(surging(), "c", ReplicaPhase.READY, 10)
    state = report(state, "c", ReplicaPhase.DEGRADED, 15, "Deployment m-c/engine not Available")
    state, action = rollout.next_action(state, at(16))
    assert action == rollout.EndPass()
    assert "Degraded again 5 s after Ready (0 restarts)" in state.held_reason


def test_ready_and_degraded_in_one_task_is_not_awaited_forever() -> None:
    state = surging()
    state = report(state, "c", ReplicaPhase.READY, 10)
    state = report(state, "c", ReplicaPhase.DEGRADED, 11, CRASH, restarts=1)
    assert rollout.wait_over(state, rollout.Wait(name="c", until="settled"))
    state, action = rollout.next_action(state, at(12))
    assert action == rollout.EndPass()
    assert state.held == rollout.template_hash(NEW)


def test_a_never_ready_replacement_still_rolls_back_without_figures() -> None:
    state = report(surging(), "c", ReplicaPhase.FAILED, 30, "ImagePullBackOff")
    state, action = rollout.next_action(state, at(31))
    assert action == rollout.EndPass()
    assert state.held_reason.endswith("surge replica c failed: ImagePullBackOff")


def _after_first_replacement() -> DeploymentState:
    """``c`` proved itself and replaced ``a``; the roll surges ``d`` for ``b``."""
    state = report(surging(), "c", ReplicaPhase.READY, 10)
    state, action = rollout.next_action(state, at(40))
    assert action == rollout.SignalTeardown(name="a")
    state = report(state, "a", ReplicaPhase.TERMINATED, 41)
    state, action = rollout.next_action(state, at(42))
    assert action == rollout.Wait(name="a", until="done")
    state = rollout.progressed(
        state,
        ReplicaProgress(name="a", phase=ReplicaPhase.TERMINATED, step=ReplicaStep.DONE, at=at(42)),
    )
    state, action = rollout.next_action(state, at(42))
    assert action == rollout.Forget(name="a")
    state = rollout.forgotten(state, "a", at(43))  # type: ignore[arg-type]
    state, action = rollout.next_action(state, at(43))
    assert isinstance(action, rollout.Place)
    state = rollout.placed(state, PlaceResponse(placed=[replica(NEW, "d", "south")]))
    state, _ = rollout.next_action(state, at(44))
    state, action = rollout.next_action(state, at(44))
    assert action == rollout.Wait(name="d", until="settled")
    return state


def test_an_earlier_replacement_crash_looping_while_the_roll_goes_on_rolls_back() -> None:
    state = _after_first_replacement()
    state = report(state, "c", ReplicaPhase.DEGRADED, 130, CRASH, restarts=2)
    assert rollout.wait_over(state, rollout.Wait(name="d", until="settled"))
    state, action = rollout.next_action(state, at(131))
    assert action == rollout.EndPass()
    assert "replica c of the new template failed: crash-looping 120 s after Ready" in (
        state.held_reason
    )
    assert state.replicas["b"].phase is ReplicaPhase.READY


def _finishing() -> DeploymentState:
    """The roll from OLD to NEW at its last step (82 s): ``c`` and ``d`` serve NEW, ``b`` is
    gone; the next decision ends the pass."""
    state = _after_first_replacement()
    state = report(state, "d", ReplicaPhase.READY, 50)
    state, action = rollout.next_action(state, at(80))
    assert action == rollout.SignalTeardown(name="b")
    state = rollout.progressed(
        state,
        ReplicaProgress(name="b", phase=ReplicaPhase.TERMINATED, step=ReplicaStep.DONE, at=at(81)),
    )
    state, action = rollout.next_action(state, at(81))
    assert action == rollout.Forget(name="b")
    return rollout.forgotten(state, "b", at(82))  # type: ignore[arg-type]


def _finished() -> DeploymentState:
    """The roll from OLD to NEW over at 82 s, the deployment resting."""
    state, action = rollout.next_action(_finishing(), at(82))
    assert action == rollout.EndPass()
    return _settle(state, 83)


def _settle(state: DeploymentState, when: float) -> DeploymentState:
    """Passes (every placement answered with no change) until the deployment rests clean."""
    for _ in range(5):
        if not rollout.rest_over(state):
            return state
        state = rollout.woke(state, at(when))
        while True:
            state, action = rollout.next_action(state, at(when))
            if isinstance(action, rollout.Place):
                state = rollout.placed(state, PlaceResponse())
            elif isinstance(action, rollout.EndPass):
                break
            else:
                raise AssertionError(f"unexpected {action}")
        state, _ = rollout.next_action(state, at(when))
    raise AssertionError("never settled")


def test_a_slow_crasher_within_the_rollback_window_rolls_back_at_once() -> None:
    """A crash loop that starts after the roll finished (the engine outlived minReadySeconds)
    within rollbackWindowSeconds (600 s by default) rolls back to the template before it."""
    state = _finished()
    assert rollout.template_hash(state.last_good) == rollout.template_hash(NEW)  # type: ignore[arg-type]
    assert rollout.rollback_window_end(state) == at(82 + 600)
    assert not rollout.rest_over(state)
    state = report(state, "c", ReplicaPhase.DEGRADED, 400, CRASH, restarts=2)
    # At rest: the report itself wakes the deployment (no wait for the periodic resync).
    assert rollout.rest_over(state)
    state = rollout.woke(state, at(401))
    state, action = rollout.next_action(state, at(401))
    assert isinstance(action, rollout.Place)
    state = rollout.placed(state, PlaceResponse())  # the reconcile placement changed nothing
    state, action = rollout.next_action(state, at(401))
    assert action == rollout.EndPass()
    assert state.held == rollout.template_hash(NEW)
    assert rollout.template_hash(rollout.effective_spec(state)) == rollout.template_hash(OLD)
    assert rollout.template_hash(state.last_good) == rollout.template_hash(OLD)  # type: ignore[arg-type]
    assert "replica c of the template rolled out 319 s ago failed within its rollback window" in (
        state.held_reason
    )
    assert "crash-looping" in state.held_reason
    assert state.revisions[-1].outcome.startswith("rolled back: replica c of the template")
    # The next pass rolls the replicas back to OLD.
    assert rollout.rest_over(state)


def test_a_crash_past_the_rollback_window_or_with_none_is_not_rolled_back() -> None:
    late = report(_finished(), "c", ReplicaPhase.DEGRADED, 82 + 601, CRASH, restarts=5)
    assert rollout.failed_replacement(late) is None
    assert rollout.failed_after_roll(late, at(82 + 601)) is None
    assert not rollout.rest_over(late)
    off = _finished()
    off.spec.spec.strategy.rollback_window_seconds = 0
    off.previous_good, off.rolled_out_at = None, None
    rollout.promote(off, at(90))
    assert rollout.rollback_window_end(off) is None
    off = report(off, "c", ReplicaPhase.DEGRADED, 100, CRASH, restarts=5)
    assert rollout.failed_after_roll(off, at(100)) is None


def test_a_roll_that_finishes_makes_its_template_the_last_good_one() -> None:
    state = _finishing()
    assert rollout.template_hash(state.last_good) == rollout.template_hash(OLD)  # type: ignore[arg-type]
    state, action = rollout.next_action(state, at(82))
    assert action == rollout.EndPass()
    assert rollout.template_hash(state.last_good) == rollout.template_hash(NEW)  # type: ignore[arg-type]
    # A crash after the roll is over is no failed replacement (the rollback window's, above).
    state = report(state, "c", ReplicaPhase.DEGRADED, 400, CRASH, restarts=5)
    assert rollout.failed_replacement(state) is None


def test_in_place_replacement_waits_for_capacity_that_passes_health() -> None:
    md = spec(2, image="vllm:2", surge=0, unavailable=1)
    degraded = status(OLD, "b", "west", ReplicaPhase.DEGRADED, ReplicaStep.SERVING)
    ready = status(md, "n", "north")
    ready = ready.model_copy(update={"ready_since": at(0)})
    state = rollout.woke(state_with(md, status(OLD, "a", "east"), ready, degraded), at(5))
    state, _ = rollout.next_action(state, at(5))
    state = rollout.placed(state, PlaceResponse())
    # "b" is not serving: replaced in place at no cost.
    state, action = rollout.next_action(state, at(5))
    assert action == rollout.SignalTeardown(name="b")
    state = rollout.progressed(
        state,
        ReplicaProgress(name="b", phase=ReplicaPhase.TERMINATED, step=ReplicaStep.DONE, at=at(6)),
    )
    state, _ = rollout.next_action(state, at(6))
    state = rollout.forgotten(state, "b", at(6))  # type: ignore[arg-type]
    state, action = rollout.next_action(state, at(6))
    assert isinstance(action, rollout.Place)
    state = rollout.placed(state, PlaceResponse())  # no room for the fill: one short
    # Replacing "a" in place now would leave only "n", Ready but not yet proven (0 proven of
    # replicas - maxUnavailable = 1): a timer until "n" has proven itself, no teardown.
    state, action = rollout.next_action(state, at(7))
    assert action == rollout.Wait(name="n", until="proven", deadline=at(30))
    state, action = rollout.next_action(state, at(30))
    assert isinstance(action, rollout.DryPlace)


def test_in_place_replacement_never_drops_below_the_floor() -> None:
    md = spec(2, image="vllm:2", surge=0, unavailable=1)
    broken = status(md, "n", "north", ReplicaPhase.DEGRADED, ReplicaStep.SERVING)
    state = rollout.woke(state_with(md, status(OLD, "a", "east"), broken), at(5))
    state, _ = rollout.next_action(state, at(5))
    state = rollout.placed(state, PlaceResponse())
    state, action = rollout.next_action(state, at(5))
    assert action == rollout.EndPass()
    assert state.summary.startswith(rollout.WAITING_FOR_HEALTH)
    assert state.replicas["a"].phase is ReplicaPhase.READY
    # "n" passing health again wakes the deployment.
    state = report(state, "n", ReplicaPhase.READY, 6)
    assert rollout.rest_over(state)


def test_after_ready_figures() -> None:
    s = status(NEW, "c", "north", ReplicaPhase.DEGRADED, reason="x").model_copy(
        update={"ready_since": at(0), "updated": at(61), "restarts": 1}
    )
    assert rollout.after_ready(s, at(70)) == "crash-looping 61 s after Ready (1 restart): x"
    assert rollout.crash_looping(s)
    assert not rollout.crash_looping(s.model_copy(update={"restarts": 0}))
    assert rollout.crash_looping(s.model_copy(update={"restarts": 0, "reason": CRASH}))


def test_a_resume_during_a_paused_pass_rolls_only_after_the_dry_placement() -> None:
    state = state_with(OLD, status(OLD, "a", "east"), status(OLD, "b", "west"), last_good=OLD)
    state = rollout.paused(state, T0)
    state = rollout.applied(state, NEW, T0)
    state = rollout.woke(state, T0)  # a pass that began paused: no gate
    state, action = rollout.next_action(state, T0)
    assert isinstance(action, rollout.Place)
    state = rollout.resumed(state, T0)  # while the reconcile placement is in flight
    state = rollout.placed(state, PlaceResponse())
    state, action = rollout.next_action(state, T0)
    assert action == rollout.EndPass()  # nothing rolled unchecked
    state, action = rollout.next_action(state, T0)
    assert isinstance(action, rollout.Rest)
    assert rollout.rest_over(state)
    state = rollout.woke(state, T0)
    state, action = rollout.next_action(state, T0)
    assert isinstance(action, rollout.DryPlace)
