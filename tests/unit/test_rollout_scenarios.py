"""Whole rollouts through the pure module, carried out by a driver against a toy Fleet whose
replicas report back at once: what is placed, started, torn down and released, in order."""

from __future__ import annotations

from datetime import timedelta

from rollout_builders import Driver, ToyFleet, fleet_with, serving, spec, state_with, status

from modelfleet.contracts.status import ReplicaPhase, ReplicaStep
from modelfleet.deployment import decisions as rollout
from modelfleet.deployment.decisions import DeploymentState

OLD = spec(2, image="vllm:1")
NEW = spec(2, image="vllm:2")


def running_on(md: object, *clusters: str) -> DeploymentState:
    return state_with(md, *(status(md, f"{c}-old", c) for c in clusters))  # type: ignore[arg-type]


def test_scale_up_places_and_starts_then_scale_down_tears_down_and_releases() -> None:
    driver = Driver(DeploymentState(spec=spec(1)), ToyFleet(slots={"east": 2, "west": 2}))
    assert driver.run() == "rest"
    assert driver.log == ["place 1", "start r01-east", "end"]
    driver.state = rollout.scaled(driver.state, 3)
    driver.log.clear()
    assert driver.run() == "rest"
    assert driver.log == ["place 3", "start r02-east", "start r03-west", "end"]
    assert len(serving(driver.state)) == 3
    driver.state = rollout.scaled(driver.state, 1)
    driver.log.clear()
    assert driver.run() == "rest"
    assert driver.log == [
        "place 1",
        "teardown r03-west",
        "release r03-west",
        "teardown r02-east",
        "release r02-east",
        "end",
        "place 1",  # the replicas' reports that they are done asked for one more pass
        "end",
    ]
    assert set(driver.state.replicas) == set(driver.fleet.ledger) == {"r01-east"}
    assert rollout.report(driver.state).phase == "Ready"


def test_template_change_with_room_surges_one_at_a_time() -> None:
    state = running_on(OLD, "east", "west").model_copy(update={"dirty": False})
    driver = Driver(rollout.applied(state, NEW), fleet_with(state, east=1, west=1, north=1))
    assert driver.run() == "rest"
    assert driver.log == [
        "dry 2: 2",  # the new template fits: the roll may start
        "place 2",
        "place 3",
        "start r01-north",
        "errors r01-north: 0/0",  # proven: what its engines answered is read, then judged
        "teardown east-old",
        "release east-old",
        "place 3",
        "start r02-east",
        "errors r02-east: 0/0",
        "teardown west-old",
        "release west-old",
        "end",
        "place 2",
        "end",
    ]
    assert set(serving(driver.state).values()) == {rollout.template_hash(NEW)}
    assert rollout.report(driver.state).phase == "Ready"


def test_template_change_on_a_full_fleet_replaces_unavailable_first() -> None:
    state = running_on(OLD, "east", "west").model_copy(update={"dirty": False})
    driver = Driver(rollout.applied(state, NEW), fleet_with(state, east=1, west=1))
    assert driver.run() == "rest"
    assert driver.log == [
        "dry 2: 2",
        "place 2",
        "place 3",  # no room to surge
        "dry 2: 1",  # its replacement would fit once it is gone
        "teardown east-old",
        "release east-old",
        "place 2",
        "start r01-east",
        "errors r01-east: 0/0",
        "place 3",
        "dry 2: 1",
        "teardown west-old",
        "release west-old",
        "place 2",
        "start r02-west",
        "errors r02-west: 0/0",
        "end",
        "place 2",
        "end",
    ]
    assert set(serving(driver.state).values()) == {rollout.template_hash(NEW)}


def test_a_full_fleet_with_max_unavailable_zero_blocks_and_keeps_serving() -> None:
    md = spec(2, image="vllm:2", surge=1, unavailable=0)
    state = running_on(OLD, "east", "west").model_copy(update={"dirty": False})
    driver = Driver(rollout.applied(state, md), fleet_with(state, east=1, west=1))
    assert driver.run() == "rest"
    assert driver.log == ["dry 2: 2", "place 2", "place 3", "end"]
    assert set(serving(driver.state)) == {"east-old", "west-old"}
    assert "blocked" in rollout.report(driver.state).summary


