"""The deployment's status as users see it (``status`` query, ``get``, the UI), computed from
its state, and what the workflow publishes of it (the memo's held-back reason, the UI's current
details). Pure: may import ``api``, the ``contracts`` models, ``deployment.state`` and
``deployment.slots``."""

from __future__ import annotations

from typing import NamedTuple

from modelfleet.api.meta import Condition
from modelfleet.contracts.status import DeploymentStatus, ReplicaPhase
from modelfleet.deployment.slots import waiting_message
from modelfleet.deployment.state import DeploymentState, effective_spec, template_hash


def report(state: DeploymentState) -> DeploymentStatus:
    current = template_hash(effective_spec(state))
    spec_hash = template_hash(state.spec)
    replicas = [state.replicas[k] for k in sorted(state.replicas)]
    ready = sum(1 for r in replicas if r.phase is ReplicaPhase.READY)
    desired = state.spec.spec.replicas
    conditions = list(state.conditions)
    if desired == 0:
        # Scaled to zero is a state the user asked for, not a failure.
        reason, message = "ScaledToZero", "scaled to 0 replicas: nothing to run"
    else:
        if ready >= desired:
            reason = "AllReplicasReady"
        elif not replicas:
            reason = "NoReplicasScheduled"
        elif any(r.phase is not ReplicaPhase.READY for r in replicas):
            reason = "ModelStarting"
        else:  # the rest could not be placed: ReplicasScheduled says why
            reason = "ReplicasUnscheduled"
        message = f"{ready} of {desired} ready"
    conditions.append(
        Condition(
            type="ReplicasReady",
            status="True" if ready >= desired else "False",
            reason=reason,
            message=message,
        )
    )
    held = bool(state.held) and state.held == template_hash(state.spec)
    summary = state.summary
    if held and state.held_reason not in summary:
        summary = f"{state.held_reason} · {summary}" if summary else state.held_reason
    if held:
        # The change is held back; the status says why until the spec changes again.
        conditions.append(
            Condition(
                type="RolloutBlocked",
                status="True",
                reason="RolledBack" if state.held_reason.startswith("rolled") else "NoFit",
                message=state.held_reason,
            )
        )
    if state.paused:
        # kubectl's condition for a paused deployment.
        conditions.append(
            Condition(
                type="Progressing",
                status="Unknown",
                reason="DeploymentPaused",
                message="rollout paused: no new template is rolled out until it is resumed",
            )
        )
    waiting = waiting_message(state)
    if waiting and not state.deleting:
        # Admission control (issue 22): the pass waits for a rollout slot before it places.
        conditions.append(
            Condition(
                type="Progressing", status="False", reason="WaitingForRolloutSlot", message=waiting
            )
        )
        summary = f"{waiting} · {summary}" if summary else waiting
    unplaceable = len(replicas) < desired and any(
        c.type == "ReplicasScheduled" and c.status == "False" for c in state.conditions
    )
    if state.deleting:
        phase = "Deleting"
    elif state.paused:
        phase = "Paused"
    elif ready >= desired and all(r.template_hash == current for r in replicas):
        phase = "Ready"
    elif any(r.phase is ReplicaPhase.FAILED for r in replicas):
        phase = "Degraded"
    elif unplaceable and ready == 0:
        # The scheduler found no room: nothing is on its way, as a Pod the scheduler cannot
        # place is Pending. The summary (MESSAGE) carries the scheduler's reasons.
        phase = "Pending"
    elif unplaceable:
        phase = "Degraded"
    elif waiting:
        # Only what would be Progressing: a Pending one keeps the scheduler's word, a Degraded
        # one its failure, while the condition says it also waits for a slot to try again.
        phase = "Waiting"
    else:
        phase = "Progressing"
    return DeploymentStatus(
        namespace=state.spec.namespace,
        name=state.spec.name,
        generation=state.generation,
        desired=desired,
        scheduled=len(replicas),
        ready=ready,
        # Paused, as kubectl counts it: up to date is the spec's template, not the pinned one.
        updated=sum(
            1 for r in replicas if r.template_hash == (spec_hash if state.paused else current)
        ),
        phase=phase,
        conditions=conditions,
        replicas=replicas,
        rejections=state.rejections,
        summary=summary,
        deleting=state.deleting,
        paused=state.paused,
        created=state.created,
        observed_generation=state.observed,
    )


def held_back(state: DeploymentState) -> str:
    """Why the deployment runs its last good template instead of the spec's ("": it does not),
    with the figures: the memo's ``heldBack``."""
    held = state.held and state.held == template_hash(state.spec)
    return state.held_reason if held else ""


def details(status: DeploymentStatus) -> str:
    """The workflow's current details in the Temporal UI: phase, ready count, summary."""
    return f"**{status.phase}** · {status.ready}/{status.desired} ready" + (
        f"\n\n{status.summary}" if status.summary else ""
    )


class SearchValues(NamedTuple):
    """What a deployment publishes as search attributes: ``get deployments`` builds its rows
    from them (visibility), so a list never waits on a busy deployment's workflow task."""

    phase: str
    clusters: tuple[str, ...]
    ready: int
    desired: int
    updated: int


def search_values(status: DeploymentStatus) -> SearchValues:
    """The published values of ``status``; the workflow upserts them only when they change
    (one history event per change, whichever of them changed)."""
    return SearchValues(
        phase=status.phase,
        clusters=tuple(sorted({r.cluster for r in status.replicas})),
        ready=status.ready,
        desired=status.desired,
        updated=status.updated,
    )
