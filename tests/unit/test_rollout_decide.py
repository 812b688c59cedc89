"""One decision at a time: given a state and the time, the next action and the state after it."""

from __future__ import annotations

from datetime import timedelta

from rollout_builders import T0, replica, reported, spec, state_with, status

from modelfleet.contracts.fleet_payloads import PlaceResponse
from modelfleet.contracts.status import ReplicaPhase, ReplicaStep
from modelfleet.deployment import decisions as rollout
from modelfleet.deployment.decisions import DeploymentState, Stage
from modelfleet.deployment.state import PlaceFor, Reap, Roll, TearDown

OLD = spec(2, image="vllm:1")
NEW = spec(2, image="vllm:2")


def passing(state: DeploymentState) -> DeploymentState:
    """The state at the start of a reconcile pass."""
    return rollout.woke(state.model_copy(update={"dirty": True}), T0)


def step(state: DeploymentState) -> tuple[DeploymentState, rollout.Action]:
    return rollout.next_action(state, T0)


def answer(state: DeploymentState, **response: object) -> DeploymentState:
    return rollout.placed(state, PlaceResponse.model_validate(response))


def test_an_idle_deployment_rests_until_something_changes() -> None:
    state = state_with(OLD, status(OLD, "a", "east"), dirty=False)
    state, action = step(state)
    assert action == rollout.Rest(timeout=rollout.RESYNC_INTERVAL)
    assert not rollout.rest_over(state)
    assert rollout.rest_over(rollout.resync(state))
    assert rollout.rest_over(rollout.scaled(state, 3))
    assert not rollout.rest_over(rollout.scaled(state, 2))  # the same count is no change
    assert rollout.rest_over(rollout.deleted(state))


def test_a_pass_reaps_then_places_then_rolls() -> None:
    state = passing(state_with(OLD))
    assert state.stage is Stage.PASS
    assert not state.dirty
    assert [type(op) for op in state.ops] == [Reap, PlaceFor, Roll]
    state, action = step(state)
    assert action == rollout.Place(desired=2, sequence=1)


def test_next_action_never_mutates_its_input() -> None:
    before = passing(state_with(OLD, status(OLD, "a", "east", step=ReplicaStep.DONE)))
    frozen = before.model_dump()
    rollout.next_action(before, T0)
    assert before.model_dump() == frozen


def test_a_failed_replica_is_reaped_and_its_cluster_avoided_until_expiry() -> None:
    failed = status(
        OLD, "a", "east", ReplicaPhase.FAILED, ReplicaStep.DONE, reason="ImagePullBackOff"
    )
    ended = status(OLD, "b", "west", ReplicaPhase.TERMINATED, ReplicaStep.DONE)
    running = status(OLD, "c", "west", ReplicaPhase.PROGRESSING, ReplicaStep.WORKLOADS)
    state = passing(state_with(OLD, failed, ended, running))
    state, action = step(state)
    assert action == rollout.Forget(name="a")
    assert state.avoid == {"east": T0 + rollout.AVOID_AFTER_FAILURE}
    assert state.avoid_reasons == {"east": "replica a failed: ImagePullBackOff"}
    state = rollout.forgotten(state, "a")
    state, action = step(state)
    assert action == rollout.Forget(name="b")  # ended by itself, not a failure: no avoidance
    state = rollout.forgotten(state, "b")
    assert state.avoid.keys() == {"east"}
    state, action = step(state)
    assert isinstance(action, rollout.Place)  # "c" still runs: nothing more to reap
    assert set(state.replicas) == {"c"}

    request = rollout.place_request(state, action, "id", T0 + timedelta(minutes=1))
    assert request.avoid_clusters == ["east"]
    assert request.avoid_reasons == {"east": "replica a failed: ImagePullBackOff"}
    later = T0 + rollout.AVOID_AFTER_FAILURE + timedelta(seconds=1)
    assert rollout.place_request(state, action, "id", later).avoid_clusters == []
    # The next pass after expiry forgets the avoidance altogether.
    rested = state.model_copy(update={"stage": Stage.REST, "ops": []})
    assert rollout.woke(rested, later).avoid == {}


