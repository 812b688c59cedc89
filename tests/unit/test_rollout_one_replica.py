"""A deployment of one replica is not taken to zero by default when the fleet has no room to
surge (issue 29, item 6): with ``maxUnavailable`` unset it surges wherever there is room, else
waits for room; an explicit ``maxUnavailable: 1`` still replaces it in place."""

from __future__ import annotations

import pytest
from rollout_builders import Driver, ToyFleet, serving, spec

from modelfleet.api.deployments import ModelDeployment, Strategy
from modelfleet.api.rules import validate
from modelfleet.deployment import decisions as rollout
from modelfleet.deployment.decisions import DeploymentState, template_hash
from modelfleet.deployment.roll import WAITING_FOR_ROOM


def _one(image: str = "vllm:1", **strategy: int) -> ModelDeployment:
    md = spec(1, image=image)
    md.spec.strategy = Strategy(**strategy)
    return md


def _serving_one(md: ModelDeployment, fleet: ToyFleet) -> Driver:
    driver = Driver(DeploymentState(spec=md), fleet)
    assert driver.run() == "rest"
    assert len(serving(driver.state)) == 1
    driver.log.clear()
    return driver


@pytest.mark.parametrize(
    ("strategy", "replicas", "unavailable"),
    [
        ({}, 1, 0),
        ({}, 2, 1),
        ({}, 5, 1),
        ({"max_surge": 0}, 1, 1),
        ({"max_unavailable": 1}, 1, 1),
        ({"max_unavailable": 0}, 3, 0),
        ({"max_unavailable": 2}, 3, 2),
    ],
)
def test_the_max_unavailable_in_effect(
    strategy: dict[str, int], replicas: int, unavailable: int
) -> None:
    assert Strategy(**strategy).unavailable(replicas) == unavailable


def test_a_one_replica_deployment_with_no_room_to_surge_waits_instead_of_going_to_zero() -> None:
    fleet = ToyFleet(slots={"east": 1})
    driver = _serving_one(_one(), fleet)
    (old,) = serving(driver.state)
    driver.state = rollout.applied(driver.state, _one(image="vllm:2"))
    assert driver.run() == "rest"
    assert not [e for e in driver.log if e.startswith(("teardown", "start"))], driver.log
    assert serving(driver.state) == {old: template_hash(_one())}
    assert rollout.report(driver.state).summary == WAITING_FOR_ROOM
    # Room appears on another cluster: the next resync surges there, then the old one goes.
    fleet.slots["west"] = 1
    driver.state = rollout.resync(driver.state)
    assert driver.run() == "rest"
    assert list(serving(driver.state).values()) == [template_hash(_one(image="vllm:2"))]
    assert [s.cluster for s in driver.state.replicas.values()] == ["west"]
    starts = [i for i, e in enumerate(driver.log) if e.startswith("start")]
    assert starts, driver.log
    assert starts[0] < driver.log.index(f"teardown {old}"), driver.log


def test_a_one_replica_deployment_surges_across_clusters_when_there_is_room() -> None:
    fleet = ToyFleet(slots={"east": 1, "west": 1})
    driver = _serving_one(_one(), fleet)
    (old,) = serving(driver.state)
    driver.state = rollout.applied(driver.state, _one(image="vllm:2"))
    assert driver.run() == "rest"
    assert len(serving(driver.state)) == 1
    assert [s.cluster for s in driver.state.replicas.values()] == ["west"]
    assert driver.log.index("start r02-west") < driver.log.index(f"teardown {old}"), driver.log


def test_an_explicit_max_unavailable_of_one_still_replaces_in_place() -> None:
    fleet = ToyFleet(slots={"east": 1})
    driver = _serving_one(_one(max_unavailable=1), fleet)
    (old,) = serving(driver.state)
    driver.state = rollout.applied(driver.state, _one(image="vllm:2", max_unavailable=1))
    assert driver.run() == "rest"
    assert driver.log.index(f"teardown {old}") < driver.log.index("start r02-east"), driver.log
    assert list(serving(driver.state).values()) == [template_hash(_one(image="vllm:2"))]


def test_a_surge_of_zero_with_max_unavailable_unset_is_valid() -> None:
    assert not validate(_one(max_surge=0))
    errors = validate(_one(max_surge=0, max_unavailable=0))
    assert errors
    assert "must not both be 0" in str(errors[0])
