"""The bad changes of issue 16, each applied to a Ready two-replica deployment, carried out by
the rollout driver against the real scheduler (``scheduling.placement.place`` over a small
fleet): no serving replica is ever torn down, the status says why the change is held back or
was rolled back, and restoring the good spec changes nothing that runs.

CEL selectors that compile but fail at evaluation count as a non-match for every device, so the
dry placement of such a template places nothing and names each cluster's reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from placement_builders import (
    ANY_GPU,
    DRIVER,
    cluster,
    deployment,
    fleet,
    gpu,
    mem_at_least,
    pool,
    standalone,
)
from rollout_builders import Driver

from modelfleet.api.deployments import ModelDeployment, ModelReplica, Strategy
from modelfleet.api.rules import validate
from modelfleet.contracts.fleet_payloads import (
    DryPlaceRequest,
    PlaceRequest,
    PlaceResponse,
    ReplicaRemoval,
)
from modelfleet.contracts.status import ReplicaPhase
from modelfleet.deployment import decisions as rollout
from modelfleet.deployment.decisions import DeploymentState
from modelfleet.scheduling.placement import place
from modelfleet.scheduling.snapshot import FleetSnapshot

CLUSTERS = ("east", "north", "west")


@dataclass
class SchedulerFleet:
    """The Fleet's placement and dry placement, over the real scheduler and a ledger."""

    snapshot: FleetSnapshot
    ledger: dict[str, ModelReplica] = field(default_factory=dict)
    requests: list[PlaceRequest] = field(default_factory=list)

    def place(self, request: PlaceRequest) -> PlaceResponse:
        self.requests.append(request)
        response = self._answer(request, list(self.ledger.values()))
        for r in response.placed:
            self.ledger[r.name] = r
        return response

    def dry_place(self, request: DryPlaceRequest) -> PlaceResponse:
        counted = [r for n, r in self.ledger.items() if n not in request.without]
        answer = self._answer(request, counted)
        return PlaceResponse(
            placed=answer.placed,
            conditions=answer.conditions,
            rejections=answer.rejections,
            summary=answer.summary,
        )

    def release(self, name: str) -> None:
        self.ledger.pop(name, None)

    def _answer(self, request: PlaceRequest, existing: list[ModelReplica]) -> PlaceResponse:
        avoid = {c: request.avoid_reasons.get(c, "avoided") for c in request.avoid_clusters}
        result = place(
            request.deployment, self.snapshot, existing, desired=request.desired, avoid=avoid
        )
        return PlaceResponse(
            kept=result.kept,
            placed=result.placed,
            victims=[ReplicaRemoval(replica=v.replica, reason=v.message) for v in result.victims],
            conditions=result.conditions,
            rejections=result.rejections,
            summary=result.summary,
        )


def model(*selectors: str, image: str = "vllm:1", surge: int = 1, **kw: Any) -> ModelDeployment:
    md = deployment(standalone(1, *(selectors or (ANY_GPU,))), replicas=2, **kw)
    md.spec.strategy = Strategy(max_surge=surge, max_unavailable=1)
    md.spec.template.spec.engines[0].members[0].template.spec.containers[0].image = image
    return md


def ready_deployment(good: ModelDeployment) -> Driver:
    snapshot = fleet(
        *(cluster(c, pool("gpu", 1, gpu(memory="80Gi")), labels={"region": "eu"}) for c in CLUSTERS)
    )
    driver = Driver(DeploymentState(spec=good), SchedulerFleet(snapshot))  # type: ignore[arg-type]
    assert driver.run() == "rest"
    assert len(_serving(driver)) == 2
    driver.log.clear()
    # Serving for a while (longer than minReadySeconds) before the change comes.
    driver.now += timedelta(minutes=5)
    return driver


def _serving(driver: Driver) -> set[str]:
    return {n for n, s in driver.state.replicas.items() if s.phase is ReplicaPhase.READY}


BAD_SELECTORS = {
    # Each compiles, and fails at evaluation on every device.
    "string compared with an int": f'device.attributes["{DRIVER}"].productName > 5',
    "int compared with a quantity": f'device.capacity["{DRIVER}"].memory > 5',
    "division by zero": f'device.capacity["{DRIVER}"].memory.compareTo(quantity("1Gi")) / 0 >= 0',
    "type error": f'device.attributes["{DRIVER}"].productName + 1 == 2',
    # Compiles and evaluates, and no pool satisfies it.
    "no pool satisfies the selector": mem_at_least("1000Gi"),
}


@pytest.mark.parametrize("shape", sorted(BAD_SELECTORS))
def test_a_selector_that_matches_no_pool_is_blocked_and_nothing_serving_is_touched(
    shape: str,
) -> None:
    good = model()
    driver = ready_deployment(good)
    before = _serving(driver)
    bad = model(BAD_SELECTORS[shape], image="vllm:2")
    assert validate(bad) == []  # it passes validation: only placement can tell

    driver.state = rollout.applied(driver.state, bad)
    assert driver.run() == "rest"
    assert not [e for e in driver.log if e.startswith(("teardown", "start"))], driver.log
    assert _serving(driver) == before
    status = rollout.report(driver.state)
    assert status.phase == "Ready"
    assert "change blocked: the new template cannot be placed" in status.summary
    assert [c.reason for c in status.conditions if c.type == "RolloutBlocked"] == ["NoFit"]
    # A resync does not try again, and restoring the good spec changes nothing that runs.
    driver.state = rollout.resync(driver.state)
    driver.state = rollout.applied(driver.state, good)
    assert driver.run() == "rest"
    assert not [e for e in driver.log if e.startswith(("teardown", "start"))], driver.log
    assert _serving(driver) == before
    assert not [c for c in rollout.report(driver.state).conditions if c.type == "RolloutBlocked"]


def test_a_cluster_selector_that_matches_no_cluster_is_blocked() -> None:
    good = model()
    driver = ready_deployment(good)
    before = _serving(driver)
    driver.state = rollout.applied(driver.state, model(cluster_selector={"region": "mars"}))
    assert driver.run() == "rest"
    assert not [e for e in driver.log if e.startswith(("teardown", "start"))], driver.log
    assert _serving(driver) == before
    assert "no cluster matches clusterSelector region=mars" in rollout.report(driver.state).summary


@pytest.mark.parametrize("surge", [1, 0])
def test_an_image_that_never_becomes_ready_rolls_back(surge: int) -> None:
    good = model(surge=surge)
    driver = ready_deployment(good)
    before = _serving(driver)
    driver.failing_images = {"vllm:broken"}
    driver.state = rollout.applied(driver.state, model(image="vllm:broken", surge=surge))
    assert driver.run() == "rest"
    torn = [e.split()[1] for e in driver.log if e.startswith("teardown")]
    if surge:
        # Surge first: the failed surge replica goes, no serving one ever does.
        assert not set(torn) & before, driver.log
        assert _serving(driver) == before
    else:
        # Unavailable-first: one serving replica at a time (maxUnavailable 1), after a dry
        # placement of its replacement; the failure rolls back and the slot is refilled.
        assert len(set(torn) & before) == 1, driver.log
        assert driver.log.index("dry 2: 1") < driver.log.index(f"teardown {torn[0]}")
        assert len(_serving(driver)) == 2
    status = rollout.report(driver.state)
    assert "rolled back to the last good template" in status.summary
    assert all(r.template_hash == rollout.template_hash(good) for r in status.replicas)


def test_a_cel_syntax_error_is_rejected_at_validation() -> None:
    errors = validate(model("device.attributes[ == "))
    assert errors
    assert "selectors" in str(errors[0])
