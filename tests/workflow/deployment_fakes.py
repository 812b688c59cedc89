"""Activity doubles for the ModelDeployment workflow tests: a Fleet (``fleet.place`` and
``fleet.release``) with a few one-slot-per-replica clusters, and a cluster API (the ``kube.*``
activities the real ModelReplica child calls) that records what happened, in order, and never
becomes ready on the clusters it is told to. Not a test module."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from modelfleet.api.deployments import ModelDeployment, ModelReplica
from modelfleet.contracts.activity_names import (
    FLEET_DRY_PLACE,
    FLEET_PLACE,
    FLEET_PLACEMENT_CURRENT,
    FLEET_RELEASE,
    KUBE_APPLY,
    KUBE_CHECK_READY,
    KUBE_DELETE,
    KUBE_DRIFT,
    KUBE_POLL_READY,
)
from modelfleet.contracts.fleet_payloads import (
    DryPlaceRequest,
    PlacementCheck,
    PlaceRequest,
    PlaceResponse,
    ReleaseRequest,
    ReplicaRemoval,
    template_key,
)
from modelfleet.contracts.kube_payloads import (
    ApplyRequest,
    ApplyResult,
    DeleteRequest,
    DeleteResult,
    DriftRequest,
    DriftResult,
    ObjectRef,
    ReadyResult,
    WaitReadyRequest,
)
from modelfleet.contracts.serving_payloads import (
    ENDPOINTS_PUBLISH_REPLICA,
    ENDPOINTS_WITHDRAW,
    SERVING_CHECK_MODELS,
    SERVING_ROUTES_CARRYING,
    EndpointKey,
    ModelCheck,
    ModelCheckRequest,
    ReplicaEndpointRequest,
    RoutesCarrying,
    RoutesRequest,
)

ANY_GPU = {
    "name": "gpu",
    "selectors": [
        {"cel": 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("1Gi")) >= 0'}
    ],
}


def deployment(name: str, *, replicas: int, image: str = "vllm:1") -> ModelDeployment:
    return ModelDeployment.model_validate(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "ModelDeployment",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {
                "replicas": replicas,
                "strategy": {"progressDeadlineSeconds": 600},
                "template": {
                    "spec": {
                        "engines": [
                            {
                                "name": "vllm",
                                "members": [
                                    {
                                        "nodeSelector": {"devices": [ANY_GPU]},
                                        "template": {
                                            "spec": {
                                                "containers": [{"name": "engine", "image": image}]
                                            }
                                        },
                                    }
                                ],
                            }
                        ]
                    }
                },
            },
        }
    )


def replica_of(md: ModelDeployment, name: str, cluster: str, index: int) -> ModelReplica:
    member = md.spec.template.spec.engines[0].members[0]
    return ModelReplica.model_validate(
        {
            "metadata": {"name": name, "namespace": md.namespace},
            "spec": {
                "clusterName": cluster,
                "deployment": md.name,
                "index": index,
                "engines": [
                    {
                        "name": "vllm",
                        "members": [
                            {
                                "nodePoolName": "gpu",
                                "deviceRequests": [
                                    {"name": "gpu", "deviceClassName": "gpu.nvidia.com"}
                                ],
                                "template": member.template.model_dump(
                                    by_alias=True, exclude_none=True
                                ),
                            }
                        ],
                    }
                ],
            },
        }
    )


@dataclass
class FakeFleet:
    """One replica per cluster; new replicas go to the first free cluster by name that the
    request does not avoid; scale-down names the newest replicas as victims."""

    clusters: list[str]
    ledger: dict[str, str] = field(default_factory=dict)  # replica -> cluster
    requests: list[PlaceRequest] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    peak: int = 0
    made: int = 0
    names: list[str] = field(default_factory=list)  # every replica ever placed
    # Images that fit nowhere (a dry placement of them places nothing).
    unplaceable: set[str] = field(default_factory=set)
    dry_requests: list[DryPlaceRequest] = field(default_factory=list)
    # The Fleet's change version (bumped by each placement) and the answer to "is my placement
    # current?" checks, which are recorded.
    version: int = 0
    current: bool = True
    checks: list[PlacementCheck] = field(default_factory=list)
    # Deployments sent whole, by template key; requests that named one; and whether to answer
    # every such request "unknown template" (as a Fleet that continued-as-new does).
    templates: dict[str, ModelDeployment] = field(default_factory=dict)
    by_template: int = 0
    forget_templates: bool = False

    @activity.defn(name=FLEET_PLACE)
    async def place(self, request: PlaceRequest) -> PlaceResponse:
        md = request.deployment
        if md is None:  # named by template, as the Fleet keeps them
            self.by_template += 1
            md = self.templates.get(request.template)
            if md is None or self.forget_templates:
                return PlaceResponse(unknown_template=True, version=self.version)
            request = request.model_copy(update={"deployment": md})
        else:
            self.templates[template_key(md)] = md
        self.requests.append(request)
        mine = sorted(self.ledger, key=lambda n: int(n.rsplit("-", 1)[1]))
        victims = [
            ReplicaRemoval(replica=replica_of(md, n, self.ledger[n], 0), reason="scaled down")
            for n in mine[request.desired :][::-1]
        ]
        placed = []
        for _ in range(request.desired - len(mine)):
            used = set(self.ledger.values())
            free = [c for c in self.clusters if c not in used and c not in request.avoid_clusters]
            if not free:
                break
            self.made += 1
            name = f"{md.name}-{self.made}"
            self.ledger[name] = free[0]
            self.names.append(name)
            placed.append(replica_of(md, name, free[0], self.made))
        self.peak = max(self.peak, len(self.ledger))
        self.version += 1
        return PlaceResponse(placed=placed, victims=victims, version=self.version)

    @activity.defn(name=FLEET_PLACEMENT_CURRENT)
    async def placement_current(self, check: PlacementCheck) -> bool:
        self.checks.append(check)
        return self.current and check.version == self.version

    @activity.defn(name=FLEET_DRY_PLACE)
    async def dry_place(self, request: DryPlaceRequest) -> PlaceResponse:
        """Where the replicas would go with ``without`` not counted; books nothing."""
        self.dry_requests.append(request)
        image = _engine_image_of(request.deployment)
        if image in self.unplaceable:
            return PlaceResponse(rejections={c: f"{image} fits no pool" for c in self.clusters})
        used = {c for n, c in self.ledger.items() if n not in request.without}
        free = [c for c in self.clusters if c not in used and c not in request.avoid_clusters]
        placed = [
            replica_of(request.deployment, f"dry-{i}", c, i)
            for i, c in enumerate(free[: request.desired])
        ]
        return PlaceResponse(placed=placed)

    @activity.defn(name=FLEET_RELEASE)
    async def release(self, request: ReleaseRequest) -> int:
        self.released.extend(request.replicas)
        return sum(1 for n in request.replicas if self.ledger.pop(n, None) is not None)


@dataclass
class FakeClusters:
    """Every cluster's API in one: records ``apply <cluster> <image>``, ``ready <cluster>``
    and ``delete <cluster>`` in order; clusters in ``never_ready`` miss their deadline."""

    never_ready: set[str] = field(default_factory=set)
    events: list[str] = field(default_factory=list)
    images: dict[str, str] = field(default_factory=dict)  # cluster -> image last applied
    # Clusters whose engines crash-loop once Ready: every health check there fails the way
    # the Kubernetes adapter explains a crash loop.
    crash_after_ready: set[str] = field(default_factory=set)
    # ``ready <cluster>`` and ``delete <cluster>`` at the server's (skipped) time.
    timeline: list[tuple[str, datetime]] = field(default_factory=list)

    def _at(self, event: str) -> None:
        self.timeline.append((event, activity.info().current_attempt_scheduled_time))

    @activity.defn(name=KUBE_APPLY)
    async def apply(self, request: ApplyRequest) -> ApplyResult:
        for manifest in request.manifests:
            image = _engine_image(manifest)
            if image:
                self.images[request.cluster] = image
                self.events.append(f"apply {request.cluster} {image}")
        return ApplyResult(applied=[ObjectRef.of(m) for m in request.manifests])

    @activity.defn(name=KUBE_POLL_READY)
    async def poll_ready(self, request: WaitReadyRequest) -> ReadyResult:
        if request.cluster in self.never_ready:
            raise ApplicationError(
                "not ready by the progress deadline: ImagePullBackOff",
                type="ReadinessDeadlineExceeded",
                non_retryable=True,
            )
        self.events.append(f"ready {request.cluster}")
        self._at(f"ready {request.cluster}")
        return ReadyResult(ready=True, reason="all ready")

    @activity.defn(name=KUBE_CHECK_READY)
    async def check_ready(self, request: WaitReadyRequest) -> ReadyResult:
        if request.cluster in self.crash_after_ready:
            return ReadyResult(
                ready=False,
                reason=(
                    "Deployment ml/engine not Available: 0/1 pods ready; pod engine-0: "
                    "container engine CrashLoopBackOff (restarted 2 times), last exit Error "
                    "(exit code 1)"
                ),
                reported=True,
                restarts=2,
            )
        return ReadyResult(ready=True, reason="all ready")

    @activity.defn(name=KUBE_DRIFT)
    async def drift(self, request: DriftRequest) -> DriftResult:
        """Everything stands as applied (a serving replica's resync finds nothing to repair)."""
        return DriftResult()

    @activity.defn(name=ENDPOINTS_PUBLISH_REPLICA)
    async def publish(self, request: ReplicaEndpointRequest) -> None:
        """The endpoint directory takes it (an unregistered activity, retried meanwhile, keeps
        the time-skipping server from skipping time)."""

    @activity.defn(name=ENDPOINTS_WITHDRAW)
    async def withdraw(self, key: EndpointKey) -> bool:
        return True

    @activity.defn(name=SERVING_CHECK_MODELS)
    async def check_models(self, request: ModelCheckRequest) -> ModelCheck:
        """No service expects anything of it."""
        return ModelCheck()

    @activity.defn(name=SERVING_ROUTES_CARRYING)
    async def routes_carrying(self, request: RoutesRequest) -> RoutesCarrying:
        """No front-door route carries it."""
        return RoutesCarrying()

    @activity.defn(name=KUBE_DELETE)
    async def delete(self, request: DeleteRequest) -> DeleteResult:
        self.events.append(f"delete {request.cluster}")
        self._at(f"delete {request.cluster}")
        return DeleteResult(deleted=len(request.objects), absent=0)


def _engine_image(manifest: dict[str, Any]) -> str:
    """The engine container's image of a workload manifest (Deployment), else ''."""
    if manifest.get("kind") != "Deployment":
        return ""
    containers = manifest["spec"]["template"]["spec"]["containers"]
    return next((c["image"] for c in containers if c["name"] == "engine"), "")


def _engine_image_of(md: ModelDeployment) -> str:
    return md.spec.template.spec.engines[0].members[0].template.spec.containers[0].image
