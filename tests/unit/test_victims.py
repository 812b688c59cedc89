"""Which replicas a placement removes (issue 29, item 1): the least serving first (failed, then not
Ready, then an older template), ties in Modelplane's order; and what the deployment tells the
placement about its replicas (their standing, the clusters a failed one just left)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from placement_builders import deployment, existing, fleet, simple_cluster
from rollout_builders import T0, spec, state_with, status

from modelfleet.api.deployments import ModelDeployment, ModelReplica
from modelfleet.contracts.status import ReplicaPhase, ReplicaStep
from modelfleet.deployment import decisions as rollout
from modelfleet.deployment.actions import Place
from modelfleet.deployment.decisions import template_hash
from modelfleet.scheduling.placement import Standing, place
from modelfleet.scheduling.snapshot import FleetSnapshot

F, NR, OLD = Standing.FAILED, Standing.NOT_READY, Standing.OLD_TEMPLATE


def _three() -> tuple[ModelDeployment, FleetSnapshot, list[ModelReplica]]:
    """Three replicas: two on ``east`` (the most loaded cluster), one on ``west``."""
    md = deployment(replicas=3)
    replicas = [
        existing(md, "east", 0, name="e0"),
        existing(md, "east", 1, name="e1"),
        existing(md, "west", 0, name="w0"),
    ]
    return md, fleet(simple_cluster("east", 2), simple_cluster("west", 2)), replicas


@pytest.mark.parametrize(
    ("desired", "standing", "removed"),
    [
        # Today's order when every replica serves: the most loaded cluster, its largest index.
        (2, {}, ["e1"]),
        (1, {}, ["e1", "w0"]),
        # Failed or not Ready first, wherever they are.
        (2, {"w0": F}, ["w0"]),
        (2, {"e0": NR}, ["e0"]),
        (2, {"e0": OLD, "w0": NR}, ["w0"]),
        (1, {"e0": OLD, "w0": NR}, ["w0", "e0"]),
        # Failed before not Ready before an older template.
        (1, {"e0": NR, "w0": F}, ["w0", "e0"]),
        (2, {"e0": OLD, "e1": F, "w0": NR}, ["e1"]),
        # An older template before a replica serving the current one.
        (2, {"w0": OLD}, ["w0"]),
        # Ties within a standing keep today's order.
        (1, {"e0": OLD, "w0": OLD}, ["e0", "w0"]),
        (2, {"e0": NR, "e1": NR}, ["e1"]),
        (1, {"e0": F, "e1": F}, ["e1", "e0"]),
        # A name the placement does not hold is ignored.
        (2, {"gone": F}, ["e1"]),
    ],
)
def test_scale_down_removes_the_least_serving_first(
    desired: int, standing: dict[str, Standing], removed: list[str]
) -> None:
    md, snapshot, replicas = _three()
    result = place(md, snapshot, replicas, desired=desired, standing=standing)
    assert [v.replica.name for v in result.victims] == removed
    assert not result.placed
    assert all(v.reason.value == "ScaleDown" for v in result.victims)


def _after_failed_surge() -> rollout.DeploymentState:
    """Two Ready replicas of the good template on ``east``; the surge of a new image on ``west``
    never became Ready and failed (not reaped yet); the deployment rolled back."""
    good, bad = spec(2), spec(2, image="vllm:broken")
    failed = status(bad, "surge", "west", ReplicaPhase.FAILED, ReplicaStep.COMPENSATING)
    failed.reason = "progress deadline passed before leader readiness"
    failed.index = 0
    e1 = status(good, "e1", "east")
    e1.index = 1
    return state_with(
        bad,
        status(good, "e0", "east"),
        e1,
        failed,
        last_good=good,
        held=template_hash(bad),
    )


def test_a_rollback_after_a_failed_surge_removes_the_surge_not_a_healthy_replica() -> None:
    """The chaos run's defect: the scale-back after the rollback removed a healthy replica on the
    most loaded cluster and kept the failed surge."""
    state = _after_failed_surge()
    good, bad = state.last_good, state.spec
    assert good is not None
    request = rollout.place_request(state, Place(desired=2, sequence=1), "r/1", T0)
    assert request.deployment is not None
    assert template_hash(request.deployment) == template_hash(good)  # rolled back
    assert request.standing == {"surge": Standing.FAILED}
    replicas = [
        existing(good, "east", 0, name="e0"),
        existing(good, "east", 1, name="e1"),
        existing(bad, "west", 0, name="surge"),
    ]
    snapshot = fleet(simple_cluster("east", 2), simple_cluster("west", 2))
    result = place(
        request.deployment,
        snapshot,
        replicas,
        desired=request.desired,
        avoid=request.avoid_reasons,
        standing=request.standing,
    )
    assert [v.replica.name for v in result.victims] == ["surge"]
    assert sorted(r.name for r in result.kept) == ["e0", "e1"]
    assert not result.placed


def test_a_replacement_avoids_the_cluster_a_replica_just_failed_on_before_its_reap() -> None:
    state = _after_failed_surge()
    avoid = rollout.avoided(state, T0)
    assert avoid == {
        "west": "replica surge failed: progress deadline passed before leader readiness"
    }
    # A scale-up decided before the reap: the new replica does not go back to west.
    request = rollout.place_request(state, Place(desired=4, sequence=1), "r/1", T0)
    assert request.avoid_clusters == ["west"]
    good = state.last_good
    assert good is not None
    replicas = [
        existing(good, "east", 0, name="e0"),
        existing(good, "east", 1, name="e1"),
        existing(good, "west", 0, name="surge"),
    ]
    snapshot = fleet(
        simple_cluster("east", 2), simple_cluster("west", 2), simple_cluster("north", 1)
    )
    assert request.deployment is not None
    result = place(
        request.deployment,
        snapshot,
        replicas,
        desired=4,
        avoid=dict.fromkeys(request.avoid_clusters, "failed"),
        standing=request.standing,
    )
    assert [r.spec.cluster_name for r in result.placed] == ["north"]


def test_an_expired_avoidance_is_not_sent_and_a_reason_less_one_keeps_the_fleet_default() -> None:
    md = spec(1)
    state = state_with(
        md,
        status(md, "a", "east"),
        avoid={"west": T0 + timedelta(minutes=1), "north": T0 - timedelta(seconds=1)},
    )
    request = rollout.place_request(state, Place(desired=1, sequence=1), "r/1", T0)
    assert request.avoid_clusters == ["west"]
    assert request.avoid_reasons == {}  # the Fleet says "a replica failed here recently"


@pytest.mark.parametrize(
    ("phase", "same_template", "expected"),
    [
        (ReplicaPhase.READY, True, None),
        (ReplicaPhase.READY, False, Standing.OLD_TEMPLATE),
        (ReplicaPhase.PENDING, True, Standing.NOT_READY),
        (ReplicaPhase.PROGRESSING, False, Standing.NOT_READY),
        (ReplicaPhase.DEGRADED, True, Standing.NOT_READY),
        (ReplicaPhase.TERMINATING, True, Standing.NOT_READY),
        (ReplicaPhase.FAILED, True, Standing.FAILED),
        (ReplicaPhase.TERMINATED, False, Standing.FAILED),
    ],
)
def test_standing_of_a_replica(
    phase: ReplicaPhase, same_template: bool, expected: Standing | None
) -> None:
    md, other = spec(1), spec(1, image="vllm:2")
    state = state_with(md, status(md if same_template else other, "a", "east", phase))
    assert rollout.standing(state).get("a") == expected
