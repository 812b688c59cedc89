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
from modelfleet.contracts.status import ReplicaPhase, ReplicaProgress, ReplicaStep
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
            request.deployment,
            self.snapshot,
            existing,
            desired=request.desired,
            avoid=avoid,
            standing=request.standing,
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


# --- issue 29: victims by health and template; a change blocked by its cluster --------------

EU = {"region": "eu"}


def _one_node(name: str) -> Any:
    return cluster(name, pool("gpu", 1, gpu(memory="80Gi")), labels=EU)


def _serving_on_north_and_west() -> tuple[Driver, ModelDeployment]:
    """Two Ready replicas of the good template on north and west; then east joins the fleet
    (so a surge can only go to east, the cluster whose name sorts first)."""
    good = model()
    snapshot = fleet(_one_node("north"), _one_node("west"))
    driver = Driver(DeploymentState(spec=good), SchedulerFleet(snapshot))  # type: ignore[arg-type]
    assert driver.run() == "rest"
    assert sorted(s.cluster for s in driver.state.replicas.values()) == ["north", "west"]
    # A new snapshot: the scheduler caches its index on the one it saw.
    driver.fleet.snapshot = fleet(_one_node("east"), *snapshot.clusters)  # type: ignore[attr-defined]
    driver.log.clear()
    driver.now += timedelta(minutes=5)
    return driver, good


def _surge_on_east(driver: Driver) -> str:
    """Apply a new image; its surge goes to east and hangs there."""
    driver.behaviour = {"east": "hang"}
    driver.state = rollout.applied(driver.state, model(image="vllm:2"))
    waiting = driver.run()
    assert waiting.startswith("wait "), driver.log
    surge = waiting.split()[1]
    assert driver.state.replicas[surge].cluster == "east"
    return surge


def _fail(driver: Driver, name: str, reason: str, *, done: bool, infra: bool = False) -> None:
    step = ReplicaStep.DONE if done else ReplicaStep.COMPENSATING
    progress = ReplicaProgress(
        name=name,
        phase=ReplicaPhase.FAILED,
        step=step,
        reason=reason,
        at=driver.now,
        infrastructure=infra,
    )
    driver.state = rollout.progressed(driver.state, progress)


def test_a_rollback_after_a_failed_surge_never_removes_a_healthy_replica() -> None:
    """The chaos run: the surge failed at its deadline and was still cleaning up when the
    rollback's placement scaled back to 2; that removed the healthy replica on west (the
    largest cluster name) and kept the failed surge."""
    driver, good = _serving_on_north_and_west()
    before = _serving(driver)
    surge = _surge_on_east(driver)
    driver.log.clear()
    _fail(driver, surge, "progress deadline passed before leader readiness", done=False)
    assert driver.run() == "rest"
    assert "rolled back to the last good template" in rollout.report(driver.state).summary
    torn = [e.split()[1] for e in driver.log if e.startswith("teardown")]
    assert not set(torn) & before, driver.log
    assert _serving(driver) == before
    # The failed surge finishes its cleanup and is reaped; nothing replaces it on east.
    _fail(driver, surge, "progress deadline passed before leader readiness", done=True)
    assert driver.run() == "rest"
    assert surge not in driver.state.replicas
    assert _serving(driver) == before
    assert not [e for e in driver.log if e.startswith("start")], driver.log
    assert all(
        s.template_hash == rollout.template_hash(good) for s in driver.state.replicas.values()
    )


def test_a_surge_blocked_by_its_cluster_is_placed_elsewhere_not_rolled_back() -> None:
    """The surge sat at ensure-namespace on a cluster that went dark until the deadline: the
    cluster, not the change, failed. The change goes on elsewhere (east avoided) and finishes;
    nothing is rolled back and no serving replica leaves before its replacement is Ready."""
    driver, _ = _serving_on_north_and_west()
    new = model(image="vllm:2")
    surge = _surge_on_east(driver)
    reason = "ensure-namespace on cluster east did not finish: the cluster's API server did not"
    _fail(driver, surge, reason, done=False, infra=True)
    driver.behaviour = {}
    assert driver.run() == "rest"
    _fail(driver, surge, reason, done=True, infra=True)
    assert driver.run() == "rest"
    assert driver.state.held == "", driver.state.summary
    assert "rolled back" not in rollout.report(driver.state).summary
    serving = {s.cluster: s.template_hash for s in driver.state.replicas.values()}
    assert len(_serving(driver)) == 2
    assert set(serving.values()) == {rollout.template_hash(new)}
    assert "east" not in serving
    assert any("blocked by its cluster" in e.message for e in driver.state.log)
    # Every placement after the failure kept east out.
    failed_at = next(i for i, r in enumerate(driver.fleet.requests) if "east" in r.avoid_clusters)
    assert all("east" in r.avoid_clusters for r in driver.fleet.requests[failed_at:])


def test_a_change_blocked_by_every_cluster_it_tries_rolls_back_after_the_retries() -> None:
    """Bounded: past ``MAX_CLUSTER_RETRIES`` replacements blocked by their clusters, the change
    rolls back like any failed replacement, with the plain reason."""
    good = model()
    names = ["c1", "c2", "c3", "c4", "c5"]
    snapshot = fleet(_one_node("north"), _one_node("west"))
    driver = Driver(DeploymentState(spec=good), SchedulerFleet(snapshot))  # type: ignore[arg-type]
    assert driver.run() == "rest"
    before = _serving(driver)
    driver.fleet.snapshot = fleet(  # type: ignore[attr-defined]
        *(_one_node(n) for n in names), *snapshot.clusters
    )
    driver.now += timedelta(minutes=5)
    driver.behaviour = dict.fromkeys(names, "hang")
    driver.state = rollout.applied(driver.state, model(image="vllm:2"))
    tried = []
    for _ in range(rollout.MAX_CLUSTER_RETRIES + 1):
        waiting = driver.run()
        assert waiting.startswith("wait "), driver.log
        surge = waiting.split()[1]
        tried.append(driver.state.replicas[surge].cluster)
        _fail(
            driver,
            surge,
            f"stage-claims on cluster {tried[-1]} did not finish",
            done=False,
            infra=True,
        )
    assert driver.run() == "rest"
    assert tried == names[: rollout.MAX_CLUSTER_RETRIES + 1]
    summary = rollout.report(driver.state).summary
    assert "rolled back to the last good template" in summary
    assert f"stage-claims on cluster {tried[-1]} did not finish" in summary
    assert _serving(driver) == before
