"""Resources as ``get -o json|yaml`` prints them: each in its manifest shape (``apiVersion``,
``kind``, ``metadata``, ``spec``) plus the server's ``metadata.creationTimestamp`` and a
``status``, so the output feeds straight back into ``modelfleet apply -f -`` (which ignores
``status`` and server-set metadata, as kubectl does). Several resources make a kubectl ``List``.

Pure: built from the workflows' query results and visibility records; no Temporal calls here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from modelfleet.api.autoscalers import ModelAutoscaler
from modelfleet.api.caches import ModelCache
from modelfleet.api.classes import InferenceClass
from modelfleet.api.deployments import ModelDeployment, ModelReplica
from modelfleet.api.meta import API_VERSION, Resource
from modelfleet.api.services import InferenceGateway, ModelEndpoint, ModelService
from modelfleet.autoscaler.records import AutoscalerStatus
from modelfleet.contracts.accepted import AcceptedStatus
from modelfleet.contracts.cache_payloads import CacheStatus
from modelfleet.contracts.serving_payloads import ServiceStatus
from modelfleet.contracts.status import DeploymentStatus
from modelfleet.rendering.front_door import EndpointRecord

# On an endpoint a replica published (read-only, like the replica): ``apply`` skips documents
# carrying it, so ``get endpoints -o yaml | apply -f -`` never turns one into an external one.
PUBLISHED_BY = "modelfleet.dev/published-by"


@dataclass
class Fetched:
    """One resource as read back from the fleet."""

    kind: str
    name: str
    namespace: str  # "" for fleet-scoped kinds
    manifest: dict[str, Any]
    created: datetime | None = None
    labels: dict[str, str] = field(default_factory=dict)
    # Why the resource's workflow did not answer ("": it did): the row shows what visibility
    # knows, and the list says so (``get`` exits 1, as kubectl after a partial list).
    error: str = ""
    # Why a source every row of the list shares did not answer (the Fleet, for clusters): the
    # row holds only what visibility knows; ``get`` says so once for all such rows, exits 1.
    source_error: str = ""

    @property
    def status(self) -> dict[str, Any]:
        status: dict[str, Any] = self.manifest.get("status") or {}
        return status


def _with_server_fields(
    wire: dict[str, Any], created: datetime | None, status: dict[str, Any]
) -> dict[str, Any]:
    wire["apiVersion"] = wire.get("apiVersion") or API_VERSION
    metadata = dict(wire.get("metadata") or {})
    stamp = _utc(created)
    if stamp:
        metadata["creationTimestamp"] = stamp
    wire["metadata"] = metadata
    wire["status"] = status
    return wire


def _utc(at: datetime | None) -> str | None:
    """RFC 3339 in UTC with a Z, as Kubernetes writes ``creationTimestamp``."""
    if at is None:
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def unanswered_reason(exc: BaseException) -> str:
    """Why a workflow did not answer, on one line: the RPC's or query's message, else the
    exception's text, else its type."""
    return " ".join(str(getattr(exc, "message", "") or exc).split()) or type(exc).__name__


def unanswered_resource(
    kind: str, namespace: str, name: str, run: Any, phase: str | None, exc: BaseException
) -> Fetched:
    """A resource whose workflow could not answer now: its name and age from visibility, the
    phase it last published (search attribute), and why it did not answer."""
    reason = unanswered_reason(exc)
    created = getattr(run, "start_time", None)
    manifest = _with_server_fields(
        {
            "apiVersion": API_VERSION,
            "kind": kind,
            "metadata": {"name": name, "namespace": namespace},
        },
        created,
        {
            "phase": phase or "Unknown",
            "ready": "?",
            "desired": "?",
            "updated": "?",
            "message": f"did not answer: {reason}",
        },
    )
    return Fetched(kind, name, namespace, manifest, created, {}, error=reason)


def brief_deployment_resource(
    namespace: str,
    name: str,
    created: datetime | None,
    phase: str,
    ready: int,
    desired: int,
    updated: int,
    clusters: list[str] | None = None,
) -> Fetched:
    """A ModelDeployment as visibility knows it (its published search attributes): enough for
    the plain table, ``-o name`` and ``describe`` when its workflow does not answer, never
    printed as a manifest (no spec, no labels)."""
    status: dict[str, Any] = {"phase": phase, "ready": ready, "desired": desired}
    status["updated"] = updated
    if clusters is not None:
        status["clusters"] = clusters
    manifest = _with_server_fields(
        {
            "apiVersion": API_VERSION,
            "kind": "ModelDeployment",
            "metadata": {"name": name, "namespace": namespace},
        },
        created,
        status,
    )
    return Fetched("ModelDeployment", name, namespace, manifest, created)


def class_resource(
    cls: InferenceClass, used_by: list[str], created: datetime | None = None
) -> Fetched:
    manifest = _with_server_fields(cls.to_wire(), created, {"usedBy": used_by})
    return Fetched("InferenceClass", cls.name, "", manifest, created, dict(cls.metadata.labels))


