"""The resource types a fresh simulated cluster serves: the built-in kinds of the Kubernetes
API (core, apps, batch, RBAC, DRA, ...) and the CRDs of the serving stack, as data for
``registry.ResourceRegistry``. Pure data, no I/O; kept apart from the registry's lookups because
the table alone is longer than the rest of the registry.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from modelfleet.sim.apiserver.registry import RequiredField, ResourceType

__all__ = ["builtin_types"]


def _rt(
    group: str,
    version: str,
    plural: str,
    kind: str,
    *,
    namespaced: bool = True,
    status: bool = False,
    scale: bool = False,
    builtin: bool = True,
    short: Iterable[str] = (),
    required: Iterable[RequiredField] = (),
    scale_selector_path: str = "",
    return_deleted: bool | None = None,
    keeps_status: bool = False,
    defaults: Iterable[tuple[str, Any]] = (),
    categories: Iterable[str] = (),
) -> ResourceType:
    return ResourceType(
        group=group,
        version=version,
        plural=plural,
        kind=kind,
        namespaced=namespaced,
        status_subresource=status,
        scale_subresource=scale,
        builtin=builtin,
        short_names=tuple(short),
        required=tuple(required),
        scale_selector_path=scale_selector_path,
        return_deleted_object=(not builtin) if return_deleted is None else return_deleted,
        create_keeps_status=keeps_status,
        defaults=tuple(defaults),
        categories=tuple(categories),
    )


# `kubectl get all`: the kinds the real server puts in the "all" category.
_ALL = ("all",)


def _req(*paths: str) -> tuple[RequiredField, ...]:
    return tuple(RequiredField(p) for p in paths)


_POD_TEMPLATE_REQUIRED = _req("spec.template.spec.containers")


def builtin_types() -> list[ResourceType]:
    """Every resource type a fresh cluster serves."""
    return [
        # core/v1
        _rt(
            "",
            "v1",
            "namespaces",
            "Namespace",
            namespaced=False,
            status=True,
            short=["ns"],
            return_deleted=True,
        ),
        _rt(
            "",
            "v1",
            "nodes",
            "Node",
            namespaced=False,
            status=True,
            short=["no"],
            keeps_status=True,
        ),
        _rt(
            "",
            "v1",
            "pods",
            "Pod",
            status=True,
            short=["po"],
            categories=_ALL,
            required=_req("spec.containers"),
            return_deleted=True,
        ),
        _rt("", "v1", "services", "Service", status=True, short=["svc"], categories=_ALL),
        _rt("", "v1", "serviceaccounts", "ServiceAccount", short=["sa"]),
        _rt("", "v1", "configmaps", "ConfigMap", short=["cm"]),
        _rt("", "v1", "secrets", "Secret"),
        _rt(
            "discovery.k8s.io",
            "v1",
            "endpointslices",
            "EndpointSlice",
            required=_req("addressType"),
        ),
        _rt("", "v1", "events", "Event", short=["ev"]),
        _rt("", "v1", "endpoints", "Endpoints", short=["ep"]),
        _rt(
            "",
            "v1",
            "persistentvolumeclaims",
            "PersistentVolumeClaim",
            status=True,
            short=["pvc"],
        ),
        _rt(
            "",
            "v1",
            "persistentvolumes",
            "PersistentVolume",
            namespaced=False,
            status=True,
            short=["pv"],
        ),
        _rt(
            "storage.k8s.io",
            "v1",
            "storageclasses",
            "StorageClass",
            namespaced=False,
            short=["sc"],
            required=_req("provisioner"),
        ),
        _rt(
            "batch",
            "v1",
            "jobs",
            "Job",
            status=True,
            categories=_ALL,
            required=_POD_TEMPLATE_REQUIRED,
            return_deleted=True,
        ),
        # apps/v1
        _rt(
            "apps",
            "v1",
            "deployments",
            "Deployment",
            status=True,
            scale=True,
            short=["deploy"],
            categories=_ALL,
            required=(RequiredField("spec.selector"), *_POD_TEMPLATE_REQUIRED),
            scale_selector_path="spec.selector",
            defaults=[("spec.replicas", 1)],
        ),
        _rt(
            "apps",
            "v1",
            "statefulsets",
            "StatefulSet",
            status=True,
            scale=True,
            short=["sts"],
            categories=_ALL,
            required=(RequiredField("spec.selector"), *_POD_TEMPLATE_REQUIRED),
            scale_selector_path="spec.selector",
            defaults=[("spec.replicas", 1)],
        ),
        # rbac
        _rt("rbac.authorization.k8s.io", "v1", "roles", "Role"),
        _rt(
            "rbac.authorization.k8s.io",
            "v1",
            "rolebindings",
            "RoleBinding",
            required=_req("roleRef"),
        ),
        ResourceType(
            group="authorization.k8s.io",
            version="v1",
            plural="selfsubjectaccessreviews",
            kind="SelfSubjectAccessReview",
            namespaced=False,
            verbs=("create",),
        ),
        # events.k8s.io: the same Events as core/v1 seen through the newer API
        ResourceType(
            group="events.k8s.io",
            version="v1",
            plural="events",
            kind="Event",
            namespaced=True,
            short_names=("ev",),
            verbs=("get", "list"),
        ),
        _rt(
            "apps",
            "v1",
            "replicasets",
            "ReplicaSet",
            status=True,
            scale=True,
            short=["rs"],
            categories=_ALL,
            required=(RequiredField("spec.selector"), *_POD_TEMPLATE_REQUIRED),
            scale_selector_path="spec.selector",
            defaults=[("spec.replicas", 1)],
        ),
        # coordination (leader election of controllers)
        _rt("coordination.k8s.io", "v1", "leases", "Lease"),
        # DRA
        _rt(
            "resource.k8s.io",
            "v1",
            "resourceclaimtemplates",
            "ResourceClaimTemplate",
            required=(RequiredField("spec.spec", allow_empty=True),),
        ),
        _rt(
            "resource.k8s.io",
            "v1",
            "resourceclaims",
            "ResourceClaim",
            status=True,
            required=(RequiredField("spec", allow_empty=True),),
        ),
        _rt(
            "resource.k8s.io",
            "v1",
            "resourceslices",
            "ResourceSlice",
            namespaced=False,
            required=_req("spec.driver", "spec.pool"),
        ),
        _rt("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", namespaced=False),
        # CRD-backed kinds (builtin=False: strategic merge patch answers 415, like the real server)
        _rt(
            "leaderworkerset.x-k8s.io",
            "v1",
            "leaderworkersets",
            "LeaderWorkerSet",
            status=True,
            scale=True,
            builtin=False,
            short=["lws"],
            required=_req("spec.leaderWorkerTemplate", "spec.leaderWorkerTemplate.workerTemplate"),
            scale_selector_path="status.hpaPodSelector",
            defaults=[("spec.replicas", 1), ("spec.leaderWorkerTemplate.size", 1)],
        ),
        _rt(
            "inference.networking.k8s.io",
            "v1",
            "inferencepools",
            "InferencePool",
            status=True,
            builtin=False,
            short=["infpool"],
            required=_req("spec.selector", "spec.targetPorts", "spec.endpointPickerRef"),
        ),
        _rt(
            "gateway.networking.k8s.io",
            "v1",
            "httproutes",
            "HTTPRoute",
            status=True,
            builtin=False,
        ),
        # Envoy Gateway's policy kind (the stack's gateway implementation): the front door's
        # passive health checks and retries.
        _rt(
            "gateway.envoyproxy.io",
            "v1alpha1",
            "backendtrafficpolicies",
            "BackendTrafficPolicy",
            status=True,
            builtin=False,
            short=["btp"],
        ),
        _rt(
            "gateway.networking.k8s.io",
            "v1",
            "gateways",
            "Gateway",
            status=True,
            builtin=False,
            required=_req("spec.gatewayClassName", "spec.listeners"),
        ),
        _rt(
            "gateway.networking.k8s.io",
            "v1",
            "gatewayclasses",
            "GatewayClass",
            namespaced=False,
            status=True,
            builtin=False,
            required=_req("spec.controllerName"),
        ),
        _rt(
            "llm-d.ai",
            "v1alpha2",
            "inferenceobjectives",
            "InferenceObjective",
            status=True,
            builtin=False,
            required=_req("spec.poolRef"),
        ),
        _rt(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            namespaced=False,
            status=True,
            short=["crd"],
            required=_req("spec.group", "spec.names", "spec.scope", "spec.versions"),
        ),
    ]
