"""How the deployment's state changes when something happens: the user's apply, scale and
delete, a replica's progress, the Fleet's answer to a placement, a released replica, and the
state carried across continue-as-new.

Pure: each function returns a new state and never mutates its input.
"""

from __future__ import annotations

from datetime import datetime

from modelfleet.api.deployments import ModelDeployment
from modelfleet.contracts.fleet_payloads import (
    PlaceRequest,
    PlaceResponse,
)
from modelfleet.contracts.status import ReplicaPhase, ReplicaProgress, ReplicaStep
from modelfleet.rollout.actions import Place
from modelfleet.rollout.decide import BLOCKED, replace_in_place
from modelfleet.rollout.state import (
    AwaitReady,
    DeploymentState,
    Op,
    PlaceFor,
    Stage,
    Start,
    TearDown,
)


def applied(state: DeploymentState, spec: ModelDeployment) -> DeploymentState:
    """A new spec (already validated); the same spec again changes nothing."""
    if spec.to_wire() == state.spec.to_wire():
        return state
    return state.model_copy(
        update={"spec": spec, "generation": state.generation + 1, "dirty": True}
    )


def scaled(state: DeploymentState, replicas: int) -> DeploymentState:
    if replicas == state.spec.spec.replicas:
        return state
    spec = state.spec.model_copy(deep=True)
    spec.spec.replicas = replicas
    return state.model_copy(
        update={"spec": spec, "generation": state.generation + 1, "dirty": True}
    )


def deleted(state: DeploymentState) -> DeploymentState:
    return state.model_copy(update={"deleting": True})


def resync(state: DeploymentState) -> DeploymentState:
    return state.model_copy(update={"dirty": True})


def progressed(state: DeploymentState, progress: ReplicaProgress) -> DeploymentState:
    """A replica reported; a replica that has finished makes the next pass reap it."""
    if progress.name not in state.replicas:
        return state
    s = state.model_copy(deep=True)
    status = s.replicas[progress.name]
    status.phase, status.step, status.reason = progress.phase, progress.step, progress.reason
    status.updated = progress.at
    if progress.phase in (ReplicaPhase.FAILED, ReplicaPhase.TERMINATED) and (
        progress.step is ReplicaStep.DONE
    ):
        s.dirty = True
    return s


def place_request(
    state: DeploymentState, place: Place, request_id: str, now: datetime
) -> PlaceRequest:
    """The Fleet request for ``place``; clusters whose avoidance has expired are not sent."""
    avoid = sorted(c for c, until in state.avoid.items() if until > now)
    return PlaceRequest(
        request_id=request_id,
        deployment=state.spec,
        desired=place.desired,
        avoid_clusters=avoid,
        avoid_reasons={c: r for c, r in state.avoid_reasons.items() if c in avoid},
    )


def placed(state: DeploymentState, response: PlaceResponse) -> DeploymentState:
    """The Fleet answered the pending ``PlaceFor``: queue what its answer asks for."""
    s = state.model_copy(deep=True)
    s.conditions = response.conditions
    s.rejections = response.rejections
    s.summary = response.summary
    for kept in response.kept:
        s.placed[kept.name] = kept
    op = s.ops.pop(0)
    assert isinstance(op, PlaceFor), f"a placement answer while the next op is {op.op}"
    head: list[Op]
    if op.purpose == "surge":
        # Victims named in a surge answer wait for the next pass's reconcile placement.
        if response.placed:
            surged = response.placed[0].name
            head = [
                Start(replica=response.placed[0]),
                AwaitReady(
                    name=surged,
                    paused=f"rollout paused: surge replica {surged} failed",
                    then_replace=op.old,
                ),
            ]
        elif op.fallback:
            head = [*replace_in_place(op.old)]
        else:
            s.summary = BLOCKED
            s.ops.clear()
            return s
    else:
        head = [TearDown(name=v.replica.name, reason=v.reason) for v in response.victims]
        head += [Start(replica=r) for r in response.placed]
        if op.purpose == "fill-await":
            head += [
                AwaitReady(name=r.name, paused=f"rollout paused: replica {r.name} failed")
                for r in response.placed
            ]
    s.ops = [*head, *s.ops]
    return s


def forgotten(state: DeploymentState, name: str) -> DeploymentState:
    """The replica's capacity is released: it leaves the state."""
    s = state.model_copy(deep=True)
    s.replicas.pop(name, None)
    s.placed.pop(name, None)
    return s


def carried(state: DeploymentState) -> DeploymentState:
    """The input of the next run after continue-as-new: it starts with a reconcile pass."""
    return state.model_copy(update={"dirty": True, "stage": Stage.REST, "ops": []})
