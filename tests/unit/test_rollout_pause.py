"""``rollout pause``/``resume``, the revisions and decision log kept in the state (and across
continue-as-new), and the honest phases: an unplaceable deployment is Pending, 0 replicas is no
failure. All through the pure module, carried out by the toy driver."""

from __future__ import annotations

from datetime import timedelta

from rollout_builders import T0, Driver, ToyFleet, fleet_with, serving, spec, state_with, status

from modelfleet.api.meta import Condition
from modelfleet.contracts.fleet_payloads import PlaceResponse
from modelfleet.deployment import decisions as rollout
from modelfleet.deployment.decisions import DeploymentState
from modelfleet.deployment.state import LOG_LIMIT, REVISION_LIMIT

OLD = spec(2, image="vllm:1")
NEW = spec(2, image="vllm:2")
NEWER = spec(2, image="vllm:3")


def settled(md: object, *clusters: str) -> DeploymentState:
    replicas = (status(md, f"{c}-old", c) for c in clusters)  # type: ignore[arg-type]
    return state_with(md, *replicas, dirty=False)  # type: ignore[arg-type]


def test_a_paused_deployment_takes_a_new_template_but_rolls_nothing() -> None:
    state = rollout.paused(settled(OLD, "east", "west"), T0)
    driver = Driver(rollout.applied(state, NEW, T0), fleet_with(state, east=2, west=2))
    assert driver.run() == "rest"
    assert driver.log == ["place 2", "end"]  # no dry placement, no surge, no teardown
    assert set(serving(driver.state).values()) == {rollout.template_hash(OLD)}
    report = rollout.report(driver.state)
    assert report.phase == "Paused"
    assert report.paused
    assert report.updated == 0  # neither runs the spec's template yet (kubectl's count)
    [paused] = [c for c in report.conditions if c.type == "Progressing"]
    assert (paused.status, paused.reason) == ("Unknown", "DeploymentPaused")
    assert driver.state.spec == NEW  # the spec is the user's; only the roll waits


def test_scaling_a_paused_deployment_adds_replicas_of_the_pinned_template() -> None:
    state = rollout.applied(rollout.paused(settled(OLD, "east"), T0), NEW, T0)
    driver = Driver(rollout.scaled(state, 3, T0), fleet_with(state, east=2, west=2))
    assert driver.run() == "rest"
    assert driver.log == ["place 3", "start r01-east", "start r02-west", "end"]
    assert len(serving(driver.state)) == 3
    assert set(serving(driver.state).values()) == {rollout.template_hash(OLD)}
    assert driver.fleet.requests[-1].deployment.spec.template == OLD.spec.template


def test_resume_rolls_to_the_template_given_while_paused() -> None:
    state = rollout.applied(rollout.paused(settled(OLD, "east", "west"), T0), NEW, T0)
    driver = Driver(state, fleet_with(state, east=2, west=2))
    assert driver.run() == "rest"
    driver.state = rollout.resumed(driver.state, T0)
    assert rollout.rest_over(driver.state)
    driver.log.clear()
    assert driver.run() == "rest"
    assert driver.log[:3] == ["dry 2: 2", "place 2", "place 3"]  # checked, then surged
    assert set(serving(driver.state).values()) == {rollout.template_hash(NEW)}
    assert rollout.report(driver.state).phase == "Ready"
    assert not driver.state.paused
    assert driver.state.pinned is None


def test_a_pause_during_a_roll_lets_the_replacement_under_way_finish_and_stops() -> None:
    state = settled(OLD, "east", "west")
    driver = Driver(rollout.applied(state, NEW, T0), fleet_with(state, east=1, west=1, north=1))
    # Run until the surge replica is started, then pause before it is awaited.
    for _ in range(20):
        driver.state, action = rollout.next_action(driver.state, driver.now)
        if isinstance(action, rollout.Rest):
            driver.state = rollout.woke(driver.state, driver.now)
        elif isinstance(action, rollout.DryPlace):
            request = rollout.dry_place_request(driver.state, action, "dry", driver.now)
            driver.state = rollout.dry_placed(driver.state, driver.fleet.dry_place(request))
        elif isinstance(action, rollout.Place):
            request = rollout.place_request(driver.state, action, "p", driver.now)
            driver.state = rollout.placed(driver.state, driver.fleet.place(request))
        elif isinstance(action, rollout.StartReplica):
            driver._start(action.replica)
            break
    driver.state = rollout.paused(driver.state, T0)
    assert driver.run() == "rest"
    # The surge replica replaced one old replica; the other keeps serving the old template.
    assert driver.log[:5] == [
        "start r01-north",
        "errors r01-north: 0/0",
        "teardown east-old",
        "release east-old",
        "end",
    ]
    assert not any(line.startswith(("start", "teardown")) for line in driver.log[5:])
    assert sorted(serving(driver.state).values()) == sorted(
        [rollout.template_hash(NEW), rollout.template_hash(OLD)]
    )
    assert rollout.report(driver.state).phase == "Paused"


