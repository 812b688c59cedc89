"""The payloads of a canary step's reading (``engine.figures``) and the pure arithmetic over
them: counter deltas over the window, a histogram's p95 as Prometheus' ``histogram_quantile``
interpolates it, and the figures of the new and the stable replicas.

The activity does this arithmetic (it is called from it), so the workflow only keeps a
baseline (a few numbers per replica) and the figures. Layer rule: pure pydantic and arithmetic.
"""

from __future__ import annotations

import math

from modelfleet.contracts.wire import WireModel

# The upper bound of the last bucket, as Prometheus names it.
INF = "+Inf"


class EngineCounts(WireModel):
    """What one replica's serving engines had counted at one moment, summed over its pods:
    their TTFT and inter-token latency histograms (cumulative counts by upper bound ``le``, as
    exported) and their inference requests answered, of which 5xx."""

    ttft_buckets: dict[str, float] = {}
    itl_buckets: dict[str, float] = {}
    requests: float = 0.0
    errors: float = 0.0


class FiguresRequest(WireModel):
    """Read the replicas' engines (name -> cluster); with a ``baseline`` (the reading at the
    window's start) also compute the window's figures for ``canary`` against ``stable``."""

    namespace: str
    replicas: dict[str, str]
    baseline: dict[str, EngineCounts] | None = None
    canary: list[str] = []
    stable: list[str] = []


class GroupFigures(WireModel):
    """One side of a canary analysis over a window: requests answered, of which 5xx, TTFT
    observations and their p95, inter-token latency observations (one per output token after
    a request's first) and their p95 (None: no observation)."""

    replicas: int = 0
    requests: int = 0
    errors: int = 0
    ttft_count: int = 0
    ttft_p95: float | None = None
    itl_count: int = 0
    itl_p95: float | None = None

    @property
    def error_percent(self) -> float | None:
        return 100 * self.errors / self.requests if self.requests else None


class WindowFigures(WireModel):
    """The window's figures of the new template's replicas and of the stable ones; ``unread``
    names replicas whose engines could not be read (at the start or the end)."""

    canary: GroupFigures = GroupFigures()
    stable: GroupFigures = GroupFigures()
    unread: list[str] = []


class FiguresReading(WireModel):
    """Each readable replica's counts now, why the others could not be read, and with a
    baseline the window's figures."""

    counts: dict[str, EngineCounts] = {}
    errors: dict[str, str] = {}
    figures: WindowFigures | None = None


def _bound(le: str) -> float:
    return math.inf if le == INF else float(le)


def delta(before: EngineCounts | None, after: EngineCounts) -> EngineCounts:
    """What was counted between two readings of one replica. A counter lower than before is a
    restarted engine (Prometheus' counter reset): it counted ``after`` since."""
    if before is None:
        return after
    reset = (
        after.requests < before.requests
        or _went_down(before.ttft_buckets, after.ttft_buckets)
        or _went_down(before.itl_buckets, after.itl_buckets)
    )
    if reset:
        return after
    return EngineCounts(
        ttft_buckets=_minus(after.ttft_buckets, before.ttft_buckets),
        itl_buckets=_minus(after.itl_buckets, before.itl_buckets),
        requests=after.requests - before.requests,
        errors=max(0.0, after.errors - before.errors),
    )


def _went_down(before: dict[str, float], after: dict[str, float]) -> bool:
    return any(after.get(le, 0.0) < count for le, count in before.items())


def _minus(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {le: count - before.get(le, 0.0) for le, count in after.items()}


def _bucket_sum(histograms: list[dict[str, float]]) -> dict[str, float]:
    buckets: dict[str, float] = {}
    for histogram in histograms:
        for le, n in histogram.items():
            buckets[le] = buckets.get(le, 0.0) + n
    return buckets


def summed(counts: list[EngineCounts]) -> EngineCounts:
    return EngineCounts(
        ttft_buckets=_bucket_sum([c.ttft_buckets for c in counts]),
        itl_buckets=_bucket_sum([c.itl_buckets for c in counts]),
        requests=sum(c.requests for c in counts),
        errors=sum(c.errors for c in counts),
    )


def quantile(q: float, buckets: dict[str, float]) -> float | None:
    """``histogram_quantile(q, ...)`` over cumulative buckets: linear interpolation inside the
    bucket holding the rank (from 0 for the first bucket); a rank in the ``+Inf`` bucket is the
    highest finite bound. None without observations."""
    ordered = sorted(((_bound(le), n) for le, n in buckets.items()), key=lambda b: b[0])
    if not ordered or ordered[-1][1] <= 0:
        return None
    total = ordered[-1][1]
    rank = q * total
    lower, below = 0.0, 0.0
    for bound, count in ordered:
        if count >= rank:
            if math.isinf(bound):
                return lower
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


def group(counts: list[EngineCounts]) -> GroupFigures:
    total = summed(counts)
    return GroupFigures(
        replicas=len(counts),
        requests=int(total.requests),
        errors=int(total.errors),
        ttft_count=int(max(total.ttft_buckets.values(), default=0.0)),
        ttft_p95=quantile(0.95, total.ttft_buckets),
        itl_count=int(max(total.itl_buckets.values(), default=0.0)),
        itl_p95=quantile(0.95, total.itl_buckets),
    )


def window_figures(
    baseline: dict[str, EngineCounts],
    now: dict[str, EngineCounts],
    canary: list[str],
    stable: list[str],
) -> WindowFigures:
    """The figures of ``canary`` and ``stable`` between ``baseline`` and ``now``; a replica
    missing from either reading is unread and left out (counted since it started, it would
    carry requests from before the window)."""
    read = {n for n in now if n in baseline}
    unread = sorted(n for n in [*canary, *stable] if n not in read)

    def side(names: list[str]) -> GroupFigures:
        return group([delta(baseline[n], now[n]) for n in names if n in read])

    return WindowFigures(canary=side(canary), stable=side(stable), unread=unread)
