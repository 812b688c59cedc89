"""Payloads of placement that scales out (issue 22): what a worker's copy of the fleet reads
from the Fleet (``changes``, ``snapshot_page``) and the proposal it sends (``commit``). See
``fleet.mirror`` and ``fleet.commit``.

Every model is a :class:`~modelfleet.contracts.wire.WireModel`; fields added later need a
default.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from modelfleet.api.classes import InferenceClass
from modelfleet.contracts.fleet_payloads import PlaceResponse
from modelfleet.contracts.fleet_state import (
    ClusterEntry,
    CompactLedger,
    cluster_record,
)
from modelfleet.contracts.status import ClusterRecord
from modelfleet.contracts.wire import WireModel

# Most keys (replicas, clusters) one ``changes`` answer lists; past it the worker reads the fleet
# again in pages instead.
MAX_CHANGES_PER_ANSWER = 2000
# Clusters (~2 KB each) and replica rows (~60 B each, shapes once) per page of a whole read.
SNAPSHOT_CLUSTER_PAGE = 100
SNAPSHOT_REPLICA_PAGE = 2000


class CompactClusters(WireModel):
    """Cluster records in the Fleet's carried form (``contracts.fleet_state.ClusterEntry``, node
    pool layouts by key): the Fleet answers from what it keeps, validating no spec; the copy
    builds each record with ``cluster_record``."""

    entries: dict[str, ClusterEntry] = Field(default_factory=dict)
    layouts: dict[str, list[Any]] = Field(default_factory=dict)

    def records(self) -> list[ClusterRecord]:
        return [cluster_record(e, self.layouts) for _, e in sorted(self.entries.items())]


class ChangesRequest(WireModel):
    """What changed in the Fleet since ``since`` (a version of the Fleet named ``epoch``)."""

    epoch: str = ""
    since: int = 0


class FleetChanges(WireModel):
    """The Fleet's answer to ``changes``: everything that changed since the asked version, as
    it stands now; or ``too_old`` (another Fleet, a version from before this run or beyond the
    change log): then read the fleet whole with ``snapshot_page``. ``now`` and
    ``grace_seconds`` say which clusters are NotReady past their grace (left out of placement),
    by the Fleet's clock."""

    epoch: str
    version: int
    too_old: bool = False
    now: datetime
    grace_seconds: int
    max_replicas: int
    # The whole catalog when any class changed, else None.
    classes: list[InferenceClass] | None = None
    clusters: CompactClusters = Field(default_factory=CompactClusters)
    removed_clusters: list[str] = Field(default_factory=list)
    # Changed replicas as compact rows (``contracts.fleet_state``): the Fleet builds no
    # ModelReplica to answer, the copy builds them when it reads them.
    replicas: CompactLedger = Field(default_factory=CompactLedger)
    # ``namespace/name`` keys.
    removed_replicas: list[str] = Field(default_factory=list)


class SnapshotPageRequest(WireModel):
    """A page of the whole fleet: ``part`` "clusters" or "replicas", keys after ``after``."""

    part: Literal["clusters", "replicas"]
    after: str = ""


class SnapshotPage(WireModel):
    epoch: str
    version: int
    now: datetime
    grace_seconds: int
    max_replicas: int
    classes: list[InferenceClass] = Field(default_factory=list)
    clusters: CompactClusters = Field(default_factory=CompactClusters)
    replicas: CompactLedger = Field(default_factory=CompactLedger)
    # The key to ask ``after`` for the next page; "" when this is the last.
    next_after: str = ""


class Proposal(WireModel):
    """A placement computed by a worker on its copy of the fleet at ``base`` (the Fleet's
    ``commit`` Update): the Fleet books ``response.placed`` only if nothing the proposal
    touches changed since ``base``, and answers a ``request_id`` it committed before from
    memory (a retried activity places nothing twice)."""

    request_id: str
    epoch: str
    base: int
    namespace: str
    deployment: str
    desired: int
    response: PlaceResponse


class CommitAnswer(WireModel):
    """``committed``: booked at ``version`` (``response`` is set when the request ID was
    answered before: the answer then). Otherwise ``conflict`` says what changed since the
    proposal's base: recompute on a newer copy."""

    committed: bool
    version: int
    conflict: str = ""
    response: PlaceResponse | None = None
