"""HPA's replica calculator for one metric, with replicas in the place of pods.

For a per-replica metric (HPA's ``Pods`` metric with an ``AverageValue`` target): the ratio of
the Ready replicas' average to the target, a tolerance around 1.0, and HPA's rules for replicas
without a value. A Ready replica whose metric is missing counts as exactly the target when the
others say scale down and as 0 when they say scale up; replicas that are not Ready yet count as
0 on a scale-up and are left out otherwise; and if those assumptions would reverse the
direction, or bring the ratio within the tolerance, nothing changes.

For a total (HPA's ``External`` metric with an ``AverageValue`` target, used for a PromQL
query): ceil(total / target) unless total / (target * current) is within the tolerance.

Pure: arithmetic on the observation, no I/O, no clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Tolerance:
    """HPA's tolerance per direction (0.1 each unless the behavior sets one)."""

    up: float
    down: float

    def within(self, ratio: float) -> bool:
        if ratio > 1.0:
            return ratio - 1.0 <= self.up
        return 1.0 - ratio <= self.down


@dataclass(frozen=True)
class Proposal:
    replicas: int | None
    # The average (per-replica metric) or the total (external metric) the proposal used.
    value: float | None
    note: str

    @property
    def valid(self) -> bool:
        return self.replicas is not None


def per_replica(
    current: int,
    target: float,
    ready_values: dict[str, float],
    missing: list[str],
    unready: list[str],
    tolerance: Tolerance,
) -> Proposal:
    """Replicas for a per-replica average metric (HPA's ``calcPlainMetricReplicas``)."""
    if not ready_values and not missing and not unready:
        return Proposal(None, None, "no replicas to read")
    if not ready_values:
        return Proposal(None, None, "no Ready replica reported this metric")
    average = sum(ready_values.values()) / len(ready_values)
    ratio = average / target
    rebalance_unready = bool(unready) and ratio > 1.0
    if not rebalance_unready and not missing:
        if tolerance.within(ratio):
            return Proposal(current, average, f"ratio {ratio:.2f} within tolerance")
        return Proposal(
            math.ceil(ratio * len(ready_values)), average, f"ratio {ratio:.2f} of the target"
        )
    values = dict(ready_values)
    assumed: list[str] = []
    if missing:
        # Scale-down: a replica we cannot see is assumed at the target; scale-up: at zero.
        fill = target if ratio < 1.0 else 0.0
        values.update(dict.fromkeys(missing, fill))
        assumed.append(f"{len(missing)} without metrics at {'target' if fill else '0'}")
    if rebalance_unready:
        values.update(dict.fromkeys(unready, 0.0))
        assumed.append(f"{len(unready)} not Ready at 0")
    new_ratio = (sum(values.values()) / len(values)) / target
    detail = f"ratio {ratio:.2f}, {new_ratio:.2f} assuming {' and '.join(assumed)}"
    if tolerance.within(new_ratio) or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return Proposal(current, average, f"{detail}: no change")
    replicas = math.ceil(new_ratio * len(values))
    if (new_ratio < 1.0 and replicas > current) or (new_ratio > 1.0 and replicas < current):
        # Counting the assumed replicas would reverse the direction: hold.
        return Proposal(current, average, f"{detail}: no change")
    return Proposal(replicas, average, detail)


def from_total(current: int, target: float, total: float | None, tolerance: Tolerance) -> Proposal:
    """Replicas for a total (HPA's ``GetExternalPerPodMetricReplicas``)."""
    if total is None:
        return Proposal(None, None, "query failed")
    wanted = math.ceil(total / target)
    if current == 0:
        return Proposal(wanted, total, f"total {total:g} at 0 replicas")
    ratio = total / (target * current)
    if tolerance.within(ratio):
        return Proposal(current, total, f"ratio {ratio:.2f} within tolerance")
    return Proposal(wanted, total, f"total {total:g} / target {target:g}")
