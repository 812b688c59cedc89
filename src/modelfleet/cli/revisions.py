"""What ``rollout undo`` applies: the current spec with an older revision's replica template.

The revisions themselves are kept by the ModelDeployment workflow (``rollout.Revision``, a new
one per distinct template, the last ten, carried across continue-as-new) and read with its
``revisions`` query. Pure, so it is unit-tested without Temporal.
"""

from __future__ import annotations

from modelfleet.api.deployments import ModelDeployment
from modelfleet.deployment.decisions import Revision, template_hash
from modelfleet.deployment.state import CHANGE_CAUSE

RESTART_ANNOTATION = "modelfleet.dev/restartedAt"


def undo_spec(
    history: list[Revision], current: ModelDeployment, to: int | None
) -> tuple[ModelDeployment, int]:
    """The spec that rolls ``current`` back to revision ``to`` (default: the one before the
    current template), keeping today's replica count and strategy, as kubectl does; and the
    revision it goes back to, which the spec names as its change cause."""
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
            numbers = f"{history[0].number}..{history[-1].number}"
            raise ValueError(f"revision {to} not found (revisions kept: {numbers})")
        target = found[0]
    spec = current.model_copy(deep=True)
    spec.spec.template = target.spec.spec.template.model_copy(deep=True)
    spec.metadata.annotations[CHANGE_CAUSE] = f"undo (to revision {target.number})"
    return spec, target.number


def restart_spec(current: ModelDeployment, stamp: str) -> ModelDeployment:
    """``rollout restart``: the same template, stamped (so every replica is replaced), with
    ``restart`` as its change cause."""
    spec = current.model_copy(deep=True)
    spec.spec.template.metadata.annotations[RESTART_ANNOTATION] = stamp
    spec.metadata.annotations[CHANGE_CAUSE] = "restart"
    return spec
