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
        f"TTFT p95 {_seconds(g.ttft_p95)}, ITL p95 {_seconds(g.itl_p95)} over "
        f"{g.requests} requests, {errors}"
    )


def figures_text(figures: WindowFigures) -> str:
    """The window's figures in one line (the decision log, ``rollout history``)."""
    text = f"{_side('new', figures.canary)}; {_side('stable', figures.stable)}"
    if figures.unread:
        text += f"; not read: {', '.join(figures.unread)}"
    return text


@dataclass(frozen=True)
class _Latency:
    """One latency's p95 on both sides of the window (``counted``: how much of the window's
    traffic it was measured over, against ``minRequests``)."""

    name: str
    key: str
    what: str
    new_counted: int
    new_p95: float | None
    stable_counted: int
    stable_p95: float | None

    def judge(
        self, seconds: float | None, ratio: float | None, least: int, waiting: list[str]
    ) -> Verdict | None:
        """A failed verdict, or None (appending to ``waiting`` what lacks data)."""
        if seconds is None and ratio is None:
            return None
        new = self.new_p95
        if self.new_counted < least or new is None:
            waiting.append(f"{self.new_counted} {self.what} on the new replicas")
            return None
        if seconds is not None and new > seconds:
            return Verdict(
                "fail",
                f"the new replicas' {self.name} p95 {new:.3f} s is above {self.key}Seconds "
                f"{seconds:g} s",
            )
        if ratio is None:
            return None
        stable = self.stable_p95
        if self.stable_counted < least or stable is None:
            waiting.append(f"{self.stable_counted} {self.what} on the stable replicas")
            return None
        if new > ratio * stable:
            times = new / stable if stable else math.inf
            return Verdict(
                "fail",
                f"the new replicas' {self.name} p95 {new:.3f} s is {times:.1f}x the stable "
                f"replicas' {stable:.3f} s ({self.key}Ratio {ratio:g})",
            )
        return None


def verdict(figures: WindowFigures, analysis: CanaryAnalysis) -> Verdict:
    """Judge a window: the new replicas' 5xx share first (it needs only requests), then their
    TTFT p95 against ``ttftP95Seconds`` and against ``ttftP95Ratio`` times the stable
    replicas', then their inter-token latency p95 likewise (``itlP95Seconds``,
    ``itlP95Ratio``). Each threshold needs ``minRequests`` in the window on the side it reads;
    a failed threshold fails the step even when another lacks data."""
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
    ttft = _Latency(
        "TTFT", "ttftP95", "TTFT observations", new.ttft_count, new.ttft_p95,
        stable.ttft_count, stable.ttft_p95,
    )  # fmt: skip
    # One observation per output token after a request's first: the requests that produced
    # them are what minRequests counts.
    itl = _Latency(
        "inter-token latency", "itlP95", "requests with inter-token latencies",
        new.requests if new.itl_p95 is not None else 0, new.itl_p95,
        stable.requests if stable.itl_p95 is not None else 0, stable.itl_p95,
    )  # fmt: skip
    for latency, seconds, ratio in (
        (ttft, analysis.ttft_p95_seconds, analysis.ttft_p95_ratio),
        (itl, analysis.itl_p95_seconds, analysis.itl_p95_ratio),
    ):
        failed = latency.judge(seconds, ratio, least, waiting)
        if failed is not None:
            return failed
    if waiting:
        return Verdict("wait", f"{'; '.join(waiting)} in the window (minRequests {least})")
    return Verdict("pass", "within every threshold")