def test_a_serving_replica_is_signalled_then_awaited_then_released() -> None:
    state = state_with(OLD, status(OLD, "a", "east"))
    state = state.model_copy(
        update={"stage": Stage.PASS, "ops": [TearDown(name="a", reason="scaled down")]}
    )
    state, action = step(state)
    assert action == rollout.SignalTeardown(name="a")
    assert state.replicas["a"].phase is ReplicaPhase.TERMINATING
    assert state.replicas["a"].reason == "scaled down"
    state, action = step(state)
    assert action == rollout.Wait(name="a", until="done")
    assert not rollout.wait_over(state, action)
    state = reported(state, "a", ReplicaPhase.TERMINATED, ReplicaStep.DONE)
    assert rollout.wait_over(state, action)
    state, action = step(state)
    assert action == rollout.Forget(name="a")


def test_a_finished_or_unknown_replica_is_only_released() -> None:
    failed = status(OLD, "a", "east", ReplicaPhase.FAILED, ReplicaStep.COMPENSATING)
    state = state_with(OLD, failed).model_copy(
        update={
            "stage": Stage.PASS,
            "ops": [TearDown(name="a", reason="x"), TearDown(name="ghost", reason="x")],
        }
    )
    state, action = step(state)
    assert action == rollout.Forget(name="a")
    state, action = step(rollout.forgotten(state, "a"))
    assert action == rollout.Forget(name="ghost")


def test_victims_are_torn_down_before_new_replicas_start() -> None:
    state = passing(state_with(OLD, status(OLD, "a", "east"), status(OLD, "b", "west")))
    state, _ = step(state)
    victim = {"replica": replica(OLD, "b", "west"), "reason": "cluster west drained"}
    new = replica(OLD, "c", "north")
    state = answer(state, victims=[victim], placed=[new], summary="moved b")
    assert state.summary == "moved b"
    state, action = step(state)
    assert action == rollout.SignalTeardown(name="b")
    assert state.replicas["b"].reason == "cluster west drained"
    state, action = step(released(state, "b"))
    assert isinstance(action, rollout.StartReplica)
    assert action.replica.name == "c"
    assert state.replicas["c"].phase is ReplicaPhase.PENDING
    assert state.replicas["c"].template_hash == rollout.template_hash(OLD)
    assert state.placed["c"] == new
    state, action = step(state)
    assert action == rollout.EndPass()  # nothing outdated: no roll
    assert state.stage is Stage.REST


def released(state: DeploymentState, name: str) -> DeploymentState:
    """Replica ``name``, told to tear down, reports done and is released."""
    state = reported(state, name, ReplicaPhase.TERMINATED, ReplicaStep.DONE)
    state, action = step(state)
    assert action == rollout.Forget(name=name)
    return rollout.forgotten(state, name)


def rolling(*replicas: object, md: object = NEW) -> DeploymentState:
    """A pass after a template change, past its reconcile placement (which changed nothing)."""
    state = passing(state_with(md, *replicas))  # type: ignore[arg-type]
    state, _ = step(state)
    return answer(state)


def test_a_replica_that_is_not_serving_is_replaced_first_and_in_place() -> None:
    state = rolling(
        status(OLD, "a", "east"),
        status(OLD, "b", "west", ReplicaPhase.DEGRADED, ReplicaStep.SERVING),
    )
    state, action = step(state)
    assert action == rollout.SignalTeardown(name="b")
    assert state.replicas["b"].reason == "template changed"


def test_surge_places_one_more_then_replaces_the_old_one_once_ready() -> None:
    state = rolling(status(OLD, "a", "east"), status(OLD, "b", "west"))
    state, action = step(state)
    assert action == rollout.Place(desired=3, sequence=2)
    state = answer(state, placed=[replica(NEW, "c", "north")])
    state, action = step(state)
    assert isinstance(action, rollout.StartReplica)
    state, action = step(state)
    assert action == rollout.Wait(name="c", until="settled")
    state = reported(state, "c", ReplicaPhase.READY, ReplicaStep.SERVING)
    state, action = step(state)
    assert action == rollout.SignalTeardown(name="a")
    assert state.replicas["a"].reason == "replaced by a newer replica (surge)"
    assert state.replicas["b"].phase is ReplicaPhase.READY  # one at a time


