"""What the controller does for one object of the management cluster, from the object alone
(and the classes it knows): add the finalizer, report it invalid, hand it over, tear it down,
or let it go. Pure: no I/O, no Temporal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelDeployment
from modelfleet.api.kinds import parse_resource
from modelfleet.api.manifest_errors import InvalidResourceError
from modelfleet.api.meta import API_GROUP, Resource
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.scheduling.selector_errors import unevaluable_selectors

FINALIZER = f"{API_GROUP}/teardown"
API_VERSION = f"{API_GROUP}/v1alpha1"
# The kinds the controller watches, in apply order (a class before the cluster naming it...).
WATCHED: tuple[str, ...] = (
    "InferenceClass",
    "InferenceCluster",
    "InferenceGateway",
    "ModelCache",
    "ModelDeployment",
    "ModelEndpoint",
    "ModelService",
    "ModelAutoscaler",
)
# Written by kubectl apply: the whole previous object again, nothing modelfleet reads.
_DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


@dataclass(frozen=True)
class Key:
    """Which object: kind, namespace ("" for cluster-scoped kinds), name."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind.lower()}.{API_GROUP}/{where}{self.name}"


def key_of(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return Key(str(obj.get("kind", "")), str(meta.get("namespace") or ""), str(meta["name"]))


@dataclass(frozen=True)
class AddFinalizer:
    """The object has no teardown finalizer yet: add it before anything runs for it."""

    finalizers: list[str]


@dataclass(frozen=True)
class Invalid:
    """Only modelfleet could judge it, and it is wrong: say so, change nothing that runs."""

    message: str


@dataclass(frozen=True)
class Hand:
    """Hand the resource to its workflow (update-with-start, idempotent)."""

    resource: Resource
    generation: int


@dataclass(frozen=True)
class Teardown:
    """Deleted with our finalizer on it: tear down what it ran, then remove the finalizer."""

    remaining: list[str]  # the finalizers once ours is removed


@dataclass(frozen=True)
class Nothing:
    """Deleted, and not ours to hold any more."""


Action = AddFinalizer | Invalid | Hand | Teardown | Nothing


def document(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object as a manifest modelfleet validates: apiVersion, kind, metadata (name,
    namespace, labels, annotations) and spec; what the server added is dropped."""
    meta = obj.get("metadata") or {}
    clean: dict[str, Any] = {"name": meta.get("name")}
    if meta.get("namespace"):
        clean["namespace"] = meta["namespace"]
    if meta.get("labels"):
        clean["labels"] = dict(meta["labels"])
    annotations = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k not in _DROPPED_ANNOTATIONS
    }
    if annotations:
        clean["annotations"] = annotations
    out = {k: v for k, v in obj.items() if k not in ("metadata", "status")}
    out["metadata"] = clean
    return out


def invalid_message(exc: InvalidResourceError) -> str:
    """One line per broken rule, as ``modelfleet validate`` prints them (field: reason)."""
    return "; ".join(f"{e.field}: {e.reason}" for e in exc.errors)


def decide(
    obj: Mapping[str, Any],
    classes: Sequence[InferenceClass] = (),
    evaluator: SelectorEvaluator | None = None,
) -> Action:
    """What to do for ``obj`` now. ``classes``: the InferenceClasses known (the management
    cluster's), against which a deployment's CEL selectors must be able to evaluate."""
    meta = obj.get("metadata") or {}
    finalizers = [str(f) for f in meta.get("finalizers") or []]
    if meta.get("deletionTimestamp"):
        if FINALIZER in finalizers:
            return Teardown([f for f in finalizers if f != FINALIZER])
        return Nothing()
    if FINALIZER not in finalizers:
        return AddFinalizer([*finalizers, FINALIZER])
    try:
        resource = parse_resource(document(obj))
    except InvalidResourceError as exc:
        return Invalid(invalid_message(exc))
    if isinstance(resource, ModelDeployment) and classes:
        problems = unevaluable_selectors(resource, classes, evaluator or SelectorEvaluator())
        if problems:
            return Invalid("; ".join(f"{field}: {reason}" for field, reason in problems))
    return Hand(resource, int(meta.get("generation") or 0))


def missing_classes(cluster: InferenceCluster, known: set[str]) -> str | None:
    """Why ``cluster`` cannot be handed over yet: a pool names an InferenceClass neither the
    management cluster nor the fleet holds (None: every class is known)."""
    missing = [
        f"spec.nodePools[{i}].className: InferenceClass {pool.class_name!r} not found "
        "(apply it first)"
        for i, pool in enumerate(cluster.spec.node_pools)
        if pool.class_name not in known
    ]
    return "; ".join(missing) or None


def scale_writers(obj: Mapping[str, Any]) -> list[str]:
    """The field managers that wrote the object's ``/scale`` subresource (kubectl scale, an
    HPA, KEDA): its replicas have an external scaler."""
    managed = (obj.get("metadata") or {}).get("managedFields") or []
    return sorted({str(m.get("manager") or "") for m in managed if m.get("subresource") == "scale"})


def scale_target(obj: Mapping[str, Any]) -> Key | None:
    """The ModelDeployment a ModelAutoscaler object scales (None for any other object)."""
    if obj.get("kind") != "ModelAutoscaler":
        return None
    meta = obj.get("metadata") or {}
    target = ((obj.get("spec") or {}).get("scaleTargetRef") or {}).get("name")
    if not target or not meta.get("namespace"):
        return None
    return Key("ModelDeployment", str(meta["namespace"]), str(target))


def scaled_by_autoscaler(deployment: Key, autoscalers: Sequence[Mapping[str, Any]]) -> list[str]:
    """Names of the ModelAutoscalers (objects of the management cluster) that target
    ``deployment``."""
    found = []
    for obj in autoscalers:
        meta = obj.get("metadata") or {}
        target = ((obj.get("spec") or {}).get("scaleTargetRef") or {}).get("name")
        if meta.get("namespace") == deployment.namespace and target == deployment.name:
            found.append(str(meta.get("name")))
    return sorted(found)


def scaler_conflict(writers: Sequence[str], autoscalers: Sequence[str]) -> str | None:
    """Why the deployment's replicas are not changed: a ModelAutoscaler and an external
    scaler (a writer of /scale) both scale it. None when at most one does."""
    if not autoscalers or not writers:
        return None
    return (
        f"ModelAutoscaler {', '.join(autoscalers)} and an external scaler "
        f"({', '.join(writers)}, through the /scale subresource) both scale this deployment; "
        "remove one of them (nothing is changed until then)"
    )


def deployment_change(held: ModelDeployment | None, wanted: ModelDeployment) -> str:
    """How ``wanted`` reaches a deployment whose workflow holds ``held``: ``apply`` (new, or
    more than the replicas changed), ``scale`` (only the replicas: the deployment's ``scale``
    Update, as ``modelfleet scale`` and the /scale subresource mean) or ``unchanged``."""
    if held is None:
        return "apply"
    same_rest = held.model_copy(
        update={"spec": held.spec.model_copy(update={"replicas": wanted.spec.replicas})}
    )
    if same_rest.model_dump(mode="json") != wanted.model_dump(mode="json"):
        return "apply"
    return "unchanged" if held.spec.replicas == wanted.spec.replicas else "scale"
