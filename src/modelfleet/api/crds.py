"""The CustomResourceDefinitions of the modelfleet kinds, generated from their models: what a
management cluster needs installed for ``kubectl apply`` of a modelfleet manifest to be stored
(and watched by the controller). Pure, no I/O.

One CRD per kind in ``api.kinds.KINDS``, in the group of the kind's own apiVersion
(``modelfleet.dev``, or ``infrastructure.modelfleet.dev`` for Modelplane's internal kinds). The
Modelplane groups (``modelplane.ai``, ``infrastructure.modelplane.ai``) get CRDs of their own
with the same names and schema: a CRD serves exactly one group and an object's apiVersion is
its CRD's group, so a Modelplane document can only be accepted unchanged, as ``modelfleet
apply`` accepts it, by a CRD in Modelplane's group. Those are left out with ``modelplane=False``
(a cluster that still runs Modelplane owns them).

Every CRD has the status subresource (the controller writes status; users' writes to the main
resource leave it alone), ModelDeployment also the scale subresource (``kubectl scale``, an HPA
or a KEDA ScaledObject set ``spec.replicas``). The printer columns read the status fields the
controller writes:

* every kind: ``status.conditions`` (``Ready``: status, reason, message),
  ``status.observedGeneration``, ``status.phase``;
* ModelDeployment: ``status.replicas`` (replicas that exist), ``status.readyReplicas``,
  ``status.updatedReplicas``, ``status.selector`` (the label selector of its ModelReplicas, as
  the scale subresource reports it);
* ModelService: ``status.address``; ModelEndpoint: ``status.source``; ModelCache:
  ``status.ready`` (clusters where the cache is ready); ModelAutoscaler: ``status.current``,
  ``status.desired``.
"""

from __future__ import annotations

from typing import Any

from modelfleet.api.crd_rules import GATEWAY_SHAPE_RULES, ROOT_RULES, RULES
from modelfleet.api.crd_schema import merge_objects, openapi_schema
from modelfleet.api.kinds import KINDS
from modelfleet.api.meta import Resource
from modelfleet.api.modelplane_gateway import ModelplaneInferenceGateway

CRD_API_VERSION = "apiextensions.k8s.io/v1"
# ``kubectl get modelfleet`` lists every modelfleet object.
CATEGORY = "modelfleet"
# The label every generated CRD carries, so that they can be listed (and pruned) together.
CRD_LABELS = {"app.kubernetes.io/part-of": "modelfleet"}

_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def _col(name: str, path: str, kind: str = "string", priority: int = 0) -> dict[str, Any]:
    return {
        "name": name,
        "type": kind,
        "jsonPath": path,
        **({"priority": priority} if priority else {}),
    }


def _ready(column: str = "Ready", what: str = "status", priority: int = 0) -> dict[str, Any]:
    """A column of the Ready condition's ``what`` (status, reason, message)."""
    return _col(column, f'.status.conditions[?(@.type=="Ready")].{what}', priority=priority)


_PHASE = _col("Phase", ".status.phase")
_MESSAGE = _ready("Message", "message", priority=1)

# The columns of ``modelfleet get KIND`` that come from the object (spec, or the status the
# controller writes), in its order; NAME is kubectl's own, AGE comes last as there. A column
# the CLI computes from several fields is its closest single field here.
_COLUMNS: dict[str, list[dict[str, Any]]] = {
    "InferenceClass": [
        _col("Provider", ".spec.provisioning.provider"),
        _col("Devices", ".spec.devices[*].name"),
    ],
    "InferenceCluster": [
        _col("Source", ".spec.cluster.source"),
        _PHASE,
        _ready("Reason", "reason", priority=1),
    ],
    "ModelDeployment": [
        _col("Desired", ".spec.replicas", "integer"),
        _col("Ready", ".status.readyReplicas", "integer"),
        _col("Up-to-date", ".status.updatedReplicas", "integer"),
        _PHASE,
        _col("Replicas", ".status.replicas", "integer", priority=1),
        _MESSAGE,
    ],
    "ModelReplica": [
        _col("Deployment", ".spec.deployment"),
        _col("Cluster", ".spec.clusterName"),
        _PHASE,
    ],
    "ModelService": [_PHASE, _col("Address", ".status.address"), _MESSAGE],
    "ModelEndpoint": [_col("Source", ".status.source"), _col("URL", ".spec.url")],
    "InferenceGateway": [
        _col("Cluster", ".spec.cluster"),
        _col("Gateway", ".spec.gatewayName"),
        _col("Addresses", ".spec.addresses"),
    ],
    "ModelAutoscaler": [
        _col("Target", ".spec.scaleTargetRef.name"),
        _col("Min", ".spec.minReplicas", "integer"),
        _col("Max", ".spec.maxReplicas", "integer"),
        _col("Replicas", ".status.current", "integer"),
        _col("Desired", ".status.desired", "integer"),
    ],
    "ModelCache": [
        _col("Source", ".spec.source"),
        _col("Ready", ".status.ready", "integer"),
        _PHASE,
        _col("Revision", ".spec.huggingFace.revision", priority=1),
        _MESSAGE,
    ],
}
# Kinds held for Modelplane parity, not acted upon: the controller says so in Ready.
_HELD_COLUMNS = [_ready(), _ready("Reason", "reason")]

# Other shapes a kind's documents may take (api.kinds picks one by content): one schema
# accepts both.
_ALTERNATE_SHAPES: dict[str, type[Resource]] = {"InferenceGateway": ModelplaneInferenceGateway}

