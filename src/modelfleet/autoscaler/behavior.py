"""HPA's ``behavior``: stabilisation windows and rate policies, over the small history an
autoscaler keeps (recent recommendations and recent scale events).

Stabilisation: over the scale-up window the lowest recommendation (including this one) is an
upper bound for growing, and over the scale-down window the highest is a lower bound for
shrinking; the result is the current count pulled into that band. Rate policies: each policy
allows a change relative to the replica count at the start of its period (the current count
minus what was added, plus what was removed, within ``periodSeconds``); ``selectPolicy`` Max
takes the policy allowing the most change, Min the least, Disabled none. Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from modelfleet.api.autoscalers import PolicyType, ResolvedRules, ScalingPolicy, SelectPolicy
from modelfleet.autoscaler.records import History, Recommendation, ScaleEvent


@dataclass(frozen=True)
class Limited:
    replicas: int
    reason: str


def stabilize(
    history: History,
    now: datetime,
    current: int,
    recommended: int,
    up: ResolvedRules,
    down: ResolvedRules,
) -> int:
    """The recommendation after both windows (HPA's ``stabilizeRecommendationWithBehaviors``)."""
    up_cutoff = now - timedelta(seconds=up.stabilization_window_seconds)
    down_cutoff = now - timedelta(seconds=down.stabilization_window_seconds)
    up_bound = recommended
    down_bound = recommended
    for rec in history.recommendations:
        if rec.at > up_cutoff:
            up_bound = min(up_bound, rec.replicas)
        if rec.at > down_cutoff:
            down_bound = max(down_bound, rec.replicas)
    result = current
    result = max(result, up_bound)
    return min(result, down_bound)


def _changes_within(history: History, now: datetime, period: int) -> tuple[int, int]:
    """(replicas added, replicas removed) by scale events in the last ``period`` seconds."""
    cutoff = now - timedelta(seconds=period)
    added = sum(e.change for e in history.events if e.at > cutoff and e.change > 0)
    removed = sum(-e.change for e in history.events if e.at > cutoff and e.change < 0)
    return added, removed


def _policy_limit(policy: ScalingPolicy, start: int, *, up: bool) -> int:
    if policy.type is PolicyType.PODS:
        return start + policy.value if up else start - policy.value
    if up:
        # Rounded up, so a small count can always grow.
        return math.ceil(start * (1 + policy.value / 100))
    # Truncated, as HPA's int32 conversion does: the removed share is rounded up.
    return int(start * (1 - policy.value / 100))


def scale_limit(
    history: History, now: datetime, current: int, rules: ResolvedRules, *, up: bool
) -> int:
    """The furthest one direction's policies let the count move from ``current`` now."""
    if rules.select_policy is SelectPolicy.DISABLED:
        return current
    proposals = []
    for policy in rules.policies:
        added, removed = _changes_within(history, now, policy.period_seconds)
        proposals.append(_policy_limit(policy, current - added + removed, up=up))
    # Min picks the least change: the lowest count up, the highest count down.
    least_change = min if up else max
    most_change = max if up else min
    return (least_change if rules.select_policy is SelectPolicy.MIN else most_change)(proposals)


def limit_rate(
    history: History,
    now: datetime,
    current: int,
    desired: int,
    minimum: int,
    maximum: int,
    up: ResolvedRules,
    down: ResolvedRules,
) -> Limited:
    """The count after rate policies and min/max (HPA's
    ``convertDesiredReplicasWithBehaviorRate``)."""
    if desired > current:
        limit = max(scale_limit(history, now, current, up, up=True), current)
        if current == 0 and up.select_policy is not SelectPolicy.DISABLED:
            # Percent policies cannot grow from zero; scale from zero always gets one replica.
            limit = max(limit, 1)
        if maximum > limit:
            allowed = limit
            why = "ScaleUpLimit: growing faster than the scale-up policies allow"
        else:
            allowed, why = maximum, f"TooManyReplicas: capped at maxReplicas {maximum}"
        if desired > allowed:
            return Limited(allowed, why)
    elif desired < current:
        limit = min(scale_limit(history, now, current, down, up=False), current)
        if minimum < limit:
            allowed = limit
            why = "ScaleDownLimit: shrinking faster than the scale-down policies allow"
        else:
            allowed, why = minimum, f"TooFewReplicas: held at minReplicas {minimum}"
        if desired < allowed:
            return Limited(allowed, why)
    return Limited(desired, "DesiredWithinRange")


def remember(
    history: History,
    now: datetime,
    recommended: int,
    up: ResolvedRules,
    down: ResolvedRules,
) -> History:
    """The history after a decision's recommendation. Entries older than every window and
    period can no longer matter and are dropped, so the history stays small."""
    keep_recs = timedelta(
        seconds=max(up.stabilization_window_seconds, down.stabilization_window_seconds)
    )
    periods = [p.period_seconds for p in (*up.policies, *down.policies)]
    keep_events = timedelta(seconds=max(periods, default=0))
    recs = [r for r in history.recommendations if r.at > now - keep_recs]
    recs.append(Recommendation(at=now, replicas=recommended))
    events = [e for e in history.events if e.at > now - keep_events]
    return History(recommendations=recs, events=events)


def record_scale(history: History, now: datetime, change: int) -> History:
    """The history after the target was scaled by ``change`` replicas (rate policies count it)."""
    if not change:
        return history
    events = [*history.events, ScaleEvent(at=now, change=change)]
    return History(recommendations=list(history.recommendations), events=events)
