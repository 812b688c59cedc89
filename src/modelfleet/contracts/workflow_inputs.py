"""Inputs and results of the workflows: what a client or parent starts each workflow with, what
it carries across continue-as-new, and what a replica workflow ends with.

A workflow's input is read back from history on replay and after continue-as-new, possibly by a
worker of another version. Every model is a :class:`~modelfleet.contracts.wire.WireModel` (see
there); every field added later needs a default. The ModelDeployment workflow's input lives with
that workflow's state.
"""

from __future__ import annotations

from datetime import datetime

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelReplica
from modelfleet.contracts.fleet_payloads import PlaceResponse
from modelfleet.contracts.kube_payloads import ObjectRef
from modelfleet.contracts.status import ClusterRecord, Decision, ReplicaPhase
from modelfleet.contracts.wire import WireModel
from modelfleet.rendering.facts import ClusterFacts


class FleetState(WireModel):
    """The Fleet workflow's whole state, carried across continue-as-new."""

    classes: dict[str, InferenceClass] = {}
    clusters: dict[str, ClusterRecord] = {}
    replicas: dict[str, ModelReplica] = {}
    decisions: list[Decision] = []
    answered: dict[str, PlaceResponse] = {}


class FleetInput(WireModel):
    state: FleetState | None = None


class ClusterInput(WireModel):
    spec: InferenceCluster
    probe_interval_seconds: int = 15
    # Consecutive failed probes before the cluster is reported NotReady.
    failure_threshold: int = 3
    failed_probes: int = 0
    ready: bool = False
    # How long a delete waits for the cluster's replicas to move elsewhere.
    drain_timeout_seconds: int = 600


class ReplicaInput(WireModel):
    replica: ModelReplica
    parent_id: str
    progress_deadline_seconds: int = 1800
    facts: ClusterFacts = ClusterFacts()
    # Carried across continue-as-new while serving.
    serving_since: datetime | None = None
    health_interval_seconds: int = 30
    # What the rollout applied (references only), carried across continue-as-new so teardown
    # deletes what is really there even if the renderer has changed since.
    applied: list[ObjectRef] = []


class ReplicaResult(WireModel):
    name: str
    phase: ReplicaPhase
    reason: str = ""