# The kinds with a scale subresource, and its paths.
_SCALE: dict[str, dict[str, str]] = {
    "ModelDeployment": {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    }
}


def _group_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.partition("/")
    return group, version


_CONDITION: dict[str, Any] = {
    "type": "object",
    "properties": {
        "type": {"type": "string", "maxLength": 316},
        "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
        "reason": {"type": "string", "maxLength": 1024},
        "message": {"type": "string", "maxLength": 32768},
        "lastTransitionTime": {"type": "string", "format": "date-time"},
        "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
    },
    "required": ["type", "status"],
}
_COUNT = {"type": "integer", "format": "int32", "minimum": 0}
# Status fields every kind's controller writes; a kind's own are added by _STATUS_FIELDS.
# Unknown status fields are kept: the controller's status grows with its workflows' and the
# schema must not drop what it writes before this list catches up.
_STATUS_FIELDS: dict[str, dict[str, Any]] = {
    "ModelDeployment": {
        "replicas": _COUNT,
        "readyReplicas": _COUNT,
        "updatedReplicas": _COUNT,
        "selector": {"type": "string"},
    },
    "ModelCache": {"ready": _COUNT},
    "ModelAutoscaler": {"current": _COUNT, "desired": _COUNT},
    "ModelService": {"address": {"type": "string"}},
    "ModelEndpoint": {"source": {"type": "string"}},
}


def status_schema(kind: str) -> dict[str, Any]:
    """The schema of a kind's ``status``: what the controller writes."""
    return {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
            "phase": {"type": "string"},
            # One condition per type, merged by type under server-side apply.
            "conditions": {
                "type": "array",
                "items": _CONDITION,
                "maxItems": 32,
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
            },
            **_STATUS_FIELDS.get(kind, {}),
        },
    }


# Required by the model, but filled from elsewhere when absent: a ModelReplica written by
# Modelplane keeps its deployment in a label (``ModelReplica._identity_from_labels``).
_FILLED_BY_THE_MODEL: dict[str, set[str]] = {"ModelReplica": {"deployment"}}


def _spec_schema(model: type[Resource]) -> dict[str, Any]:
    full = openapi_schema(model, RULES)
    spec: dict[str, Any] = full["properties"]["spec"]
    alternate = _ALTERNATE_SHAPES.get(model.KIND)
    if alternate is not None:
        other = openapi_schema(alternate, RULES)["properties"]["spec"]
        spec = {
            **merge_objects([spec, other]),
            "x-kubernetes-validations": GATEWAY_SHAPE_RULES,
        }
    dropped = _FILLED_BY_THE_MODEL.get(model.KIND, set())
    if dropped:
        spec["required"] = [f for f in spec.get("required", []) if f not in dropped]
    return spec


def _schema(model: type[Resource]) -> dict[str, Any]:
    """The OpenAPI v3 schema of one kind's objects (structural: ``api.crd_schema``)."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            # The apiserver owns metadata's schema; a CRD may only restrict name.
            "metadata": {"type": "object"},
            "spec": _spec_schema(model),
            "status": status_schema(model.KIND),
        },
        "required": ["spec"],
    }
    if model.KIND in ROOT_RULES:
        schema["x-kubernetes-validations"] = ROOT_RULES[model.KIND]
    return schema


def custom_resource_definition(model: type[Resource], api_version: str) -> dict[str, Any]:
    """The CRD serving ``model``'s kind at ``api_version`` (one of its ``API_VERSIONS``)."""
    group, version = _group_version(api_version)
    kind = model.KIND
    plural = model.plural()
    names: dict[str, Any] = {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": kind.lower(),
    }
    own_group = api_version == model.API_VERSIONS[0]
    # The Modelplane groups' CRDs go without short names: ``md`` names modelfleet's own kind
    # (kubectl warns when two resources claim one short name).
    if model.SHORT_NAMES and own_group:
        names["shortNames"] = list(model.SHORT_NAMES)
    if own_group:
        names["categories"] = [CATEGORY]
    subresources: dict[str, Any] = {"status": {}}
    if kind in _SCALE:
        subresources["scale"] = dict(_SCALE[kind])
    columns = _COLUMNS.get(kind, _HELD_COLUMNS)
    return {
        "apiVersion": CRD_API_VERSION,
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}", "labels": dict(CRD_LABELS)},
        "spec": {
            "group": group,
            "names": names,
            "scope": "Namespaced" if model.NAMESPACED else "Cluster",
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": _schema(model)},
                    "subresources": subresources,
                    # AGE after the columns ``get`` shows, before the ``-o wide`` ones, as
                    # ``modelfleet get`` prints them.
                    "additionalPrinterColumns": [
                        dict(c)
                        for c in (
                            *(c for c in columns if not c.get("priority")),
                            _AGE,
                            *(c for c in columns if c.get("priority")),
                        )
                    ],
                }
            ],
        },
    }


def custom_resource_definitions(*, modelplane: bool = True) -> list[dict[str, Any]]:
    """One CRD per kind modelfleet acts on or holds, in modelfleet's groups; with
    ``modelplane``, also one per kind in the Modelplane group its documents may declare."""
    crds = [custom_resource_definition(model, model.API_VERSIONS[0]) for model in KINDS.values()]
    if modelplane:
        crds += [
            custom_resource_definition(model, api_version)
            for model in KINDS.values()
            for api_version in model.API_VERSIONS[1:]
        ]
    return crds
