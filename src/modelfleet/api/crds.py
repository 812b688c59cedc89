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

from modelfleet.api.kinds import KINDS
from modelfleet.api.meta import Resource

CRD_API_VERSION = "apiextensions.k8s.io/v1"
# The label every generated CRD carries, so that they can be listed (and pruned) together.
CRD_LABELS = {"app.kubernetes.io/part-of": "modelfleet"}

_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def _ready(column: str = "Ready", what: str = "status", priority: int = 0) -> dict[str, Any]:
    return {
        "name": column,
        "type": "string",
        "jsonPath": f'.status.conditions[?(@.type=="Ready")].{what}',
        **({"priority": priority} if priority else {}),
    }


def _col(name: str, path: str, kind: str = "string", priority: int = 0) -> dict[str, Any]:
    return {
        "name": name,
        "type": kind,
        "jsonPath": path,
        **({"priority": priority} if priority else {}),
    }


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


def _schema(model: type[Resource]) -> dict[str, Any]:
    """The OpenAPI v3 schema of one kind's objects."""
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
        "required": ["spec"],
    }


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
    if model.SHORT_NAMES:
        names["shortNames"] = list(model.SHORT_NAMES)
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
                    "additionalPrinterColumns": [dict(c) for c in (*columns, _AGE)],
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