def test_a_surge_that_fails_pauses_with_the_old_replicas_serving() -> None:
    state = rolling(status(OLD, "a", "east"), status(OLD, "b", "west"))
    state, _ = step(state)
    state = answer(state, placed=[replica(NEW, "c", "north")])
    state, _ = step(state)
    state = reported(state, "c", ReplicaPhase.FAILED, ReplicaStep.COMPENSATING)
    state, action = step(state)
    assert action == rollout.EndPass()
    assert state.summary == "rollout paused: surge replica c failed"
    assert {n: s.phase for n, s in state.replicas.items() if n != "c"} == {
        "a": ReplicaPhase.READY,
        "b": ReplicaPhase.READY,
    }


def test_no_room_to_surge_replaces_unavailable_first_and_waits_for_the_replacement() -> None:
    state = rolling(status(OLD, "a", "east"), status(OLD, "b", "west"))
    state, _ = step(state)
    state = answer(state, summary="no room")
    state, action = step(state)
    # The replacement is placed dry first, with "a" not counted.
    assert action == rollout.DryPlace(desired=2, without=["a"])
    state = rollout.dry_placed(state, PlaceResponse(placed=[replica(NEW, "x", "east")]))
    state, action = step(state)
    assert action == rollout.SignalTeardown(name="a")
    assert state.replicas["a"].reason == "replaced (no room to surge)"
    state, action = step(released(state, "a"))
    assert action == rollout.Place(desired=2, sequence=3)
    state = answer(state, placed=[replica(NEW, "c", "east")])
    state, action = step(state)
    assert isinstance(action, rollout.StartReplica)
    state, action = step(state)
    assert action == rollout.Wait(name="c", until="settled")


def test_max_surge_zero_replaces_in_place_without_asking_for_a_surge() -> None:
    md = spec(2, image="vllm:2", surge=0, unavailable=1)
    state = rolling(status(OLD, "a", "east"), status(OLD, "b", "west"), md=md)
    state, action = step(state)
    assert action == rollout.DryPlace(desired=2, without=["a"])
    state = rollout.dry_placed(state, PlaceResponse(placed=[replica(md, "x", "east")]))
    state, action = step(state)
    assert action == rollout.SignalTeardown(name="a")


def test_max_surge_zero_keeps_serving_when_the_replacement_would_not_fit() -> None:
    md = spec(2, image="vllm:2", surge=0, unavailable=1)
    state = rolling(status(OLD, "a", "east"), status(OLD, "b", "west"), md=md)
    state, action = step(state)
    assert isinstance(action, rollout.DryPlace)
    state = rollout.dry_placed(
        state, PlaceResponse(rejections={"east": "no pool satisfies device gpu"})
    )
    state, action = step(state)
    assert action == rollout.EndPass()
    assert "no room for a replacement of a" in state.summary
    assert "east: no pool satisfies device gpu" in state.summary
    assert all(s.phase is ReplicaPhase.READY for s in state.replicas.values())


def test_max_unavailable_zero_and_no_room_blocks_with_everything_serving() -> None:
    md = spec(2, image="vllm:2", surge=1, unavailable=0)
    state = rolling(status(OLD, "a", "east"), status(OLD, "b", "west"), md=md)
    state, action = step(state)
    assert isinstance(action, rollout.Place)
    state = answer(state, summary="no room")
    state, action = step(state)
    assert action == rollout.EndPass()
    assert state.summary == "rollout blocked: no room to surge and maxUnavailable is 0"
    assert all(s.phase is ReplicaPhase.READY for s in state.replicas.values())


def test_max_surge_and_max_unavailable_zero_blocks_without_asking_the_fleet() -> None:
    md = spec(2, image="vllm:2", surge=0, unavailable=0)
    state = rolling(status(OLD, "a", "east"), status(OLD, "b", "west"), md=md)
    state, action = step(state)
    assert action == rollout.EndPass()
    assert state.summary.startswith("rollout blocked")
    assert state.sequence == 1  # only the reconcile placement was asked for


