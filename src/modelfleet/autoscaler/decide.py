"""The autoscaling decision: HPA's ``reconcileAutoscaler`` as one pure function of the spec, an
observation and the history, returning the decision (inputs, recommendation, desired, applied,
reason) and the history to keep.

Order, as in HPA: a target at 0 replicas with minReplicas > 0 is left alone (someone scaled it
to zero by hand; autoscaling resumes once it has replicas again); a target outside
[minReplicas, maxReplicas] is brought back inside; otherwise every metric proposes a count, the
largest wins, the stabilisation windows and rate policies shape it, and min/max bound it. When
some metrics cannot be read, the others still scale up but never down; when none can, nothing
changes. A target at 0 replicas with minReplicas 0 gets its first replica when requests wait at
the gateway (or a Prometheus total asks for one). Pure: no I/O, no clock.
"""

from __future__ import annotations

from modelfleet.api.autoscalers import (
    MetricSourceType,
    ModelAutoscalerSpec,
    ResolvedRules,
    default_scale_down,
    default_scale_up,
    resolve,
)
from modelfleet.autoscaler.behavior import Limited, limit_rate, remember, stabilize
from modelfleet.autoscaler.calculator import Tolerance, from_total, per_replica
from modelfleet.autoscaler.records import (
    Decision,
    History,
    MetricReading,
    Observation,
    Recommendation,
)

GATEWAY_METRIC = "gateway:requests_waiting"
# Per-replica error messages kept on a decision are cut to this length (the log stays small).
ERROR_CHARS = 200


def rules_of(spec: ModelAutoscalerSpec) -> tuple[ResolvedRules, ResolvedRules]:
    """(scale-up, scale-down) rules with HPA's defaults filled in."""
    return (
        resolve(spec.behavior.scale_up, default_scale_up()),
        resolve(spec.behavior.scale_down, default_scale_down()),
    )


def _readings(
    spec: ModelAutoscalerSpec, obs: Observation, tolerance: Tolerance
) -> list[MetricReading]:
    readings = []
    for metric in spec.metrics:
        label, target = metric.label, metric.target_value
        if metric.type is MetricSourceType.PROMETHEUS:
            proposal = from_total(obs.current, target, obs.totals.get(label), tolerance)
        else:
            ready = {r.name: r.values[label] for r in obs.replicas if r.ready and label in r.values}
            missing = [r.name for r in obs.replicas if r.ready and label not in r.values]
            unready = [r.name for r in obs.replicas if not r.ready]
            proposal = per_replica(obs.current, target, ready, missing, unready, tolerance)
        readings.append(
            MetricReading(
                metric=label,
                target=target,
                value=proposal.value,
                proposal=proposal.replicas,
                note=proposal.note,
            )
        )
    if obs.current == 0 and (obs.waiting_at_gateway is not None or obs.gateway_note):
        readings.append(_gateway_reading(obs.waiting_at_gateway, obs.gateway_note))
    return readings


def _gateway_reading(waiting: float | None, where: str) -> MetricReading:
    """The scale-from-zero trigger: any request held at the gateway asks for one replica."""
    if waiting is None:
        return MetricReading(metric=GATEWAY_METRIC, target=0, note=where or "unknown")
    at = f" at {where}" if where else ""
    return MetricReading(
        metric=GATEWAY_METRIC,
        target=0,
        value=waiting,
        proposal=1 if waiting > 0 else 0,
        note=(
            f"scale from zero: {waiting:g} request(s) waiting{at}"
            if waiting > 0
            else f"no request waiting{at}"
        ),
    )


def decide(
    spec: ModelAutoscalerSpec, obs: Observation, history: History
) -> tuple[Decision, History]:
    """One decision and the history to carry into the next."""
    current, minimum, maximum = obs.current, spec.min_replicas, spec.max_replicas
    ready = sum(1 for r in obs.replicas if r.ready)
    errors = {r.name: r.error[:ERROR_CHARS] for r in obs.replicas if r.ready and r.error}

    def fixed(applied: int, reason: str, readings: list[MetricReading] | None = None) -> Decision:
        return Decision(
            at=obs.at,
            current=current,
            ready=ready,
            metrics=readings or [],
            errors=errors,
            recommended=applied,
            desired=applied,
            applied=applied,
            reason=reason,
        )

    if current == 0 and minimum > 0:
        return (
            fixed(
                0,
                f"ScalingDisabled: the target was scaled to 0 while minReplicas is {minimum}; "
                "autoscaling resumes when it has replicas again",
            ),
            history,
        )
    if current > maximum:
        return fixed(maximum, f"above maxReplicas: {current} -> {maximum}"), history
    if current < minimum:
        return fixed(minimum, f"below minReplicas: {current} -> {minimum}"), history

    if not history.recommendations:
        # A new autoscaler starts with the current count in
        # its window, as HPA does, so it never scales down on its first look.
        history = History(
            recommendations=[Recommendation(at=obs.at, replicas=current)], events=history.events
        )
    up, down = rules_of(spec)
    tolerance = Tolerance(up=up.tolerance, down=down.tolerance)
    readings = _readings(spec, obs, tolerance)
    usable = [r for r in readings if r.proposal is not None]
    broken = [r for r in readings if r.proposal is None]
    recommended = max((r.proposal for r in usable if r.proposal is not None), default=-1)
    if current == 0 and recommended <= 0:
        why = "; ".join(f"{r.metric}: {r.note}" for r in readings) or "no trigger configured"
        return fixed(0, f"at zero replicas, nothing asks for one ({why})", readings), history
    if not usable or (broken and recommended < current):
        problems = "; ".join(f"{r.metric}: {r.note}" for r in broken)
        held = "no metric could be read" if not usable else "would scale down on partial metrics"
        return fixed(current, f"FailedGetMetrics: {held} ({problems}); holding", readings), history

    desired = stabilize(history, obs.at, current, recommended, up, down)
    limited = limit_rate(history, obs.at, current, desired, minimum, maximum, up, down)
    shortfall = ""
    if obs.scheduled is not None and obs.scheduled < current:
        shortfall = f"FleetShortfall: only {obs.scheduled} of {current} replicas are placed"
        if limited.replicas > current:
            # The fleet has not placed what was already asked for: asking for more only queues
            # more unplaceable replicas. The next decision looks again.
            limited = Limited(current, f"{shortfall}; not asking for more")
            shortfall = ""
    winner = max(usable, key=lambda r: r.proposal if r.proposal is not None else -1)
    parts = [f"{winner.metric} asks for {recommended} ({winner.note})"]
    if desired != recommended:
        window = "scale-down" if recommended < current else "scale-up"
        parts.append(f"{window} stabilisation holds {desired}")
    if limited.reason != "DesiredWithinRange":
        parts.append(limited.reason)
    if shortfall:
        # Reported on every decision while it lasts, whatever else bounds the count.
        parts.append(shortfall)
    if broken:
        parts.append("unread: " + ", ".join(r.metric for r in broken))
    verb = (
        f"scale {current} -> {limited.replicas}"
        if limited.replicas != current
        else f"hold at {current}"
    )
    decision = Decision(
        at=obs.at,
        current=current,
        ready=ready,
        metrics=readings,
        errors=errors,
        recommended=recommended,
        desired=desired,
        applied=limited.replicas,
        reason=f"{verb}: " + "; ".join(parts),
    )
    return decision, remember(history, obs.at, recommended, up, down)