def test_a_failed_replica_is_replaced_away_from_its_cluster_until_the_avoidance_expires() -> None:
    driver = Driver(
        DeploymentState(spec=spec(1)),
        ToyFleet(slots={"east": 1, "west": 1}),
        behaviour={"east": "fail"},
    )
    assert driver.run() == "rest"
    # The failure report asks for a pass, which reaps the failed replica and re-places it.
    assert driver.log == [
        "place 1",
        "start r01-east",
        "end",
        "release r01-east",
        "place 1",
        "start r02-west",
        "end",
    ]
    assert driver.fleet.requests[-1].avoid_clusters == ["east"]
    assert "r01-east failed: ImagePullBackOff" in driver.fleet.requests[-1].avoid_reasons["east"]
    assert serving(driver.state).keys() == {"r02-west"}

    # Past the expiry east is a candidate again.
    driver.now += rollout.AVOID_AFTER_FAILURE + timedelta(seconds=1)
    driver.behaviour = {}
    driver.state = rollout.scaled(driver.state, 2)
    driver.log.clear()
    assert driver.run() == "rest"
    assert driver.fleet.requests[-1].avoid_clusters == []
    assert driver.log == ["place 2", "start r03-east", "end"]


def test_a_surge_that_fails_rolls_back_to_the_last_good_template() -> None:
    state = running_on(OLD, "west").model_copy(update={"dirty": False})
    md = spec(1, image="vllm:2")
    driver = Driver(rollout.applied(state, md), fleet_with(state, east=1, west=1, north=1))
    driver.behaviour = {"east": "fail"}
    assert driver.run() == "rest"
    assert driver.log == [
        "dry 1: 1",
        "place 1",
        "place 2",
        "start r01-east",
        "end",  # paused and rolled back; the failure report asks for the next pass
        "release r01-east",
        "place 1",  # the pass reconciles the old template: nothing left to roll
        "end",
    ]
    assert driver.fleet.requests[-1].deployment.spec.template == OLD.spec.template
    assert serving(driver.state) == {"west-old": rollout.template_hash(OLD)}
    report = rollout.report(driver.state)
    assert report.phase == "Ready"
    assert "rolled back to the last good template" in report.summary
    assert "ImagePullBackOff" in report.summary
    blocked = [c for c in report.conditions if c.type == "RolloutBlocked"]
    assert [c.reason for c in blocked] == ["RolledBack"]
    # Restoring the good spec changes nothing that runs; the held change is forgotten.
    driver.state = rollout.applied(driver.state, spec(1, image="vllm:1"))
    driver.log.clear()
    assert driver.run() == "rest"
    assert driver.log == ["place 1", "end"]
    assert not [c for c in rollout.report(driver.state).conditions if c.type == "RolloutBlocked"]


def test_a_replacement_that_hangs_waits_with_the_rest_still_serving() -> None:
    state = running_on(OLD, "east", "west").model_copy(update={"dirty": False})
    driver = Driver(rollout.applied(state, NEW), fleet_with(state, east=1, west=1, north=1))
    driver.behaviour = {"north": "hang"}
    assert driver.run() == "wait r01-north"
    assert set(serving(driver.state)) == {"east-old", "west-old"}


def test_delete_during_a_rollout_tears_everything_down_and_finishes() -> None:
    state = running_on(OLD, "east", "west").model_copy(update={"dirty": False})
    driver = Driver(rollout.applied(state, NEW), fleet_with(state, east=1, west=1, north=1))
    driver.behaviour = {"north": "hang"}
    assert driver.run() == "wait r01-north"
    driver.state = rollout.deleted(driver.state)
    driver.log.clear()
    assert driver.run() == "finish"
    assert driver.log == [
        "end",
        "teardown east-old",
        "release east-old",
        "teardown r01-north",
        "release r01-north",
        "teardown west-old",
        "release west-old",
    ]
    assert driver.state.replicas == {}
    assert driver.fleet.ledger == {}


def test_a_replica_that_ended_by_itself_is_reaped_without_avoidance() -> None:
    md = spec(1)
    ended = status(md, "a", "east", ReplicaPhase.TERMINATED, ReplicaStep.DONE)
    state = state_with(md, ended)
    driver = Driver(state, fleet_with(state, east=1))
    assert driver.run() == "rest"
    assert driver.log == ["release a", "place 1", "start r01-east", "end"]
    assert driver.state.avoid == {}
