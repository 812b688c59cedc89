"""Kubernetes protobuf request bodies (``Content-Type: application/vnd.kubernetes.protobuf``) for
the kinds kubectl's typed clients send that way: ``kubectl auth can-i`` (SelfSubjectAccessReview)
and ``kubectl create namespace|configmap|secret|serviceaccount|deployment|service|role|
rolebinding``. kubectl v1.32 does
not fall back to JSON when the server answers 415, so the emulator reads these bodies; answers
stay JSON, which the same clients accept (they send ``Accept: ...protobuf,application/json``).

The envelope is the 4-byte magic ``k8s\\0`` and a ``runtime.Unknown`` (typeMeta, raw); ``raw`` is
the object's message, decoded here against hand-kept field tables (the field numbers of the
upstream ``generated.proto`` files) for exactly the fields those commands set. Unknown fields are
skipped; zero values are dropped like JSON's ``omitempty`` except where the Go field is a
pointer (``replicas``). Other kinds are refused with 415 as before.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure: bytes in,
JSON-like dicts out; no I/O.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from modelfleet.sim.apiserver import status_errors

__all__ = ["PROTOBUF", "decode_object"]

PROTOBUF = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"

# A field: (json name, type). Types: "string", "bytes", "int", "bool", "time", "intorstr",
# a message name (in _MESSAGES), "map" (string->string), "bmap" (string->bytes, base64 in JSON),
# "qmap" (string->Quantity); a trailing "[]" makes it repeated; a leading "*" keeps zero values.
Field = tuple[str, str]
_MESSAGES: dict[str, dict[int, Field]] = {
    "TypeMeta": {1: ("apiVersion", "string"), 2: ("kind", "string")},
    "Unknown": {
        1: ("typeMeta", "TypeMeta"),
        2: ("raw", "bytes"),
        3: ("contentEncoding", "string"),
        4: ("contentType", "string"),
    },
    "ObjectMeta": {
        1: ("name", "string"),
        2: ("generateName", "string"),
        3: ("namespace", "string"),
        5: ("uid", "string"),
        6: ("resourceVersion", "string"),
        7: ("generation", "int"),
        11: ("labels", "map"),
        12: ("annotations", "map"),
        14: ("finalizers", "string[]"),
    },
    "LabelSelector": {
        1: ("matchLabels", "map"),
        2: ("matchExpressions", "LabelSelectorRequirement[]"),
    },
    "LabelSelectorRequirement": {
        1: ("key", "string"),
        2: ("operator", "string"),
        3: ("values", "string[]"),
    },
    # authorization.k8s.io/v1
    "SelfSubjectAccessReview": {
        1: ("metadata", "ObjectMeta"),
        2: ("spec", "SelfSubjectAccessReviewSpec"),
    },
    "SelfSubjectAccessReviewSpec": {
        1: ("resourceAttributes", "ResourceAttributes"),
        2: ("nonResourceAttributes", "NonResourceAttributes"),
    },
    "ResourceAttributes": {
        1: ("namespace", "string"),
        2: ("verb", "string"),
        3: ("group", "string"),
        4: ("version", "string"),
        5: ("resource", "string"),
        6: ("subresource", "string"),
        7: ("name", "string"),
    },
    "NonResourceAttributes": {1: ("path", "string"), 2: ("verb", "string")},
    # core/v1
    "Namespace": {1: ("metadata", "ObjectMeta"), 2: ("spec", "NamespaceSpec")},
    "NamespaceSpec": {1: ("finalizers", "string[]")},
    "ConfigMap": {
        1: ("metadata", "ObjectMeta"),
        2: ("data", "map"),
        3: ("binaryData", "bmap"),
        4: ("immutable", "*bool"),
    },
    "Secret": {
        1: ("metadata", "ObjectMeta"),
        2: ("data", "bmap"),
        3: ("type", "string"),
        4: ("stringData", "map"),
        5: ("immutable", "*bool"),
    },
    "ServiceAccount": {1: ("metadata", "ObjectMeta")},
    "Service": {1: ("metadata", "ObjectMeta"), 2: ("spec", "ServiceSpec")},
    "ServiceSpec": {
        1: ("ports", "ServicePort[]"),
        2: ("selector", "map"),
        3: ("clusterIP", "string"),
        4: ("type", "string"),
        5: ("externalIPs", "string[]"),
        7: ("sessionAffinity", "string"),
        10: ("externalName", "string"),
        13: ("publishNotReadyAddresses", "bool"),
    },
    "ServicePort": {
        1: ("name", "string"),
        2: ("protocol", "string"),
        3: ("port", "int"),
        4: ("targetPort", "intorstr"),
        5: ("nodePort", "int"),
    },
    # rbac.authorization.k8s.io/v1
    "Role": {1: ("metadata", "ObjectMeta"), 2: ("rules", "PolicyRule[]")},
    "PolicyRule": {
        1: ("verbs", "string[]"),
        2: ("apiGroups", "string[]"),
        3: ("resources", "string[]"),
        4: ("resourceNames", "string[]"),
        5: ("nonResourceURLs", "string[]"),
    },
    "RoleBinding": {
        1: ("metadata", "ObjectMeta"),
        2: ("subjects", "Subject[]"),
        3: ("roleRef", "RoleRef"),
    },
    "Subject": {
        1: ("kind", "string"),
        2: ("apiGroup", "string"),
        3: ("name", "string"),
        4: ("namespace", "string"),
    },
    "RoleRef": {1: ("apiGroup", "string"), 2: ("kind", "string"), 3: ("name", "string")},
    "PodTemplateSpec": {1: ("metadata", "ObjectMeta"), 2: ("spec", "PodSpec")},
    "PodSpec": {
        2: ("containers", "Container[]"),
        3: ("restartPolicy", "string"),
        4: ("terminationGracePeriodSeconds", "*int"),
        6: ("dnsPolicy", "string"),
        7: ("nodeSelector", "map"),
        8: ("serviceAccountName", "string"),
        19: ("schedulerName", "string"),
        20: ("initContainers", "Container[]"),
    },
    "Container": {
        1: ("name", "string"),
        2: ("image", "string"),
        3: ("command", "string[]"),
        4: ("args", "string[]"),
        5: ("workingDir", "string"),
        6: ("ports", "ContainerPort[]"),
        7: ("env", "EnvVar[]"),
        8: ("resources", "ResourceRequirements"),
        13: ("terminationMessagePath", "string"),
        14: ("imagePullPolicy", "string"),
        20: ("terminationMessagePolicy", "string"),
    },
    "ContainerPort": {
        1: ("name", "string"),
        2: ("hostPort", "int"),
        3: ("containerPort", "int"),
        4: ("protocol", "string"),
    },
    "EnvVar": {1: ("name", "string"), 2: ("value", "string")},
    "ResourceRequirements": {1: ("limits", "qmap"), 2: ("requests", "qmap")},
    # apps/v1
    "Deployment": {1: ("metadata", "ObjectMeta"), 2: ("spec", "DeploymentSpec")},
    "DeploymentSpec": {
        1: ("replicas", "*int"),
        2: ("selector", "LabelSelector"),
        3: ("template", "PodTemplateSpec"),
        4: ("strategy", "DeploymentStrategy"),
        5: ("minReadySeconds", "int"),
        6: ("revisionHistoryLimit", "*int"),
        7: ("paused", "bool"),
        9: ("progressDeadlineSeconds", "*int"),
    },
    "DeploymentStrategy": {1: ("type", "string"), 2: ("rollingUpdate", "RollingUpdate")},
    "RollingUpdate": {1: ("maxUnavailable", "intorstr"), 2: ("maxSurge", "intorstr")},
    "IntOrString": {1: ("type", "int"), 2: ("intVal", "int"), 3: ("strVal", "string")},
}

# apiVersion/kind -> top-level message
_KINDS: dict[tuple[str, str], str] = {
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): "SelfSubjectAccessReview",
    ("v1", "Namespace"): "Namespace",
    ("v1", "ConfigMap"): "ConfigMap",
    ("v1", "Secret"): "Secret",
    ("v1", "ServiceAccount"): "ServiceAccount",
    ("v1", "Service"): "Service",
    ("rbac.authorization.k8s.io/v1", "Role"): "Role",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "RoleBinding",
    ("apps/v1", "Deployment"): "Deployment",
}


class _MalformedError(Exception):
    pass


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise _MalformedError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs: varints as ints, length-delimited as bytes."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise _MalformedError("truncated field")
            out.append((number, data[pos : pos + length]))
            pos += length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise _MalformedError(f"unsupported wire type {wire}")
    return out


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _scalar(kind: str, value: int | bytes) -> Any:
    if kind == "string":
        return value.decode() if isinstance(value, bytes) else str(value)
    if kind == "bytes":
        return value if isinstance(value, bytes) else b""
    if kind == "int":
        return _signed(value) if isinstance(value, int) else 0
    if kind == "bool":
        return bool(value)
    if kind == "intorstr":
        raw = _message("IntOrString", value if isinstance(value, bytes) else b"", keep_zero=True)
        return raw.get("strVal", "") if raw.get("type") == 1 else int(raw.get("intVal", 0))
    if kind == "time":
        fields = dict(_fields(value if isinstance(value, bytes) else b""))
        seconds = fields.get(1, 0)
        if not isinstance(seconds, int) or not seconds:
            return None
        return datetime.fromtimestamp(_signed(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return _message(kind, value if isinstance(value, bytes) else b"")


def _map_entry(value: int | bytes, kind: str) -> tuple[str, Any]:
    entry = dict(_fields(value if isinstance(value, bytes) else b""))
    key = entry.get(1, b"")
    raw = entry.get(2, b"")
    key_text = key.decode() if isinstance(key, bytes) else str(key)
    if kind == "bmap":
        return key_text, base64.b64encode(raw if isinstance(raw, bytes) else b"").decode()
    if kind == "qmap":
        quantity = dict(_fields(raw if isinstance(raw, bytes) else b"")).get(1, b"")
        return key_text, quantity.decode() if isinstance(quantity, bytes) else str(quantity)
    return key_text, raw.decode() if isinstance(raw, bytes) else str(raw)


def _empty(value: Any) -> bool:
    return value in ("", 0, False, None) or (isinstance(value, dict | list) and not value)


def _message(name: str, data: bytes, *, keep_zero: bool = False) -> dict[str, Any]:
    table = _MESSAGES[name]
    out: dict[str, Any] = {}
    for number, value in _fields(data):
        spec = table.get(number)
        if spec is None:
            continue  # a field kubectl's create commands do not set
        json_name, kind = spec
        pointer = kind.startswith("*")
        kind = kind.lstrip("*")
        if kind in ("map", "bmap", "qmap"):
            key, item = _map_entry(value, kind)
            out.setdefault(json_name, {})[key] = item
            continue
        if kind.endswith("[]"):
            out.setdefault(json_name, []).append(_scalar(kind[:-2], value))
            continue
        decoded = _scalar(kind, value)
        if pointer or keep_zero or not _empty(decoded):
            out[json_name] = decoded
    return out


def decode_object(body: bytes) -> dict[str, Any]:
    """A protobuf-encoded request body as the JSON object it stands for (400/415 otherwise)."""
    if not body.startswith(_MAGIC):
        raise status_errors.bad_request("the protobuf body does not start with the k8s magic")
    try:
        unknown = _message("Unknown", body[len(_MAGIC) :])
        type_meta: Mapping[str, Any] = unknown.get("typeMeta") or {}
        key = (str(type_meta.get("apiVersion", "")), str(type_meta.get("kind", "")))
        message = _KINDS.get(key)
        if message is None:
            raise status_errors.unsupported_media_type(PROTOBUF)
        obj = _message(message, bytes(unknown.get("raw") or b""))
    except (_MalformedError, UnicodeDecodeError) as exc:
        raise status_errors.bad_request(f"invalid protobuf body: {exc}") from None
    return {"apiVersion": key[0], "kind": key[1], **obj}
