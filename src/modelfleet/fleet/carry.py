"""What the Fleet carries across continue-as-new: its compact state, bounded; and the placement
answers it remembers (compact) so that a retried ``fleet.place`` books nothing twice. Pure: the
Fleet workflow passes in what it holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from datetime import datetime, timedelta
from typing import Any

from modelfleet.api.classes import InferenceClass
from modelfleet.contracts.fleet_state import (
    ClusterEntry,
    CompactAnswer,
    cluster_record,
)
from modelfleet.contracts.status import ClusterRecord, Decision
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
# Answers kept in memory within a run (the newest; continue-as-new carries fewer).
MAX_REMEMBERED_REQUESTS = 200

Answered = dict[str, tuple[datetime, CompactAnswer]]


def carried_state(
    *,
    classes: dict[str, InferenceClass],
    class_created: Mapping[str, datetime],
    entries: Mapping[str, tuple[ClusterEntry, str, list[Any]]],
    book: FleetBook,
    decisions: Iterable[Decision],
    answered: Mapping[str, tuple[datetime, CompactAnswer]],
    version: int,
    now: datetime,
) -> FleetState:
    """The compact state the Fleet carries across continue-as-new (see
    ``contracts.fleet_state``): ``entries`` per cluster, in name order; the latest
    ``decisions``, trimmed; the ``answered`` placements still in their retry window."""
    recent = [
        (rid, at, answer) for rid, (at, answer) in answered.items() if now - at <= RETRY_WINDOW
    ][-CARRIED_ANSWERS:]
    recent_decisions = list(decisions)[-CARRIED_DECISIONS:]
    return FleetState(
        classes=classes,
        class_created={name: at for name, at in class_created.items() if name in classes},
        cluster_entries={name: entry for name, (entry, _, _) in entries.items()},
        layouts={key: layout for _, key, layout in entries.values() if key},
        ledger=book.compact(),
        decisions=[trimmed(d) for d in recent_decisions],
        remembered={rid: answer for rid, _, answer in recent},
        version=version,
    )


def remember(answered: Answered, request_id: str, answer: CompactAnswer, now: datetime) -> None:
    """Keep the (compact) answer to ``request_id``; the oldest go past
    ``MAX_REMEMBERED_REQUESTS``."""
    answered[request_id] = (now, answer)
    while len(answered) > MAX_REMEMBERED_REQUESTS:
        answered.pop(next(iter(answered)))


def recall(answered: Answered, request_id: str) -> CompactAnswer | None:
    """The answer given to ``request_id`` before, if it is still remembered: compact, as the
    ``commit`` Update answers a retry (the activity expands it)."""
    remembered = answered.get(request_id)
    return None if remembered is None else remembered[1]


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


class LazyRecords(MutableMapping[str, ClusterRecord]):
    """The Fleet's cluster records, each built from its carried entry the first time it is read:
    a new run starts without validating 1,000 cluster specs (~100 ms of its first workflow
    task), and a placement's commit builds only the clusters it touches. Keeps insertion
    order, as the dict it replaces did."""

    def __init__(self, entries: Mapping[str, ClusterEntry], layouts: dict[str, list[Any]]):
        self._entries = dict(entries)
        self._layouts = layouts
        self._built: dict[str, ClusterRecord] = {}
        self._order: dict[str, None] = dict.fromkeys(entries)

    def __getitem__(self, name: str) -> ClusterRecord:
        record = self._built.get(name)
        if record is None:
            entry = self._entries.pop(name)  # KeyError: not a cluster of the fleet
            record = self._built[name] = cluster_record(entry, self._layouts)
        return record

    def __setitem__(self, name: str, record: ClusterRecord) -> None:
        self._entries.pop(name, None)
        self._built[name] = record
        self._order[name] = None

    def __delitem__(self, name: str) -> None:
        del self._order[name]
        self._entries.pop(name, None)
        self._built.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._order

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._order))

    def __len__(self) -> int:
        return len(self._order)

    def not_ready_since(self, name: str) -> datetime | None:
        """``name``'s NotReady time, without building its record."""
        entry = self._entries.get(name)
        return entry.not_ready_since if entry is not None else self[name].not_ready_since
