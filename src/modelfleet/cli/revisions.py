"""A deployment's rollout history, as ``kubectl rollout history`` shows one: a revision per
distinct replica template, in the order they were rolled out, with the replica count and the
cause. Built from what the ModelDeployment workflow's history records (its start input, accepted
``apply``/``scale`` updates and ``scale`` signals) by a pure function, so it is unit-tested without
Temporal. Only the current run is visible: a continue-as-new starts the history afresh.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from modelfleet.api.deployments import ModelDeployment
from modelfleet.rollout.state import template_hash


@dataclass(frozen=True)
class Change:
    """One recorded change request: a full spec (start, apply) or a replica count (scale)."""

    at: datetime | None
    cause: str
    spec: ModelDeployment | None = None
    replicas: int | None = None


@dataclass
class Revision:
    number: int
    at: datetime | None
    cause: str
    template: str  # template hash
    replicas: int
    spec: ModelDeployment


def revisions(changes: list[Change]) -> list[Revision]:
    """A new revision whenever the template changes; scaling updates the current one."""
    out: list[Revision] = []
    current: ModelDeployment | None = None
    for change in changes:
        if change.spec is not None:
            spec = change.spec
        elif change.replicas is not None and current is not None:
            if not 0 <= change.replicas <= 10:
                continue  # the workflow ignores out-of-range scale signals
            spec = current.model_copy(deep=True)
            spec.spec.replicas = change.replicas
        else:
            continue
        digest = template_hash(spec)
        if out and out[-1].template == digest:
            out[-1].replicas = spec.spec.replicas
            out[-1].spec = spec
        else:
            out.append(
                Revision(len(out) + 1, change.at, change.cause, digest, spec.spec.replicas, spec)
            )
        current = spec
    return out


def undo_spec(history: list[Revision], current: ModelDeployment, to: int | None) -> ModelDeployment:
    """The spec that rolls ``current`` back to revision ``to`` (default: the one before the
    current template), keeping today's replica count and strategy, as kubectl does."""
    if not history:
        raise ValueError("no rollout history recorded for this deployment")
    now = template_hash(current)
    if to is None:
        older = [r for r in history if r.template != now]
        if not older:
            raise ValueError("no previous revision to roll back to")
        target = older[-1]
    else:
        found = [r for r in history if r.number == to]
        if not found:
            raise ValueError(f"revision {to} not found (revisions: 1..{history[-1].number})")
        target = found[0]
    spec = current.model_copy(deep=True)
    spec.spec.template = target.spec.spec.template.model_copy(deep=True)
    return spec
