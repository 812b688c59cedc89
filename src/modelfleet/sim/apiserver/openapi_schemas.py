"""The schemas behind the simulated cluster's OpenAPI documents: hand-kept minimal core schemas
(ObjectMeta, Pod, PodSpec, Container, Probe, Deployment, ReplicaSet, Service, ConfigMap,
Namespace, Node, Event) with the descriptions ``kubectl explain`` prints, and the CRD kinds
modelfleet renders (LeaderWorkerSet, ResourceClaimTemplate, InferencePool, HTTPRoute) from
``openapi_crd_schemas.json``, which :func:`json_schema_to_openapi` derives from the strict JSON
schemas in ``tests/schemas`` (a unit test keeps the two in step). Any other kind gets an open
``spec``/``status``.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure apart from
reading the packaged JSON file once.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["CORE_SCHEMAS", "OBJECT_META", "crd_schemas", "json_schema_to_openapi"]

OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_CRD_FILE = Path(__file__).with_name("openapi_crd_schemas.json")


def _ref(name: str, description: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"$ref": f"#/definitions/{name}"}
    if description:
        out["description"] = description
    return out


def _s(description: str, kind: str = "string", **extra: Any) -> dict[str, Any]:
    return {"type": kind, "description": description, **extra}


def _obj(description: str, props: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "description": description, "properties": dict(props), **extra}


def _arr(description: str, items: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "array", "description": description, "items": dict(items), **extra}


def _keyed(
    description: str, items: Mapping[str, Any], key: str, strategy: str = "merge"
) -> dict[str, Any]:
    """A list merged by ``key`` under strategic merge patch (kubectl reads these extensions)."""
    return _arr(
        description,
        items,
        **{
            "x-kubernetes-patch-merge-key": key,
            "x-kubernetes-patch-strategy": strategy,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": [key],
        },
    )


def _map(description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "additionalProperties": {"type": "string"},
    }


def _open(description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "x-kubernetes-preserve-unknown-fields": True,
    }


def _kind_props(meta: str = "Standard object's metadata.") -> dict[str, Any]:
    return {
        "apiVersion": _s("APIVersion defines the versioned schema of this representation."),
        "kind": _s("Kind is a string value representing the REST resource this object represents."),
        "metadata": _ref(OBJECT_META, meta),
    }


_CORE = "io.k8s.api.core.v1"
_APPS = "io.k8s.api.apps.v1"
_SELECTOR = "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"
_INT_OR_STRING = {"x-kubernetes-int-or-string": True, "format": "int-or-string"}

CORE_SCHEMAS: dict[str, dict[str, Any]] = {
    OBJECT_META: _obj(
        "ObjectMeta is metadata that all persisted resources must have.",
        {
            "name": _s("Name must be unique within a namespace."),
            "generateName": _s("Optional prefix used by the server to generate a unique name."),
            "namespace": _s("Namespace defines the space within which each name must be unique."),
            "uid": _s("UID is the unique in time and space value for this object."),
            "resourceVersion": _s("An opaque value that represents the internal version."),
            "generation": _s("A sequence number representing a specific generation.", "integer"),
            "creationTimestamp": _s("The time this object was created.", format="date-time"),
            "deletionTimestamp": _s("The time this object will be deleted.", format="date-time"),
            "labels": _map("Map of string keys and values to organize and categorize objects."),
            "annotations": _map("Unstructured key value map set by external tools."),
            "finalizers": _arr("Must be empty before the object is deleted.", {"type": "string"}),
            "ownerReferences": _keyed(
                "Objects depended on by this object.", {"type": "object"}, "uid"
            ),
            "managedFields": _arr("Which manager owns which fields.", {"type": "object"}),
            "selfLink": _s("Deprecated; not set by the server."),
            "deletionGracePeriodSeconds": _s("Seconds allowed for graceful deletion.", "integer"),
        },
    ),
    _SELECTOR: _obj(
        "A label selector is a label query over a set of resources.",
        {
            "matchLabels": _map("A map of {key,value} pairs."),
            "matchExpressions": _arr("A list of label selector requirements.", {"type": "object"}),
        },
        **{"x-kubernetes-map-type": "atomic"},
    ),
    f"{_CORE}.Probe": _obj(
        "Probe describes a health check to be performed against a container.",
        {
            "httpGet": _obj(
                "HTTPGet specifies an HTTP GET request to perform.",
                {
                    "path": _s("Path to access on the HTTP server."),
                    "port": {"description": "Port to access on the container.", **_INT_OR_STRING},
                    "scheme": _s("Scheme to use for connecting to the host. Defaults to HTTP."),
                },
            ),
            "tcpSocket": _open("TCPSocket specifies a connection to a TCP port."),
            "exec": _open("Exec specifies a command to execute in the container."),
            "initialDelaySeconds": _s(
                "Seconds after the container started before probing.", "integer"
            ),
            "timeoutSeconds": _s(
                "Seconds after which the probe times out. Defaults to 1.", "integer"
            ),
            "periodSeconds": _s("How often (in seconds) to probe. Defaults to 10.", "integer"),
            "successThreshold": _s("Minimum consecutive successes. Defaults to 1.", "integer"),
            "failureThreshold": _s("Minimum consecutive failures. Defaults to 3.", "integer"),
        },
    ),
    f"{_CORE}.Container": _obj(
        "A single application container that you want to run within a pod.",
        {
            "name": _s("Name of the container specified as a DNS_LABEL."),
            "image": _s("Container image name."),
            "command": _arr("Entrypoint array.", {"type": "string"}),
            "args": _arr("Arguments to the entrypoint.", {"type": "string"}),
            "env": _keyed("Environment variables of the container.", {"type": "object"}, "name"),
            "ports": _keyed(
                "Ports to expose from the container.", {"type": "object"}, "containerPort"
            ),
            "resources": _open("Compute resources required by this container."),
            "volumeMounts": _keyed(
                "Pod volumes to mount into the container.", {"type": "object"}, "mountPath"
            ),
            "livenessProbe": _ref(f"{_CORE}.Probe", "Periodic probe of container liveness."),
            "readinessProbe": _ref(f"{_CORE}.Probe", "Periodic probe of container readiness."),
            "startupProbe": _ref(f"{_CORE}.Probe", "Startup probe of the container."),
            "imagePullPolicy": _s("Always, Never, IfNotPresent."),
            "terminationMessagePath": _s("Path of the container's termination message."),
            "terminationMessagePolicy": _s("How the termination message is populated."),
            "securityContext": _open("Security options the container should be run with."),
        },
        required=["name"],
    ),
    f"{_CORE}.PodSpec": _obj(
        "PodSpec is a description of a pod.",
        {
            "containers": _keyed(
                "List of containers belonging to the pod.", _ref(f"{_CORE}.Container"), "name"
            ),
            "initContainers": _keyed(
                "Initialization containers.", _ref(f"{_CORE}.Container"), "name"
            ),
            "nodeName": _s("A request to schedule this pod onto a specific node."),
            "nodeSelector": _map("Labels a node must have to fit this pod."),
            "tolerations": _arr("The pod's tolerations.", {"type": "object"}),
            "affinity": _open("The pod's scheduling constraints."),
            "volumes": _keyed(
                "Volumes that can be mounted by containers.",
                {"type": "object"},
                "name",
                "merge,retainKeys",
            ),
            "resourceClaims": _keyed(
                "ResourceClaims (DRA) the pod needs.",
                {"type": "object"},
                "name",
                "merge,retainKeys",
            ),
            "restartPolicy": _s("Restart policy for all containers. Defaults to Always."),
            "terminationGracePeriodSeconds": _s(
                "Seconds the pod needs to terminate gracefully. Defaults to 30.", "integer"
            ),
            "dnsPolicy": _s("DNS policy for the pod. Defaults to ClusterFirst."),
            "schedulerName": _s("The scheduler that dispatches the pod."),
            "serviceAccountName": _s("Name of the ServiceAccount to use to run this pod."),
            "securityContext": _open("Pod-level security attributes."),
            "subdomain": _s("The pod's subdomain."),
            "hostname": _s("The pod's hostname."),
        },
        required=["containers"],
    ),
    f"{_CORE}.PodTemplateSpec": _obj(
        "PodTemplateSpec describes the data a pod should have when created from a template.",
        {
            "metadata": _ref(OBJECT_META, "Standard object's metadata."),
            "spec": _ref(f"{_CORE}.PodSpec", "Specification of the desired behavior of the pod."),
        },
    ),
    f"{_CORE}.Pod": _obj(
        "Pod is a collection of containers that can run on a host.",
        {
            **_kind_props(),
            "spec": _ref(f"{_CORE}.PodSpec", "Specification of the desired behavior of the pod."),
            "status": _open("Most recently observed status of the pod."),
        },
    ),
    f"{_APPS}.DeploymentSpec": _obj(
        "DeploymentSpec is the specification of the desired behavior of the Deployment.",
        {
            "replicas": _s("Number of desired pods. Defaults to 1.", "integer"),
            "selector": _ref(_SELECTOR, "Label selector for pods."),
            "template": _ref(f"{_CORE}.PodTemplateSpec", "Template describes the pods."),
            "strategy": _obj(
                "The deployment strategy to use to replace existing pods with new ones.",
                {
                    "type": _s('Type of deployment. "Recreate" or "RollingUpdate" (default).'),
                    "rollingUpdate": _obj(
                        "Rolling update config params.",
                        {
                            "maxUnavailable": {
                                "description": "Pods that can be unavailable. Defaults to 25%.",
                                **_INT_OR_STRING,
                            },
                            "maxSurge": {
                                "description": "Pods above the desired count. Defaults to 25%.",
                                **_INT_OR_STRING,
                            },
                        },
                    ),
                },
            ),
            "minReadySeconds": _s("Seconds a new pod must be ready to be available.", "integer"),
            "revisionHistoryLimit": _s("Old ReplicaSets to retain. Defaults to 10.", "integer"),
            "progressDeadlineSeconds": _s("Seconds before a stalled rollout fails.", "integer"),
            "paused": _s("Indicates that the deployment is paused.", "boolean"),
        },
        required=["selector", "template"],
    ),
    f"{_APPS}.Deployment": _obj(
        "Deployment enables declarative updates for Pods and ReplicaSets.",
        {
            **_kind_props(),
            "spec": _ref(f"{_APPS}.DeploymentSpec", "Desired behavior of the Deployment."),
            "status": _open("Most recently observed status of the Deployment."),
        },
    ),
    f"{_APPS}.ReplicaSet": _obj(
        "ReplicaSet ensures that a specified number of pod replicas are running at any time.",
        {
            **_kind_props(),
            "spec": _obj(
                "Spec defines the desired behavior of the ReplicaSet.",
                {
                    "replicas": _s("Number of desired pods.", "integer"),
                    "selector": _ref(_SELECTOR, "Label selector for pods."),
                    "template": _ref(f"{_CORE}.PodTemplateSpec", "The pods to create."),
                    "minReadySeconds": _s("Seconds a pod must be ready.", "integer"),
                },
            ),
            "status": _open("Most recently observed status of the ReplicaSet."),
        },
    ),
    f"{_CORE}.Service": _obj(
        "Service is a named abstraction of software service (for example, mysql).",
        {
            **_kind_props(),
            "spec": _obj(
                "Spec defines the behavior of a service.",
                {
                    "type": _s("ClusterIP (default), NodePort, LoadBalancer, ExternalName."),
                    "selector": _map("Route service traffic to pods with these labels."),
                    "ports": _keyed(
                        "The ports exposed by this service.", {"type": "object"}, "port"
                    ),
                    "clusterIP": _s("The IP address of the service."),
                    "publishNotReadyAddresses": _s("Publish pods that are not ready.", "boolean"),
                },
                # Only the fields modelfleet renders are described; the rest is not checked.
                **{"x-kubernetes-preserve-unknown-fields": True},
            ),
            "status": _open("Most recently observed status of the service."),
        },
    ),
    f"{_CORE}.ConfigMap": _obj(
        "ConfigMap holds configuration data for pods to consume.",
        {
            **_kind_props(),
            "data": _map("Configuration data."),
            "binaryData": _map("Binary configuration data (base64)."),
            "immutable": _s("The data cannot be updated.", "boolean"),
        },
    ),
    f"{_CORE}.Namespace": _obj(
        "Namespace provides a scope for Names.",
        {
            **_kind_props(),
            "spec": _open("Spec defines the behavior of the Namespace."),
            "status": _open("Status describes the current status of a Namespace."),
        },
    ),
    f"{_CORE}.Node": _obj(
        "Node is a worker node in Kubernetes.",
        {
            **_kind_props(),
            "spec": _open("Spec defines the behavior of a node."),
            "status": _open("Most recently observed status of the node."),
        },
    ),
    f"{_CORE}.Event": _obj(
        "Event is a report of an event somewhere in the cluster.",
        {
            **_kind_props(),
            "involvedObject": _open("The object that this event is about."),
            "reason": _s("A short, machine understandable string for the transition."),
            "message": _s("A human-readable description of the status of this operation."),
            "type": _s("Type of this event (Normal, Warning)."),
            "count": _s("The number of times this event has occurred.", "integer"),
            "source": _open("The component reporting this event."),
        },
        **{"x-kubernetes-preserve-unknown-fields": True},
    ),
}


def json_schema_to_openapi(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> dict[str, Any]:
    """A strict JSON schema (draft 2020-12, as in tests/schemas) as an OpenAPI schema: ``$defs``
    references inlined (``objectMeta`` and pod templates become references to the core
    definitions), ``const`` as a one-value ``enum``, and the keywords OpenAPI v2 lacks (``if``,
    ``allOf``, ``not``, ``oneOf``, ``anyOf``, ``propertyNames``...) dropped."""
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = ref.rsplit("/", 1)[1]
        if target == "objectMeta":
            return _ref(OBJECT_META, "Standard object's metadata.")
        if target == "podTemplate":
            return _ref(f"{_CORE}.PodTemplateSpec", "A pod template.")
        return json_schema_to_openapi(defs.get(target) or {}, defs)
    out: dict[str, Any] = {}
    for key in (
        "description",
        "type",
        "format",
        "minimum",
        "maximum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "enum",
        "required",
    ):
        if key in schema:
            out[key] = copy.deepcopy(schema[key])
    if isinstance(out.get("type"), list):
        types = [t for t in out["type"] if t != "null"]
        out["type"] = types[0] if types else "string"
    if "const" in schema:
        out["enum"] = [schema["const"]]
    if "properties" in schema:
        out["properties"] = {
            name: json_schema_to_openapi(sub, defs) for name, sub in schema["properties"].items()
        }
        out.setdefault("type", "object")
    if isinstance(schema.get("items"), Mapping):
        out["items"] = json_schema_to_openapi(schema["items"], defs)
        out.setdefault("type", "array")
    if isinstance(schema.get("additionalProperties"), Mapping):
        out["additionalProperties"] = json_schema_to_openapi(schema["additionalProperties"], defs)
    if "type" not in out and "enum" in out:
        out["type"] = "string" if all(isinstance(v, str) for v in out["enum"]) else "integer"
    if "type" not in out and "$ref" not in out:
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def crd_schema_from_file(document: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """(apiVersion, kind, OpenAPI schema) of one tests/schemas document."""
    props = document.get("properties") or {}
    api_version = ((props.get("apiVersion") or {}).get("const")) or (
        (props.get("apiVersion") or {}).get("enum") or [""]
    )[0]
    kind = str((props.get("kind") or {}).get("const", ""))
    converted = json_schema_to_openapi(document, document.get("$defs") or {})
    converted["description"] = f"{kind} ({api_version}), as modelfleet renders it."
    converted.pop("required", None)
    converted["properties"].setdefault("status", _open("Most recently observed status."))
    return str(api_version), kind, converted


@functools.cache
def crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> schema of the CRD kinds modelfleet renders (packaged JSON)."""
    raw = json.loads(_CRD_FILE.read_text())
    return {(e["apiVersion"], e["kind"]): e["schema"] for e in raw["schemas"]}
