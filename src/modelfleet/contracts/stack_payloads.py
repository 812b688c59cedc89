"""The serving stack a workload cluster needs for the manifests modelfleet renders, with the
pinned versions in one place, and the payloads of the stack activities. Pure: no SDK imports,
no I/O, so workflows may import it freely.

A component is verified by discovery (the cluster serves its kind in its API version) and, if
it is missing and has a manifest, installed by server-side applying the pinned release manifest
fetched from the worker's stack source (``MODELFLEET_STACK_SOURCE``: an http(s) base URL or a
local directory; the manifest path is appended).
"""

from __future__ import annotations

from modelfleet.api.schedulers import GangScheduler, SchedulerType
from modelfleet.contracts.kube_payloads import KubeconfigRef
from modelfleet.contracts.wire import WireModel

KUBE_VERIFY_STACK = "kube.verify_stack"
KUBE_INSTALL_STACK = "kube.install_stack"
KUBE_CHECK_ACCESS = "kube.check_access"


class StackComponent(WireModel):
    name: str
    version: str
    api_version: str
    kind: str
    # Relative to the stack source; None: built into Kubernetes, verify only.
    manifest: str | None = None

    def __str__(self) -> str:
        return f"{self.name} {self.version} ({self.api_version} {self.kind})"


# What the renderer emits (rendering/): DRA claims, LeaderWorkerSets for gangs, HTTPRoutes and
# InferencePools for routing. Versions pinned here; a cluster's stack is this list.
DEFAULT_STACK: list[StackComponent] = [
    StackComponent(
        name="Dynamic Resource Allocation",
        version="v1",
        api_version="resource.k8s.io/v1",
        kind="ResourceClaimTemplate",
    ),
    StackComponent(
        name="LeaderWorkerSet",
        version="v0.7.0",
        api_version="leaderworkerset.x-k8s.io/v1",
        kind="LeaderWorkerSet",
        manifest="lws/v0.7.0/manifests.yaml",
    ),
    StackComponent(
        name="Gateway API",
        version="v1.3.0",
        api_version="gateway.networking.k8s.io/v1",
        kind="HTTPRoute",
        manifest="gateway-api/v1.3.0/standard-install.yaml",
    ),
    StackComponent(
        name="Gateway API Inference Extension",
        version="v1.0.0",
        api_version="inference.networking.k8s.io/v1",
        kind="InferencePool",
        manifest="gateway-api-inference-extension/v1.0.0/manifests.yaml",
    ),
]


# A cluster's gang scheduler, when it asks for one (``spec.scheduler``): the kinds rendering emits
# for it (KAI PodGroups, Kueue LocalQueues) and the ones the probe reads capacity from (KAI
# Queues, Kueue ClusterQueues). Each scheduler's release manifest installs its CRDs and its
# controllers together.
KAI_STACK: list[StackComponent] = [
    StackComponent(
        name="KAI Scheduler",
        version="v0.9.3",
        api_version="scheduling.run.ai/v2alpha2",
        kind="PodGroup",
        manifest="kai-scheduler/v0.9.3/manifests.yaml",
    ),
    StackComponent(
        name="KAI Scheduler queues",
        version="v0.9.3",
        api_version="scheduling.run.ai/v2",
        kind="Queue",
        manifest="kai-scheduler/v0.9.3/manifests.yaml",
    ),
]
KUEUE_STACK: list[StackComponent] = [
    StackComponent(
        name="Kueue",
        version="v0.13.4",
        api_version="kueue.x-k8s.io/v1beta1",
        kind="Workload",
        manifest="kueue/v0.13.4/manifests.yaml",
    ),
    StackComponent(
        name="Kueue queues",
        version="v0.13.4",
        api_version="kueue.x-k8s.io/v1beta1",
        kind="ClusterQueue",
        manifest="kueue/v0.13.4/manifests.yaml",
    ),
    StackComponent(
        name="Kueue local queues",
        version="v0.13.4",
        api_version="kueue.x-k8s.io/v1beta1",
        kind="LocalQueue",
        manifest="kueue/v0.13.4/manifests.yaml",
    ),
]


def stack_for(scheduler: GangScheduler | None) -> list[StackComponent]:
    """Every component a cluster with ``scheduler`` needs, in install order."""
    kind = scheduler.type if scheduler is not None else SchedulerType.NONE
    extra = {SchedulerType.KAI: KAI_STACK, SchedulerType.KUEUE: KUEUE_STACK}.get(kind, [])
    return [*DEFAULT_STACK, *extra]


class StackRequest(WireModel):
    cluster: str
    # The cluster's kubeconfig secretRef, as the probe names it (None: ``<cluster>.yaml``).
    kubeconfig: KubeconfigRef | None = None
    components: list[StackComponent]


class StackReport(WireModel):
    missing: list[StackComponent]
    # Per component name: why an install did not happen (no source, not found, ...).
    problems: dict[str, str] = {}


class AccessNeed(WireModel):
    """Verbs modelfleet uses on one resource of a workload cluster, in every namespace."""

    group: str  # "" for the core group
    resource: str  # the plural, as RBAC rules name it
    verbs: list[str]

    def names(self) -> list[str]:
        where = f"{self.resource}.{self.group}" if self.group else self.resource
        return [f"{verb} {where}" for verb in self.verbs]


_WORKLOAD = ["get", "list", "patch", "delete"]
# What the worker does on a cluster: probe (nodes, slices, gateway), apply and delete what the
# renderer emits (apply is a PATCH), read readiness (pods), sweep by label (list).
REQUIRED_ACCESS: list[AccessNeed] = [
    AccessNeed(group="", resource="nodes", verbs=["list"]),
    AccessNeed(group="resource.k8s.io", resource="resourceslices", verbs=["list"]),
    AccessNeed(group="", resource="namespaces", verbs=["get", "patch"]),
    AccessNeed(group="", resource="pods", verbs=["get", "list"]),
    AccessNeed(group="", resource="services", verbs=_WORKLOAD),
    AccessNeed(group="", resource="configmaps", verbs=_WORKLOAD),
    AccessNeed(group="", resource="serviceaccounts", verbs=_WORKLOAD),
    AccessNeed(group="apps", resource="deployments", verbs=_WORKLOAD),
    AccessNeed(group="leaderworkerset.x-k8s.io", resource="leaderworkersets", verbs=_WORKLOAD),
    AccessNeed(group="resource.k8s.io", resource="resourceclaimtemplates", verbs=_WORKLOAD),
    AccessNeed(group="rbac.authorization.k8s.io", resource="roles", verbs=_WORKLOAD),
    AccessNeed(group="rbac.authorization.k8s.io", resource="rolebindings", verbs=_WORKLOAD),
    AccessNeed(group="inference.networking.k8s.io", resource="inferencepools", verbs=_WORKLOAD),
    AccessNeed(group="gateway.networking.k8s.io", resource="httproutes", verbs=_WORKLOAD),
    AccessNeed(group="gateway.networking.k8s.io", resource="gateways", verbs=["get"]),
    # The front door's passive health check and retries (Envoy Gateway's policy kind).
    AccessNeed(group="gateway.envoyproxy.io", resource="backendtrafficpolicies", verbs=_WORKLOAD),
]


class AccessRequest(WireModel):
    cluster: str
    kubeconfig: KubeconfigRef | None = None
    needs: list[AccessNeed]


class AccessReport(WireModel):
    # "VERB RESOURCE[.GROUP]" the cluster's credentials may not do, in REQUIRED_ACCESS order.
    denied: list[str] = []
