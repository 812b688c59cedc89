"""What the Fleet carries across continue-as-new: its compact state, bounded. Pure: the Fleet
workflow passes in what it holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from modelfleet.api.classes import InferenceClass
from modelfleet.contracts.fleet_payloads import PlaceResponse
from modelfleet.contracts.fleet_state import ClusterEntry, CompactAnswer, compact_answer
from modelfleet.contracts.status import Decision
from modelfleet.contracts.workflow_inputs import FleetState
from modelfleet.fleet.book import FleetBook

# The latest decisions (rejections capped, one per cluster at 1,000 clusters would be ~60 KB
# each) and the answers a retried ``fleet.place`` can still ask for. The activity's attempts are
# 30 s apart at most (timeout) plus a 10 s backoff, so an answer older than the window has been
# received or will be re-asked as a fresh placement.
CARRIED_DECISIONS = 50
CARRIED_REJECTIONS = 20
CARRIED_ANSWERS = 32
RETRY_WINDOW = timedelta(minutes=15)


def carried_state(
    *,
    classes: dict[str, InferenceClass],
    entries: Mapping[str, tuple[ClusterEntry, str, list[Any]]],
    book: FleetBook,
    decisions: Iterable[Decision],
    answered: Mapping[str, tuple[datetime, PlaceResponse | CompactAnswer]],
    version: int,
    now: datetime,
) -> FleetState:
    """The compact state the Fleet carries across continue-as-new (see
    ``contracts.fleet_state``): ``entries`` per cluster, in name order; the latest
    ``decisions``, trimmed; the ``answered`` placements still in their retry window."""
    recent = [
        (rid, at, response) for rid, (at, response) in answered.items() if now - at <= RETRY_WINDOW
    ][-CARRIED_ANSWERS:]
    recent_decisions = list(decisions)[-CARRIED_DECISIONS:]
    return FleetState(
        classes=classes,
        cluster_entries={name: entry for name, (entry, _, _) in entries.items()},
        layouts={key: layout for _, key, layout in entries.values() if key},
        ledger=book.compact(),
        decisions=[trimmed(d) for d in recent_decisions],
        remembered={
            rid: response
            if isinstance(response, CompactAnswer)
            else compact_answer(response, at, rejections=CARRIED_REJECTIONS)
            for rid, at, response in recent
        },
        version=version,
    )


def trimmed(decision: Decision) -> Decision:
    """A decision as carried across continue-as-new: at most ``CARRIED_REJECTIONS`` cluster
    reasons and names (its summary still counts them all)."""
    cap = CARRIED_REJECTIONS

    def names(items: list[str]) -> list[str]:
        return items if len(items) <= cap else [*items[:cap], f"... and {len(items) - cap} more"]

    return decision.model_copy(
        update={
            "rejections": dict(sorted(decision.rejections.items())[:cap]),
            "placed": names(decision.placed),
            "victims": names(decision.victims),
        }
    )