def deployment_resource(
    spec: ModelDeployment, status: DeploymentStatus, created: datetime | None
) -> Fetched:
    wire = spec.to_wire()
    body = status.model_dump(mode="json", by_alias=True, exclude={"namespace", "name"})
    manifest = _with_server_fields(wire, created, body)
    manifest["metadata"]["generation"] = status.generation
    return Fetched(
        "ModelDeployment",
        spec.name,
        spec.namespace,
        manifest,
        created,
        dict(spec.metadata.labels),
    )


def replica_resource(replica: ModelReplica, created: datetime | None, phase: str | None) -> Fetched:
    status = {"phase": phase or "Unknown", "cluster": replica.spec.cluster_name}
    manifest = _with_server_fields(replica.to_wire(), created, status)
    manifest["metadata"].setdefault("namespace", replica.namespace)
    return Fetched(
        "ModelReplica",
        replica.name,
        replica.namespace,
        manifest,
        created,
        dict(replica.metadata.labels),
    )


def service_resource(
    spec: ModelService, status: ServiceStatus, created: datetime | None
) -> Fetched:
    body = status.model_dump(mode="json", by_alias=True, exclude={"namespace", "name"})
    manifest = _with_server_fields(spec.to_wire(), created, body)
    return Fetched(
        "ModelService", spec.name, spec.namespace, manifest, created, dict(spec.metadata.labels)
    )


def endpoint_resource(record: EndpointRecord) -> Fetched:
    """A directory record in ModelEndpoint shape; one a replica published is marked so."""
    metadata: dict[str, Any] = {
        "name": record.name,
        "namespace": record.namespace,
        "labels": dict(record.labels),
    }
    if record.replica:
        metadata["annotations"] = {PUBLISHED_BY: f"modelreplica/{record.replica}"}
    spec: dict[str, Any] = {"url": record.url, "rewritePath": record.rewrite_path}
    if record.auth_secret:
        spec["authSecretRef"] = {"name": record.auth_secret}
    endpoint = ModelEndpoint.model_validate(
        {"apiVersion": API_VERSION, "kind": "ModelEndpoint", "metadata": metadata, "spec": spec}
    )
    status = {"source": "replica" if record.replica else "external", "replica": record.replica}
    manifest = _with_server_fields(endpoint.to_wire(), record.created, status)
    return Fetched(
        "ModelEndpoint",
        record.name,
        record.namespace,
        manifest,
        record.created,
        dict(record.labels),
    )


def gateway_resource(gateway: InferenceGateway, created: datetime | None = None) -> Fetched:
    manifest = _with_server_fields(gateway.to_wire(), created, {})
    return Fetched(
        "InferenceGateway", gateway.name, "", manifest, created, dict(gateway.metadata.labels)
    )


def autoscaler_resource(
    spec: ModelAutoscaler, status: AutoscalerStatus, created: datetime | None
) -> Fetched:
    body = status.model_dump(mode="json", by_alias=True, exclude={"namespace", "name"})
    manifest = _with_server_fields(spec.to_wire(), created, body)
    manifest["metadata"]["generation"] = status.generation
    return Fetched(
        "ModelAutoscaler", spec.name, spec.namespace, manifest, created, dict(spec.metadata.labels)
    )


def cache_resource(spec: ModelCache, status: CacheStatus, created: datetime | None) -> Fetched:
    """A ModelCache as applied, with its per-cluster staging status."""
    body = status.model_dump(mode="json", by_alias=True, exclude={"namespace", "name"})
    manifest = _with_server_fields(spec.to_wire(), created, body)
    return Fetched(
        "ModelCache", spec.name, spec.namespace, manifest, created, dict(spec.metadata.labels)
    )


def entity_resource(spec: Resource, status: BaseModel | None, created: datetime | None) -> Fetched:
    """A resource of a kind that follows the entity convention (``cli.kinds.entity_kind``): the
    spec as applied, with the status model its workflow reports."""
    body = status.model_dump(mode="json", by_alias=True) if status is not None else {}
    manifest = _with_server_fields(spec.to_wire(), created, body)
    return Fetched(
        spec.KIND, spec.name, spec.namespace, manifest, created, dict(spec.metadata.labels)
    )


# The phase of a document accepted for Modelplane parity and held without being acted upon.
NOT_ACTED_UPON = "NotActedUpon"


def accepted_resource(status: AcceptedStatus, created: datetime | None) -> Fetched:
    """A held document as applied, its status saying it is not acted upon and why."""
    body = {
        "phase": NOT_ACTED_UPON,
        "reason": status.reason,
        "conditions": [
            {
                "type": "ActedUpon",
                "status": "False",
                "reason": NOT_ACTED_UPON,
                "message": status.reason,
            }
        ],
    }
    manifest = _with_server_fields(dict(status.document), created, body)
    labels = dict(manifest["metadata"].get("labels") or {})
    return Fetched(status.kind, status.name, status.namespace, manifest, created, labels)


def as_document(items: list[Fetched], single: bool) -> dict[str, Any]:
    """One manifest when one resource was named, else kubectl's ``List``."""
    if single and len(items) == 1:
        return items[0].manifest
    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": [i.manifest for i in items],
        "metadata": {"resourceVersion": ""},
    }