def test_pausing_twice_or_resuming_a_running_deployment_changes_nothing() -> None:
    state = settled(OLD, "east")
    assert rollout.resumed(state, T0) is state
    once = rollout.paused(state, T0)
    assert rollout.paused(once, T0 + timedelta(seconds=1)) is once
    assert [e.message for e in once.log] == ["rollout paused"]


def test_revisions_are_kept_bounded_and_survive_continue_as_new() -> None:
    state = rollout.started(DeploymentState(spec=OLD), T0)
    assert state.created == T0
    for n in range(REVISION_LIMIT + 2):
        state = rollout.applied(state, spec(2, image=f"vllm:{n + 10}"), T0 + timedelta(minutes=n))
        state = rollout.scaled(state, 3, T0)  # scaling updates the current revision
    assert len(state.revisions) == REVISION_LIMIT
    assert [r.number for r in state.revisions] == list(range(4, 4 + REVISION_LIMIT))
    assert {r.replicas for r in state.revisions} == {3}
    # The next run's input keeps them, and starting it neither re-stamps nor re-records.
    later = T0 + timedelta(days=3)
    carried = rollout.started(
        DeploymentState.model_validate_json(rollout.carried(state).model_dump_json()), later
    )
    assert carried.created == T0
    assert carried.revisions == state.revisions


def test_the_decision_log_records_changes_once_and_not_every_resync() -> None:
    driver = Driver(DeploymentState(spec=spec(1)), ToyFleet(slots={"east": 1}))
    assert driver.run() == "rest"
    assert [e.message for e in driver.state.log] == ["placed r01-east on east"]
    driver.state = rollout.scaled(driver.state, 2, T0)
    assert driver.run() == "rest"
    # Periodic resyncs with the same verdict add nothing.
    for _ in range(3):
        driver.state = rollout.woke(driver.state, driver.now)
        assert driver.run() == "rest"
    assert [e.message for e in driver.state.log] == ["placed r01-east on east", "no room"]
    driver.state = rollout.scaled(driver.state, 0, T0)
    assert driver.run() == "rest"
    assert [e.message for e in driver.state.log][-1] == "removing r01-east on east: scaled down"


def test_the_decision_log_is_bounded() -> None:
    state = settled(OLD, "east")
    for n in range(LOG_LIMIT + 5):
        state = rollout.resumed(rollout.paused(state, T0 + timedelta(seconds=n)), T0)
    assert len(state.log) == LOG_LIMIT
    assert state.log[-1].message == "rollout resumed"


def test_a_deployment_the_scheduler_cannot_place_is_pending_with_its_reasons() -> None:
    state = rollout.woke(state_with(OLD), T0)
    state, _ = rollout.next_action(state, T0)  # reap, then ask the Fleet
    why = "0/3 clusters fit: 3 no pool satisfies device 'gpu'"
    unplaced = Condition(
        type="ReplicasScheduled", status="False", reason="InsufficientCapacity", message=why
    )
    state = rollout.placed(state, PlaceResponse(conditions=[unplaced], summary=why))
    assert rollout.report(state).observed_generation == 0  # the pass is not over yet
    state, _ = rollout.next_action(state, T0)  # nothing to roll: the pass ends
    report = rollout.report(state)
    assert report.phase == "Pending"
    assert report.summary == why
    assert report.observed_generation == report.generation
    # One replica serving and one that fits nowhere: not Pending, and not Progressing either.
    serving_one = state.model_copy(update={"replicas": {"a": status(OLD, "a", "east")}})
    assert rollout.report(serving_one).phase == "Degraded"


def test_zero_desired_replicas_is_ready_not_a_failed_condition() -> None:
    report = rollout.report(state_with(spec(0)))
    assert report.phase == "Ready"
    [ready] = [c for c in report.conditions if c.type == "ReplicasReady"]
    assert (ready.status, ready.reason) == ("True", "ScaledToZero")
