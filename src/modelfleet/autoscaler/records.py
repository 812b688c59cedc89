"""What the autoscaling decision reads and returns: one observation of the target's load, the
small history HPA keeps between decisions (recent recommendations and scale events), and the
decision record the workflow keeps and the CLI shows. Pure pydantic models on the wire base
model (they travel in queries and continue-as-new inputs, so unknown fields are ignored).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from modelfleet.contracts.autoscaler_payloads import ReplicaLoad
from modelfleet.contracts.wire import WireModel


class Observation(WireModel):
    """Everything one decision depends on, as read at ``at``."""

    at: datetime
    # The target's spec.replicas (HPA reads the scale subresource's spec, not its status).
    current: int
    replicas: list[ReplicaLoad] = Field(default_factory=list)
    # Prometheus metric label -> the deployment's total load; None when the query failed.
    totals: dict[str, float | None] = Field(default_factory=dict)
    # Replicas the fleet placed; fewer than ``current`` is a capacity shortfall. None: unknown.
    scheduled: int | None = None
    # Requests waiting at the gateway for the target's service: the scale-from-zero trigger.
    # None when unknown (no gateway metric configured or readable).
    waiting_at_gateway: float | None = None
    # Why ``waiting_at_gateway`` is unknown, or where it was read ("" when not asked).
    gateway_note: str = ""


class Recommendation(WireModel):
    at: datetime
    replicas: int


class ScaleEvent(WireModel):
    at: datetime
    # Replicas added (positive) or removed (negative) by one scale.
    change: int


class History(WireModel):
    """HPA's per-autoscaler memory: recent recommendations (stabilisation) and recent scale
    events (rate policies). Pruned to the longest window and period, so it stays small."""

    recommendations: list[Recommendation] = Field(default_factory=list)
    events: list[ScaleEvent] = Field(default_factory=list)


class MetricReading(WireModel):
    """One metric's part of a decision."""

    metric: str
    target: float
    # The per-replica average (Engine) or the total (Prometheus) the proposal came from.
    value: float | None = None
    # Replicas this metric alone asks for; None when the metric could not be used.
    proposal: int | None = None
    note: str = ""


class Decision(WireModel):
    """One decision: its inputs, what the metrics asked for, what stabilisation and the rate
    policies made of it, and why."""

    at: datetime
    current: int
    ready: int = 0
    metrics: list[MetricReading] = Field(default_factory=list)
    # Why a Ready replica's load could not be read, per replica (messages cut short).
    errors: dict[str, str] = Field(default_factory=dict)
    # The largest metric proposal (HPA's per-metric max), before stabilisation.
    recommended: int
    # After the stabilisation windows.
    desired: int
    # After the rate policies and min/max: what the target is scaled to.
    applied: int
    reason: str
    # Set by the workflow: what came of it (scaled, not applied and why, or overridden).
    outcome: str = ""


class AutoscalerStatus(WireModel):
    """What the ModelAutoscaler workflow reports (its ``status`` query)."""

    namespace: str
    name: str
    target: str
    min_replicas: int
    max_replicas: int
    generation: int
    # The target's spec.replicas as last read, and what the autoscaler last set it to.
    current: int | None = None
    last_applied: int | None = None
    # Why the last attempt to decide did not produce a decision ("" when it did).
    problem: str = ""
    last_decision: Decision | None = None
    decisions_kept: int = 0
    deleting: bool = False
    # When the autoscaler was created (kept across the workflow's continue-as-new).
    created: datetime | None = None
