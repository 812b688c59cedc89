"""The Fleet's compact, bounded state: what it carries across continue-as-new instead of full
resource objects, and the lossless conversions to and from those objects.

A continue-as-new input is one Temporal payload (2 MiB hard limit). Full ModelReplica and
InferenceCluster dumps cost ~1 KB per replica and up to ~1.8 KB per cluster, so the Fleet wedged
near 2,300 replicas. Here:

* a cluster is its spec dumped without defaults (pools are usually name, class and node count)
  plus what its workflow last reported;
* replicas are grouped by deployment, and a replica is one row (cluster, index, shape, pools,
  name when it is not the derived one). A *shape* is everything else of a replica (engines,
  templates, requests, serving, labels) with the placement-specific fields removed; every
  replica of one deployment template shares one shape, stored once by content hash.

Both conversions are lossless for what the Fleet and its readers use: ``replica_from_row``
rebuilds a ModelReplica equal to the one placed (the managed labels are derived again).

Layer rule: pure (pydantic, hashlib, json); no Temporal, no I/O.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from pydantic import Field

from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelReplica
from modelfleet.api.meta import Condition
from modelfleet.api.naming import (
    LABEL_CLUSTER,
    LABEL_DEPLOYMENT,
    LABEL_NAMESPACE,
    LABEL_REPLICA_INDEX,
    replica_name,
)
from modelfleet.contracts.fleet_payloads import PlaceResponse, ReplicaRemoval
from modelfleet.contracts.kube_payloads import DeviceGroup, PoolObservation
from modelfleet.contracts.status import ClusterRecord
from modelfleet.contracts.wire import WireModel
from modelfleet.scheduling.snapshot import QueueCapacity

_PLAIN_POOL = {"name", "className", "nodeCount"}
_MANAGED_LABELS = (LABEL_DEPLOYMENT, LABEL_NAMESPACE, LABEL_CLUSTER, LABEL_REPLICA_INDEX)

# (cluster, index, shape key, pool per member in engine/member order, name or "" when derived)
ReplicaRow = tuple[str, int, str, tuple[str, ...], str]


class ClusterEntry(WireModel):
    """One cluster as the Fleet carries it: the spec without defaults, and its last report."""

    spec: dict[str, Any]
    # Key of its node pools in ``FleetState.layouts``; "" when ``spec`` holds them.
    layout: str = ""
    ready: bool = False
    reason: str = ""
    gateway: str | None = None
    # pool -> (nodes, ready nodes) as last observed
    observed: dict[str, tuple[int, int]] = Field(default_factory=dict)
    # pool -> the devices its hardware reports, for the pools where they were observed
    devices: dict[str, list[DeviceGroup]] = Field(default_factory=dict)
    not_ready_since: datetime | None = None
    unreachable_since: datetime | None = None
    draining: bool = False
    caches: dict[str, str] = Field(default_factory=dict)
    queue: QueueCapacity | None = None


class DeploymentRows(WireModel):
    """The placed replicas of one deployment."""

    namespace: str
    name: str
    rows: list[ReplicaRow] = Field(default_factory=list)


class CompactLedger(WireModel):
    shapes: dict[str, dict[str, Any]] = Field(default_factory=dict)
    deployments: list[DeploymentRows] = Field(default_factory=list)


def cluster_entry(record: ClusterRecord) -> tuple[ClusterEntry, str, list[Any]]:
    """``record`` compacted, with its pool layout (key and content): clusters built from one
    template share a layout, which is stored once."""
    spec = record.spec.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    pools = spec["spec"].pop("nodePools")
    layout: list[Any] = [
        [p["name"], p["className"], p.get("nodeCount", 1)] if set(p) <= _PLAIN_POOL else p
        for p in pools
    ]
    key = shape_key({"pools": layout})
    entry = ClusterEntry(
        spec=spec,
        layout=key,
        ready=record.ready,
        reason=record.reason,
        gateway=record.gateway_address,
        observed={p: (o.nodes, o.ready_nodes) for p, o in record.observed_pools.items()},
        devices={p: o.devices for p, o in record.observed_pools.items() if o.devices is not None},
        not_ready_since=record.not_ready_since,
        unreachable_since=record.unreachable_since,
        draining=record.draining,
        caches=dict(record.caches),
        queue=record.queue,
    )
    return entry, key, layout


def cluster_record(entry: ClusterEntry, layouts: dict[str, list[Any]]) -> ClusterRecord:
    spec = json.loads(json.dumps(entry.spec))
    if entry.layout:
        spec["spec"]["nodePools"] = [
            {"name": p[0], "className": p[1], "nodeCount": p[2]} if isinstance(p, list) else p
            for p in layouts[entry.layout]
        ]
    return ClusterRecord(
        spec=InferenceCluster.model_validate(spec),
        ready=entry.ready,
        reason=entry.reason,
        gateway_address=entry.gateway,
        observed_pools={
            p: PoolObservation(nodes=n, ready_nodes=r, devices=entry.devices.get(p))
            for p, (n, r) in entry.observed.items()
        },
        not_ready_since=entry.not_ready_since,
        unreachable_since=entry.unreachable_since,
        draining=entry.draining,
        caches=dict(entry.caches),
        queue=entry.queue,
    )


def replica_shape(replica: ModelReplica) -> dict[str, Any]:
    """Everything of ``replica`` that its deployment's template decides: the dump without
    name, cluster, index, pools and managed labels."""
    dump = replica.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    meta = dump.get("metadata", {})
    meta.pop("name", None)
    meta.pop("namespace", None)
    labels = {k: v for k, v in meta.get("labels", {}).items() if k not in _MANAGED_LABELS}
    if labels:
        meta["labels"] = labels
    else:
        meta.pop("labels", None)
    spec = dump["spec"]
    spec.pop("clusterName", None)
    spec.pop("index", None)
    spec.pop("deployment", None)
    for engine in spec["engines"]:
        for member in engine["members"]:
            member.pop("nodePoolName", None)
    return dump


def shape_key(shape: dict[str, Any]) -> str:
    canonical = json.dumps(shape, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:10]


def replica_row(replica: ModelReplica, shape: str) -> ReplicaRow:
    spec = replica.spec
    pools = tuple(m.node_pool_name for e in spec.engines for m in e.members)
    derived = replica_name(replica.namespace, spec.deployment, spec.cluster_name, spec.index)
    return (
        spec.cluster_name,
        spec.index,
        shape,
        pools,
        "" if replica.name == derived else replica.name,
    )


def replica_from_row(
    namespace: str, deployment: str, row: ReplicaRow, shape: ModelReplica
) -> ModelReplica:
    """Rebuild one replica from its row and its shape (``shape_replica`` of its shape dict)."""
    cluster, index, _, pools, name = row
    pool_iter = iter(pools)
    engines = [
        engine.model_copy(
            update={
                "members": [
                    m.model_copy(update={"node_pool_name": next(pool_iter)}) for m in engine.members
                ]
            }
        )
        for engine in shape.spec.engines
    ]
    labels = dict(shape.metadata.labels)
    labels.update(
        {
            LABEL_DEPLOYMENT: deployment,
            LABEL_NAMESPACE: namespace,
            LABEL_CLUSTER: cluster,
            LABEL_REPLICA_INDEX: str(index),
        }
    )
    metadata = shape.metadata.model_copy(
        update={
            "name": name or replica_name(namespace, deployment, cluster, index),
            "namespace": namespace,
            "labels": labels,
        }
    )
    spec = shape.spec.model_copy(
        update={
            "cluster_name": cluster,
            "index": index,
            "deployment": deployment,
            "engines": engines,
        }
    )
    return shape.model_copy(update={"metadata": metadata, "spec": spec})


def shape_replica(shape: dict[str, Any]) -> ModelReplica:
    """A validated ModelReplica standing for a shape (placeholder name, cluster and pools)."""
    data = json.loads(json.dumps(shape))
    data.setdefault("metadata", {})["name"] = "shape"
    spec = data["spec"]
    spec["clusterName"] = "shape"
    spec["deployment"] = "shape"
    for engine in spec["engines"]:
        for member in engine["members"]:
            member["nodePoolName"] = "shape"
    return ModelReplica.model_validate(data)


class CompactAnswer(WireModel):
    """A remembered placement answer in compact form: its replicas (all of one deployment) as
    rows and shapes. Rejections are capped: a retry after a continue-as-new gets the first
    ``CARRIED`` cluster reasons and the summary, which counts them all."""

    at: datetime
    namespace: str
    deployment: str
    shapes: dict[str, dict[str, Any]] = Field(default_factory=dict)
    kept: list[ReplicaRow] = Field(default_factory=list)
    placed: list[ReplicaRow] = Field(default_factory=list)
    victims: list[tuple[ReplicaRow, str]] = Field(default_factory=list)
    conditions: list[Condition] = Field(default_factory=list)
    rejections: dict[str, str] = Field(default_factory=dict)
    summary: str = ""
    version: int = 0


def compact_answer(response: PlaceResponse, at: datetime, *, rejections: int) -> CompactAnswer:
    shapes: dict[str, dict[str, Any]] = {}
    some = [*response.kept, *response.placed, *(v.replica for v in response.victims)]
    namespace = some[0].namespace or "" if some else ""
    deployment = some[0].spec.deployment if some else ""

    def row(replica: ModelReplica) -> ReplicaRow:
        shape = replica_shape(replica)
        key = shape_key(shape)
        shapes.setdefault(key, shape)
        return replica_row(replica, key)

    return CompactAnswer(
        at=at,
        namespace=namespace,
        deployment=deployment,
        kept=[row(r) for r in response.kept],
        placed=[row(r) for r in response.placed],
        victims=[(row(v.replica), v.reason) for v in response.victims],
        shapes=shapes,
        conditions=response.conditions,
        rejections=dict(sorted(response.rejections.items())[:rejections]),
        summary=response.summary,
        version=response.version,
    )


def answer_from_compact(answer: CompactAnswer) -> PlaceResponse:
    shapes = {key: shape_replica(shape) for key, shape in answer.shapes.items()}

    def replica(row: ReplicaRow) -> ModelReplica:
        return replica_from_row(answer.namespace, answer.deployment, row, shapes[row[2]])

    return PlaceResponse(
        kept=[replica(r) for r in answer.kept],
        placed=[replica(r) for r in answer.placed],
        victims=[ReplicaRemoval(replica=replica(r), reason=why) for r, why in answer.victims],
        conditions=answer.conditions,
        rejections=answer.rejections,
        summary=answer.summary,
        version=answer.version,
    )
