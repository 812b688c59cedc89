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
from modelfleet.api.meta import Condition
from modelfleet.api.naming import replica_name
from modelfleet.contracts.fleet_payloads import PlaceResponse
from modelfleet.contracts.fleet_state import (
    ClusterEntry,
    CompactAnswer,
    CompactLedger,
    ReplicaRow,
    cluster_record,
    replica_row,
    replica_shape,
    shape_key,
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
    ``commit`` Update): the Fleet books ``placed`` only if nothing the proposal touches changed
    since ``base``, and answers a ``request_id`` it committed before from memory (a retried
    activity places nothing twice).

    Compact, as the Fleet's book keeps replicas (``contracts.fleet_state``): the new replicas as
    rows of this deployment with the shapes they use, the kept and removed ones by name (the
    Fleet holds them). A proposal of 50 new replicas is ~2.6 KiB rather than ~44.6 KiB of whole
    ModelReplicas, and it is in the Fleet's history. The worker keeps its whole answer (see
    ``proposal_of``); the Fleet's answer is a verdict and a version."""

    request_id: str
    epoch: str
    base: int
    namespace: str
    deployment: str
    desired: int
    # Shapes (by key) the placed rows use.
    shapes: dict[str, dict[str, Any]] = Field(default_factory=dict)
    placed: list[ReplicaRow] = Field(default_factory=list)
    # Names of this deployment's replicas it keeps, and of those it removes with why.
    kept: list[str] = Field(default_factory=list)
    victims: list[tuple[str, str]] = Field(default_factory=list)
    # What the Fleet's decision log and remembered answer keep of the scheduler's answer.
    conditions: list[Condition] = Field(default_factory=list)
    rejections: dict[str, str] = Field(default_factory=dict)
    summary: str = ""
    # Why each borrowed placed replica is off its home clusters, by name.
    borrowed: dict[str, str] = Field(default_factory=dict)

    def placed_names(self) -> list[str]:
        return [
            row[4] or replica_name(self.namespace, self.deployment, row[0], row[1])
            for row in self.placed
        ]


def proposal_of(
    response: PlaceResponse,
    *,
    request_id: str,
    epoch: str,
    base: int,
    namespace: str,
    deployment: str,
    desired: int,
) -> Proposal:
    """The compact proposal of the scheduler's ``response`` for ``namespace/deployment``.
    Raises ValueError for a replica of another deployment (the scheduler never makes one)."""
    shapes: dict[str, dict[str, Any]] = {}
    placed: list[ReplicaRow] = []
    for replica in [*response.kept, *response.placed, *(v.replica for v in response.victims)]:
        if (replica.namespace or "", replica.spec.deployment) != (namespace, deployment):
            raise ValueError(f"replica {replica.name} is not of {namespace}/{deployment}")
    for replica in response.placed:
        shape = replica_shape(replica)
        key = shape_key(shape)
        shapes.setdefault(key, shape)
        placed.append(replica_row(replica, key))
    new = {r.name for r in response.placed}
    return Proposal(
        request_id=request_id,
        epoch=epoch,
        base=base,
        namespace=namespace,
        deployment=deployment,
        desired=desired,
        shapes=shapes,
        placed=placed,
        kept=[r.name for r in response.kept],
        victims=[(v.replica.name, v.reason) for v in response.victims],
        conditions=response.conditions,
        rejections=response.rejections,
        summary=response.summary,
        borrowed={name: why for name, why in response.borrowed.items() if name in new},
    )


class CommitAnswer(WireModel):
    """The Fleet's verdict: ``committed`` at ``version``, or ``conflict`` says what changed
    since the proposal's base (recompute on a newer copy). No replicas: the worker holds the
    answer it proposed. ``remembered`` is set when the request ID was booked before (a retried
    activity): that booking's answer, compact (``answer_from_compact`` rebuilds it)."""

    committed: bool
    version: int
    conflict: str = ""
    remembered: CompactAnswer | None = None
