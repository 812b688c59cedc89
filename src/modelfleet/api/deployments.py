"""ModelDeployment (what an ML team asks for) and ModelReplica (one placed replica of it).

A replica is made of ``engines``; each engine is either one Standalone member or a Leader plus a
Worker gang of ``worker.nodes`` pods, repeated ``copies`` times. Members select hardware with DRA
CEL selectors per node. Pure models, no I/O; the cross-field rules live in ``api.rules``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from modelfleet.api.clusters import TaintEffect
from modelfleet.api.meta import DNSLabel, Model, Resource
from modelfleet.api.naming import (
    LABEL_DEPLOYMENT,
    LABEL_REPLICA_INDEX,
    MODELPLANE_LABEL_DEPLOYMENT,
    MODELPLANE_LABEL_REPLICA_INDEX,
)


class ServingMode(StrEnum):
    UNIFIED = "Unified"
    PREFILL_DECODE = "PrefillDecode"


class Phase(StrEnum):
    PREFILL = "Prefill"
    DECODE = "Decode"


class Role(StrEnum):
    STANDALONE = "Standalone"
    LEADER = "Leader"
    WORKER = "Worker"


class TolerationOperator(StrEnum):
    EXISTS = "Exists"
    EQUAL = "Equal"


class Toleration(Model):
    key: str = ""
    operator: TolerationOperator = TolerationOperator.EQUAL
    value: str = ""
    # None tolerates every effect.
    effect: TaintEffect | None = None


class CelSelector(Model):
    cel: str = Field(min_length=1, max_length=10240)


class DeviceSelector(Model):
    name: DNSLabel
    count: int = Field(default=1, ge=1, le=64)
    selectors: list[CelSelector] = Field(min_length=1, max_length=8)


class NodeSelector(Model):
    devices: list[DeviceSelector] = Field(min_length=1, max_length=16)


class WorkerSpec(Model):
    nodes: int = Field(ge=1, le=63)


class KeyRef(Model):
    name: str = Field(min_length=1)
    key: str = Field(min_length=1)
    optional: bool | None = None


class FieldRef(Model):
    field_path: str = Field(min_length=1)
    api_version: str | None = None


class EnvVarSource(Model):
    secret_key_ref: KeyRef | None = None
    config_map_key_ref: KeyRef | None = None
    field_ref: FieldRef | None = None


class EnvVar(Model):
    name: str = Field(min_length=1)
    value: str | None = None
    value_from: EnvVarSource | None = None


class Container(Model):
    # Exactly one container per pod, named "engine": the renderer adds everything else.
    name: str
    image: str = Field(min_length=1)
    command: list[str] | None = None
    args: list[str] | None = None
    # Bounded so that a CRD's CEL rules on each item fit the apiserver's cost budget (an
    # unbounded list is estimated at millions of items).
    env: list[EnvVar] | None = Field(default=None, max_length=256)

    @field_validator("name")
    @classmethod
    def _named_engine(cls, name: str) -> str:
        if name != "engine":
            raise ValueError(f"the container must be named 'engine' (got {name!r})")
        return name


class LocalObjectReference(Model):
    name: str = Field(min_length=1)


class PodSpec(Model):
    containers: list[Container] = Field(min_length=1, max_length=1)
    image_pull_secrets: list[LocalObjectReference] | None = None


class TemplateMeta(Model):
    labels: dict[str, str] = Field(default_factory=dict, max_length=32)
    annotations: dict[str, str] = Field(default_factory=dict, max_length=32)


class PodTemplate(Model):
    metadata: TemplateMeta = Field(default_factory=TemplateMeta)
    spec: PodSpec


class MemberBase(Model):
    """What a deployment's member and a placed replica's member have in common."""

    role: Role = Role.STANDALONE
    worker: WorkerSpec | None = None
    template: PodTemplate

    @property
    def pods(self) -> int:
        """Pods of this member per engine copy (one per node)."""
        if self.role is Role.WORKER and self.worker is not None:
            return self.worker.nodes
        return 1

    @property
    def container(self) -> Container:
        return self.template.spec.containers[0]


class Member(MemberBase):
    node_selector: NodeSelector | None = None


class Engine(Model):
    name: DNSLabel
    copies: int = Field(default=1, ge=1, le=64)
    phase: Phase | None = None
    members: list[Member] = Field(min_length=1, max_length=2)

    @property
    def is_gang(self) -> bool:
        return any(m.role is Role.LEADER for m in self.members)


class ClusterSelector(Model):
    match_labels: dict[str, str] = Field(default_factory=dict)


class ObjectRef(Model):
    name: str = Field(min_length=1)


class Serving(Model):
    mode: ServingMode = ServingMode.UNIFIED


class DeploymentTemplateSpec(Model):
    # Every cluster a replica may ever run on (a hard rule).
    cluster_selector: ClusterSelector | None = None
    # Where replicas normally run, within ``clusterSelector``: new replicas go only to clusters
    # matching both; a roll with ``strategy.borrow: Fleet`` may surge outside it (and back).
    home_selector: ClusterSelector | None = None
    model_cache_ref: ObjectRef | None = None
    serving: Serving = Field(default_factory=Serving)
    tolerations: list[Toleration] = Field(default_factory=list, max_length=64)  # see env
    engines: list[Engine] = Field(min_length=1, max_length=8)


class ReplicaTemplate(Model):
    metadata: TemplateMeta = Field(default_factory=TemplateMeta)
    spec: DeploymentTemplateSpec


class BorrowPolicy(StrEnum):
    """Where a roll's surge may go when the deployment's home clusters have no room for it."""

    # Only where the deployment normally runs (``homeSelector``): the roll waits for room.
    NONE = "None"
    # Any cluster ``clusterSelector`` allows that fits, until home has room again.
    FLEET = "Fleet"


class CanaryAnalysis(Model):
    """What a canary step must show over ``windowSeconds`` before the roll goes on: read from
    the engines' own metrics (vLLM's ``time_to_first_token_seconds`` and
    ``time_per_output_token_seconds`` histograms and ``http_requests_total``), the new
    template's replicas against the stable ones in the same window. At least one threshold is
    set (``api.rules``)."""

    window_seconds: int = Field(default=60, ge=10, le=3600)
    # The new replicas' TTFT p95 over the window must not exceed this (seconds).
    ttft_p95_seconds: float | None = Field(default=None, gt=0, le=600)
    # ... nor this many times the stable replicas' TTFT p95 in the same window.
    ttft_p95_ratio: float | None = Field(default=None, ge=1, le=100)
    # The new replicas' inter-token latency p95 (the time between a request's successive output
    # tokens) over the window must not exceed this (seconds) ...
    itl_p95_seconds: float | None = Field(default=None, gt=0, le=60)
    # ... nor this many times the stable replicas' in the same window.
    itl_p95_ratio: float | None = Field(default=None, ge=1, le=100)
    # The share of the new replicas' inference requests answered 5xx in the window.
    max_error_percent: float | None = Field(default=None, ge=0, le=100)
    # Fewer requests than this on the new replicas (or, for the ratio, on the stable ones) in
    # the window say nothing: the window is extended, then the roll waits for a person.
    min_requests: int = Field(default=20, ge=1, le=1_000_000)


class CanaryStrategy(Model):
    """Roll the new template in steps of the deployment's replicas (a share of replicas, not of
    traffic: a ModelService spreads requests over its endpoints, so the share of replicas is the
    share of traffic it sends to the new template), analysing each step before the next."""

    # Percentages of the replicas on the new template, increasing, the last 100.
    steps: list[Annotated[int, Field(ge=1, le=100)]] = Field(min_length=1, max_length=10)
    analysis: CanaryAnalysis


class Strategy(Model):
    """How spec changes roll across replicas.

    The defaults surge one replica and, when the fleet has no room for the surge, fall back to
    replacing one replica at a time, except that a deployment of one replica is never taken to
    zero by default: it surges wherever the fleet has room, or waits for room (``unavailable``).
    """

    max_surge: int = Field(default=1, ge=0, le=10)
    # Unset: see ``unavailable``.
    max_unavailable: int | None = Field(default=None, ge=0, le=10)
    # How long a replica may take to become Ready before it is rolled back.
    progress_deadline_seconds: int = Field(default=1800, ge=10, le=7 * 24 * 3600)
    # How long a replacement must stay Ready (its engines passing health, not restarting)
    # before an old replica drains for it and it counts towards the roll's capacity; leaving
    # Ready within it is a failed replacement, rolled back (Kubernetes' minReadySeconds).
    min_ready_seconds: int = Field(default=30, ge=0, le=3600)
    # How long after a roll finished a crash loop of its template still rolls it back to the
    # template before it (a slow crasher that outlived minReadySeconds); 0 turns it off.
    rollback_window_seconds: int = Field(default=600, ge=0, le=7 * 24 * 3600)
    # A replacement whose engines answered more than this percentage of their inference requests
    # with 5xx while it proved itself (minReadySeconds; at least ``ERROR_SAMPLE`` requests) is a
    # failed replacement, rolled back; 100 turns the check off.
    max_error_percent: int = Field(default=5, ge=0, le=100)
    # A replacement whose engine container restarts this many times in CrashLoopBackOff before
    # it was ever Ready fails at once (arguments the engine rejects, a broken image), not at
    # its progress deadline; so does one whose image cannot be pulled for good (not found,
    # access refused) once the kubelet has retried the pull. 0 waits for the deadline for both.
    crash_loop_restarts: int = Field(default=2, ge=0, le=100)
    # Fleet: a surge that finds no room on the home clusters (``homeSelector``) is placed on
    # any other cluster ``clusterSelector`` allows that fits (borrowed), and moves back home by
    # a later surge when room appears there.
    borrow: BorrowPolicy = BorrowPolicy.NONE
    # Roll a new template in analysed steps and roll it back when a step fails its analysis.
    canary: CanaryStrategy | None = None

    def unavailable(self, replicas: int) -> int:
        """The maxUnavailable in effect for ``replicas``: as set; unset, 1 (replace one at a
        time when there is no room to surge), but 0 for a single replica that may surge: one
        replica replaced in place serves nothing until its replacement is Ready, so by default
        it waits for room to surge instead. With ``maxSurge: 0`` unset means 1 (the only way a
        roll can progress)."""
        if self.max_unavailable is not None:
            return self.max_unavailable
        if self.max_surge == 0 or replicas > 1:
            return 1
        return 0


class ModelDeploymentSpec(Model):
    replicas: int = Field(ge=0, le=10)
    strategy: Strategy = Field(default_factory=Strategy)
    template: ReplicaTemplate


class ModelDeployment(Resource):
    KIND: ClassVar[str] = "ModelDeployment"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("md",)
    BORROWED_SHORT_NAMES: ClassVar[tuple[str, ...]] = ("deploy",)
    NAMESPACED: ClassVar[bool] = True
    kind: Literal["ModelDeployment"] = "ModelDeployment"
    spec: ModelDeploymentSpec


# --- ModelReplica: the deployment's engines with placement resolved ---------------------------


class DeviceRequest(Model):
    name: DNSLabel
    device_class_name: str = Field(min_length=1, max_length=253)
    count: int = Field(default=1, ge=1, le=64)
    selectors: list[CelSelector] = Field(default_factory=list, max_length=8)


class PlacedMember(MemberBase):
    node_pool_name: str = Field(min_length=1)
    # Absent when the member claims nothing; never present-but-empty.
    device_requests: list[DeviceRequest] | None = Field(default=None, min_length=1, max_length=16)


class PlacedEngine(Model):
    name: DNSLabel
    copies: int = Field(default=1, ge=1, le=64)
    phase: Phase | None = None
    members: list[PlacedMember] = Field(min_length=1, max_length=2)

    @property
    def is_gang(self) -> bool:
        return any(m.role is Role.LEADER for m in self.members)


class ModelReplicaSpec(Model):
    cluster_name: str = Field(min_length=1)
    deployment: str = Field(min_length=1)
    index: int = Field(default=0, ge=0)
    model_cache_ref: ObjectRef | None = None
    serving: Serving = Field(default_factory=Serving)
    engines: list[PlacedEngine] = Field(min_length=1, max_length=8)


class ModelReplica(Resource):
    KIND: ClassVar[str] = "ModelReplica"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("mr",)
    NAMESPACED: ClassVar[bool] = True
    kind: Literal["ModelReplica"] = "ModelReplica"
    spec: ModelReplicaSpec

    @model_validator(mode="before")
    @classmethod
    def _identity_from_labels(cls, data: Any) -> Any:
        """Modelplane keeps a replica's identity in labels, not in its spec: take the deployment
        and the index from them when the spec leaves them out, so its replicas load unchanged."""
        if not isinstance(data, dict):
            return data
        meta, spec = data.get("metadata"), data.get("spec")
        if not isinstance(meta, dict) or not isinstance(spec, dict):
            return data
        labels = meta.get("labels")
        if not isinstance(labels, dict):
            return data
        spec = dict(spec)
        for field, keys in (
            ("deployment", (LABEL_DEPLOYMENT, MODELPLANE_LABEL_DEPLOYMENT)),
            ("index", (LABEL_REPLICA_INDEX, MODELPLANE_LABEL_REPLICA_INDEX)),
        ):
            if field in spec:
                continue
            for key in keys:
                if key in labels:
                    spec[field] = labels[key]
                    break
        return {**data, "spec": spec}


ServingPhase = Literal["Prefill", "Decode"]
