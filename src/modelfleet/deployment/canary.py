"""A canary step's verdict: the figures of the new template's replicas (and of the stable ones
in the same window) against ``strategy.canary.analysis``; and where a roll stands in its steps.

Pure: no I/O, no clock, no Temporal. The arithmetic over the engines' counters (deltas, the
histogram's p95) is done where they are read (``contracts.canary_payloads``, in the
``engine.figures`` activity); this only compares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from modelfleet.api.deployments import CanaryAnalysis
from modelfleet.contracts.canary_payloads import GroupFigures, WindowFigures

Outcome = Literal["pass", "fail", "wait"]


@dataclass(frozen=True)
class Verdict:
    """``pass``, ``fail`` (``reason`` says which threshold, with the figures) or ``wait``: not
    enough requests in the window to say (``reason`` says which)."""

    outcome: Outcome
    reason: str


def step_replicas(replicas: int, percent: int) -> int:
    """Replicas on the new template at a step of ``percent``: at least one, rounded up."""
    return max(1, math.ceil(replicas * percent / 100))


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"


def _side(name: str, g: GroupFigures) -> str:
    share = g.error_percent
    errors = f"{g.errors} 5xx" + ("" if share is None else f" ({share:.1f}%)")
    return (
        f"{name} {g.replicas} replica{'s' if g.replicas != 1 else ''}: "
        f"TTFT p95 {_seconds(g.ttft_p95)} over {g.requests} requests, {errors}"
    )


def figures_text(figures: WindowFigures) -> str:
    """The window's figures in one line (the decision log, ``rollout history``)."""
    text = f"{_side('new', figures.canary)}; {_side('stable', figures.stable)}"
    if figures.unread:
        text += f"; not read: {', '.join(figures.unread)}"
    return text


def verdict(figures: WindowFigures, analysis: CanaryAnalysis) -> Verdict:
    """Judge a window: the new replicas' 5xx share first (it needs only requests), then their
    TTFT p95 against ``ttftP95Seconds`` and against ``ttftP95Ratio`` times the stable
    replicas'. Each threshold needs ``minRequests`` in the window on the side it reads; a
    failed threshold fails the step even when another lacks data."""
    new, stable = figures.canary, figures.stable
    least = analysis.min_requests
    waiting: list[str] = []
    if new.requests < least:
        return Verdict(
            "wait",
            f"{new.requests} requests on the new replicas in the window (minRequests {least})",
        )
    share = new.error_percent
    limit = analysis.max_error_percent
    if limit is not None and share is not None and share > limit:
        return Verdict(
            "fail",
            f"the new replicas answered {new.errors} of {new.requests} requests with 5xx "
            f"({share:.1f}%, above maxErrorPercent {limit:g}%)",
        )
    wants_ttft = analysis.ttft_p95_seconds is not None or analysis.ttft_p95_ratio is not None
    if wants_ttft and (new.ttft_count < least or new.ttft_p95 is None):
        waiting.append(f"{new.ttft_count} TTFT observations on the new replicas")
    elif analysis.ttft_p95_seconds is not None:
        assert new.ttft_p95 is not None
        if new.ttft_p95 > analysis.ttft_p95_seconds:
            return Verdict(
                "fail",
                f"the new replicas' TTFT p95 {new.ttft_p95:.3f} s is above ttftP95Seconds "
                f"{analysis.ttft_p95_seconds:g} s",
            )
    if analysis.ttft_p95_ratio is not None and not waiting:
        assert new.ttft_p95 is not None
        if stable.ttft_count < least or stable.ttft_p95 is None:
            waiting.append(f"{stable.ttft_count} TTFT observations on the stable replicas")
        else:
            limit = analysis.ttft_p95_ratio * stable.ttft_p95
            if new.ttft_p95 > limit:
                ratio = new.ttft_p95 / stable.ttft_p95 if stable.ttft_p95 else math.inf
                return Verdict(
                    "fail",
                    f"the new replicas' TTFT p95 {new.ttft_p95:.3f} s is {ratio:.1f}x the stable "
                    f"replicas' {stable.ttft_p95:.3f} s (ttftP95Ratio {analysis.ttft_p95_ratio:g})",
                )
    if waiting:
        return Verdict("wait", f"{'; '.join(waiting)} in the window (minRequests {least})")
    return Verdict("pass", "within every threshold")
