"""The ModelAutoscaler workflow's whole state, carried whole across continue-as-new, and its
input: settings beside the state.

Pure: pydantic models only. Bounded: the decision ring keeps ``MAX_DECISIONS``, the HPA history
is pruned to the longest window by the decision itself (``autoscaler.behavior``).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from modelfleet.api.autoscalers import ModelAutoscaler
from modelfleet.autoscaler.records import Decision, History
from modelfleet.contracts.wire import WireModel

# How many decisions the ring keeps (the `decisions` query and `describe` read them).
MAX_DECISIONS = 120
# Decisions per run before continuing as new: each takes about a dozen history events.
DECISIONS_PER_RUN = 200


class AutoscalerState(WireModel):
    """Everything the autoscaler knows that outlives a run."""

    spec: ModelAutoscaler
    generation: int = 1
    history: History = Field(default_factory=History)
    decisions: list[Decision] = Field(default_factory=list)
    # The count the autoscaler last set (or found and kept): a different count on the target
    # is a manual scale. None: not known yet (a new target).
    last_applied: int | None = None
    # Numbers the scale requests, so a retried activity never scales twice.
    sequence: int = 0
    # When the resource was created: the first run's start (None until that run sets it).
    created: datetime | None = None


class AutoscalerInput(WireModel):
    state: AutoscalerState
    # Settings, passed on unchanged to the next run:
    # continue-as-new after this many decisions in a run (or when the server suggests it).
    decisions_per_run: int = DECISIONS_PER_RUN

    @classmethod
    def of(cls, spec: ModelAutoscaler, **settings: int) -> AutoscalerInput:
        """A first run's input."""
        return cls(state=AutoscalerState(spec=spec), **settings)


def keep_decision(state: AutoscalerState, decision: Decision) -> None:
    """Append to the ring (in place), the oldest falling out past ``MAX_DECISIONS``."""
    state.decisions = [*state.decisions, decision][-MAX_DECISIONS:]
