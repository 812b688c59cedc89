"""Payloads of the Fleet's Updates and the activities that send them (``fleet.*``): placement
requests and answers, releases, and what a cluster's workflow publishes about its cluster.

Every model is a :class:`~modelfleet.contracts.wire.WireModel`, so old and new workers read each
other's payloads (see there); every field added later needs a default.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime

from pydantic import Field

from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelDeployment, ModelReplica
from modelfleet.api.meta import Condition
from modelfleet.contracts.kube_payloads import PoolObservation
from modelfleet.contracts.wire import WireModel
from modelfleet.rendering.facts import ClusterFacts
from modelfleet.scheduling.snapshot import QueueCapacity
from modelfleet.scheduling.standing import Standing


def template_key(deployment: ModelDeployment) -> str:
    """What a placement request may send instead of the whole deployment once the Fleet has
    seen it: a digest of everything placement reads (the deployment with its metadata, so two
    deployments never share a key), except ``spec.replicas``: the Fleet places the request's
    ``desired``, so a scale keeps the key. Pure and deterministic (workflows compute it)."""
    document = deployment.model_dump(mode="json", by_alias=True)
    document["spec"].pop("replicas", None)
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class PlaceRequest(WireModel):
    # Deterministic per caller step, so a retried activity does not place twice.
    request_id: str
    # The whole deployment, or None with ``template`` set: the ``template_key`` of one sent
    # whole before (the placing worker answers ``unknown_template`` when it does not hold it).
    deployment: ModelDeployment | None = None
    template: str = ""
    desired: int
    # Clusters this deployment should not get new replicas on (recent failures there).
    avoid_clusters: list[str] = Field(default_factory=list)
    # Why, per avoided cluster: the replica that failed there and its reason.
    avoid_reasons: dict[str, str] = Field(default_factory=dict)
    # Names of this deployment's replicas that left lately: no new replica is given one.
    retired: list[str] = Field(default_factory=list)
    # How this deployment's replicas serve, by name, where not serving the current template:
    # scale-down (and the scale-back after a failed surge) removes the least serving first.
    standing: dict[str, Standing] = Field(default_factory=dict)
    # A roll's surge of a deployment with ``strategy.borrow: Fleet``: what does not fit on its
    # home clusters may go to any other cluster its clusterSelector allows that fits.
    borrow: bool = False


class DryPlaceRequest(PlaceRequest):
    """A placement that only checks (the ``fleet.dry_place`` activity, on the worker's copy of
    the fleet): where ``desired`` replicas would go with this deployment's replicas named in
    ``without`` not counted. Nothing is reserved or remembered; the answer is a
    :class:`PlaceResponse`."""

    without: list[str] = Field(default_factory=list)


class ReplicaRemoval(WireModel):
    """A replica the placement removes, and why in words: the wire form of the scheduler's
    :class:`~modelfleet.scheduling.retain.Victim` (whose reason code stays in the scheduler)."""

    replica: ModelReplica
    reason: str


class PlaceResponse(WireModel):
    kept: list[ModelReplica] = Field(default_factory=list)
    placed: list[ModelReplica] = Field(default_factory=list)
    victims: list[ReplicaRemoval] = Field(default_factory=list)
    conditions: list[Condition] = Field(default_factory=list)
    rejections: dict[str, str] = Field(default_factory=dict)
    summary: str = ""
    # Rendering settings of the clusters the answer's replicas are on, where a cluster sets its
    # own (pool labels, gateway, namespace mode); absent clusters use the worker's defaults.
    facts: dict[str, ClusterFacts] = Field(default_factory=dict)
    # The Fleet's change version this answer was decided at; see ``PlacementCheck``.
    version: int = 0
    # The request named its deployment by ``template`` and the placing worker does not hold it
    # (each keeps a bounded number, in memory only): nothing was decided; send it whole.
    unknown_template: bool = False
    # This deployment's kept and placed replicas outside its home clusters (``homeSelector``),
    # by name, with why (a newly borrowed one: what was full at home).
    borrowed: dict[str, str] = Field(default_factory=dict)


class PlacementCheck(WireModel):
    """ "Is my placement still current?": whether anything that could change ``namespace/
    deployment``'s placement happened in the Fleet since ``version`` (a ``PlaceResponse``'s).
    A deployment whose own spec and desired count are unchanged, and whose check says current,
    has nothing to ask the Fleet on a resync (no Update sent)."""

    namespace: str
    deployment: str
    version: int


class FleetStats(WireModel):
    """The Fleet's size: what it holds and what its continue-as-new input would weigh."""

    classes: int
    clusters: int
    replicas: int
    version: int
    state_bytes: int
    history_events: int


class ReleaseRequest(WireModel):
    namespace: str
    replicas: list[str]


class ClusterReport(WireModel):
    """What an InferenceCluster workflow publishes to the Fleet about its cluster."""

    name: str
    ready: bool
    reason: str = ""
    gateway_address: str | None = None
    observed_pools: dict[str, PoolObservation] = Field(default_factory=dict)
    # The gang scheduler's queue as last probed (None: no gang scheduler).
    queue: QueueCapacity | None = None
    since: datetime | None = None
    # When its probes started failing (None: the last one answered); the NotReady grace of an
    # unreachable cluster counts from here rather than from the NotReady report.
    unreachable_since: datetime | None = None
    # Being deleted: its replicas are moved elsewhere before it leaves the fleet.
    draining: bool = False


class PublishRequest(WireModel):
    """What an InferenceCluster workflow tells the Fleet: a spec, a report, or a removal."""

    spec: InferenceCluster | None = None
    report: ClusterReport | None = None
    remove: str | None = None


# Replicas per page of the Fleet's ``replica_page`` query: ~1 KB each, so a page stays far
# below the 512 KiB at which the SDK warns about a payload (and the 2 MiB it refuses).
REPLICA_PAGE_LIMIT = 250


class ReplicaPageRequest(WireModel):
    """A page of the Fleet's placed replicas, by key (``namespace/name``) order: those after
    ``after``, optionally only of one namespace or one cluster."""

    after: str = ""
    limit: int = Field(default=REPLICA_PAGE_LIMIT, ge=1, le=REPLICA_PAGE_LIMIT)
    namespace: str = ""
    cluster: str = ""


class ReplicaPage(WireModel):
    replicas: list[ModelReplica] = Field(default_factory=list)
    # The key to ask ``after`` for the next page; "" when this is the last.
    next_after: str = ""