def test_scale_during_a_rollout_keeps_rolling_and_the_next_pass_places_the_new_count() -> None:
    state = rolling(status(OLD, "a", "east"), status(OLD, "b", "west"))
    state, _ = step(state)  # asks for the surge
    state = rollout.scaled(state, 3)
    assert state.dirty
    assert state.generation == 2
    state = answer(state, placed=[replica(NEW, "c", "north")])
    state, action = step(state)
    assert isinstance(action, rollout.StartReplica)  # the roll goes on: the template is the same
    state = reported(state, "c", ReplicaPhase.READY, ReplicaStep.SERVING)
    state, action = step(state)
    assert action == rollout.SignalTeardown(name="a")
    # The pass that the scale asked for places three.
    state = state.model_copy(update={"stage": Stage.REST, "ops": []})
    state, action = step(rollout.woke(state, T0))
    assert action == rollout.Place(desired=3, sequence=state.sequence)


def _apply_during_a_surge() -> tuple[DeploymentState, rollout.Action]:
    """One replica on OLD rolls to NEW; while the surge is placed the user applies NEWEST, so
    the surge replica runs NEWEST. Returns what comes after the old replica is gone."""
    state = rolling(status(OLD, "a", "east"), md=spec(1, image="vllm:2"))
    state, _ = rollout.next_action(state, T0)  # the surge: the roll targets NEW
    newest = spec(1, image="vllm:3")
    state = rollout.applied(state, newest)
    state = answer(state, placed=[replica(newest, "c", "north")])
    state, _ = rollout.next_action(state, T0)  # starts c on NEWEST
    assert state.replicas["c"].template_hash == rollout.template_hash(newest)
    state = reported(state, "c", ReplicaPhase.READY, ReplicaStep.SERVING)
    state, action = rollout.next_action(state, T0)
    assert action == rollout.SignalTeardown(name="a")
    state = reported(state, "a", ReplicaPhase.TERMINATED, ReplicaStep.DONE)
    state, action = rollout.next_action(state, T0)
    assert action == rollout.Forget(name="a")
    return rollout.next_action(rollout.forgotten(state, "a"), T0)


def test_an_apply_during_a_roll_ends_it_instead_of_replacing_the_newest_replica() -> None:
    state, action = _apply_during_a_surge()
    assert action == rollout.EndPass()
    assert state.dirty  # the apply asked for another pass
    state, _ = rollout.next_action(rollout.woke(state, T0), T0)
    state = answer(state, kept=[replica(state.spec, "c", "north")])
    state, action = rollout.next_action(state, T0)
    assert action == rollout.EndPass()  # c already runs the newest template: nothing to roll


def test_delete_tears_down_every_replica_in_name_order_then_finishes() -> None:
    state = state_with(OLD, status(OLD, "b", "west"), status(OLD, "a", "east"), dirty=False)
    state = rollout.deleted(state)
    assert rollout.report(state).phase == "Deleting"
    state, action = step(state)
    assert action == rollout.SignalTeardown(name="a")
    assert state.stage is Stage.DELETE
    assert state.replicas["a"].reason == "deployment deleted"
    for name in ("a", "b"):
        if name == "b":
            state, action = step(state)
            assert action == rollout.SignalTeardown(name="b")
        state = reported(state, name, ReplicaPhase.TERMINATED, ReplicaStep.DONE)
        state, action = step(state)
        assert action == rollout.Forget(name=name)
        state = rollout.forgotten(state, name)
    state, action = step(state)
    assert action == rollout.Finish()


def test_delete_during_a_pass_stops_the_roll() -> None:
    state = rolling(status(OLD, "a", "east"))
    state = rollout.deleted(state)
    state, action = step(state)
    assert action == rollout.EndPass()
    state, action = step(state)
    assert action == rollout.SignalTeardown(name="a")


def test_continue_as_new_input_starts_with_a_pass() -> None:
    state = state_with(OLD, status(OLD, "a", "east"), dirty=False, sequence=7)
    carried = rollout.carried(state)
    assert carried.dirty
    assert carried.stage is Stage.REST
    assert carried.sequence == 7
    round_trip = DeploymentState.model_validate_json(passing(state).model_dump_json())
    assert round_trip == passing(state)


def test_status_reports_progressing_until_every_replica_runs_the_new_template() -> None:
    state = state_with(NEW, status(OLD, "a", "east"), status(NEW, "b", "west"))
    report = rollout.report(state)
    assert (report.phase, report.ready, report.updated) == ("Progressing", 2, 1)
    done = state_with(NEW, status(NEW, "a", "east"), status(NEW, "b", "west"))
    assert rollout.report(done).phase == "Ready"
