"""The CLI's registry of resource kinds: one ``KindSpec`` per kind, and everything the verbs
need to know about kinds derived from it: the words that name a kind (kind, plural, short
names), the "unknown kind" error, apply and delete order, ``get`` columns and rows, how a kind
is read (``get``), shown (``describe``), applied and deleted, its workflow and workflow IDs,
and shell completion of kinds.

A kind's spec sits here; its API model (api/, parsed through api/kinds) and its entity
workflow package are the other places a new kind touches. The readers, rows and describers
named below live in cli/resources, cli/columns and cli/describers, which look the registry up
at call time (this module imports them).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import typer
from temporalio.client import Client, WorkflowUpdateStage

from modelfleet.accepted.workflow import AcceptedResourceWorkflow
from modelfleet.api.autoscalers import ModelAutoscaler
from modelfleet.api.caches import ModelCache
from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelDeployment, ModelReplica
from modelfleet.api.infrastructure import CLOUD_CLUSTER_KINDS, ServingStack
from modelfleet.api.meta import API_GROUP, Resource
from modelfleet.api.services import InferenceGateway, ModelEndpoint, ModelService
from modelfleet.autoscaler.workflow import AutoscalerWorkflow, autoscaler_id
from modelfleet.cache.workflow import CacheWorkflow
from modelfleet.cli import cluster_view, columns, describers, resources
from modelfleet.cli.autoscaler import apply_autoscaler
from modelfleet.cli.clusters import delete_cluster, fetch_clusters
from modelfleet.cli.columns import Row, accepted_row
from modelfleet.cli.describers import Described
from modelfleet.cli.entities import delete_entity, update_with_start
from modelfleet.cli.errors import UsageError
from modelfleet.cli.manifests import Fetched
from modelfleet.cli.serving import apply_serving, delete_serving
from modelfleet.cluster.workflow import ClusterWorkflow
from modelfleet.contracts.accepted import AcceptedInput
from modelfleet.contracts.cache_payloads import CacheInput, DeleteCache
from modelfleet.contracts.ids import (
    FLEET_ID,
    accepted_id,
    cache_id,
    cluster_id,
    deployment_id,
    replica_id,
    service_id,
)
from modelfleet.contracts.serving_payloads import ENDPOINTS_ID
from modelfleet.deployment.workflow import DeploymentInput, DeploymentWorkflow
from modelfleet.fleet.workflow import FleetWorkflow
from modelfleet.replica.workflow import ReplicaWorkflow
from modelfleet.service.workflow import ServiceWorkflow
from modelfleet.worker.tuning import Tuning

Fetch = Callable[[Client, str | None, set[str]], Awaitable[list[Fetched]]]
Describe = Callable[[Described], Awaitable[None]]
# client, resource, RPC timeout, tuning -> the ID of the workflow that now holds it
Apply = Callable[[Client, Any, timedelta | None, Tuning | None], Awaitable[str]]
# client, namespace, name, wait, force
Delete = Callable[[Client, str, str, bool, bool], Awaitable[None]]
# client, namespace, name -> whether a resource of that name is there to delete
Exists = Callable[[Client, str, str], Awaitable[bool]]


@dataclass(frozen=True)
class KindSpec:
    """Everything the CLI knows about one kind."""

    model: type[Resource]
    plural: str
    # Short names, kubectl's own among them where they name the same idea (``deploy``, ``svc``,
    # ``ep``, ``hpa``, ``gtw`` as Gateway API's).
    short_names: tuple[str, ...]
    # Everyday words for the kind (``deployment``, ``deployments``): the first pair's plural is
    # what ``get --help`` lists.
    aliases: tuple[str, ...] = ()
    workflow: str = ""  # the workflow type that holds a resource of the kind
    workflow_id: Callable[[str, str], str] | None = None  # (namespace, name) -> ID
    # Order within an apply (lower first; None: not applied, ``not_applied`` says why) and
    # within a delete (lower first; None: not deleted by name, ``not_deleted`` says why).
    apply_rank: int | None = None
    delete_rank: int | None = None
    not_applied: str = ""
    not_deleted: str = ""
    columns: tuple[str, ...] = ()
    wide_columns: tuple[str, ...] = ()
    row: Row = accepted_row
    fetch: Fetch | None = None
    describe: Describe = describers.accepted
    apply: Apply | None = None
    delete: Delete | None = None
    exists: Exists | None = None  # None: a running workflow under ``workflow_id``
    # Held by the AcceptedResource workflow without being acted upon (a Modelplane parity kind).
    held: bool = False

    @property
    def name(self) -> str:
        return self.model.KIND

    @property
    def namespaced(self) -> bool:
        return self.model.NAMESPACED

    @property
    def words(self) -> tuple[str, ...]:
        """Every word that names the kind on a command line, lower case."""
        return (self.name.lower(), self.plural, *self.short_names, *self.aliases)

    @property
    def listed_as(self) -> str:
        """How ``get --help`` names the kind: its everyday plural, else its plural."""
        return self.aliases[1] if len(self.aliases) > 1 else self.plural


# --- how each kind is applied and deleted -----------------------------------------------------


async def _apply_class(
    client: Client, r: InferenceClass, rpc_timeout: timedelta | None, _: Tuning | None
) -> str:
    await client.get_workflow_handle(FLEET_ID).execute_update(
        FleetWorkflow.put_class, r, rpc_timeout=rpc_timeout
    )
    return FLEET_ID


async def _apply_cluster(
    client: Client, r: InferenceCluster, rpc_timeout: timedelta | None, tuning: Tuning | None
) -> str:
    return await update_with_start(
        client,
        ClusterWorkflow.apply,
        r,
        run=ClusterWorkflow.run,
        run_arg=(tuning or Tuning.from_env()).cluster_input(r),
        workflow_id=cluster_id(r.name),
        summary=f"InferenceCluster {r.name}",
        rpc_timeout=rpc_timeout,
    )


async def _apply_deployment(
    client: Client, r: ModelDeployment, rpc_timeout: timedelta | None, _: Tuning | None
) -> str:
    return await update_with_start(
        client,
        DeploymentWorkflow.apply,
        r,
        run=DeploymentWorkflow.run,
        run_arg=DeploymentInput(spec=r),
        workflow_id=deployment_id(r.namespace, r.name),
        summary=f"ModelDeployment {r.namespace}/{r.name}",
        rpc_timeout=rpc_timeout,
    )


async def _apply_cache(
    client: Client, r: ModelCache, rpc_timeout: timedelta | None, _: Tuning | None
) -> str:
    return await update_with_start(
        client,
        CacheWorkflow.apply,
        r,
        run=CacheWorkflow.run,
        run_arg=CacheInput(spec=r),
        workflow_id=cache_id(r.namespace, r.name),
        summary=f"ModelCache {r.namespace}/{r.name}",
        rpc_timeout=rpc_timeout,
    )


async def _apply_autoscaler(
    client: Client, r: ModelAutoscaler, rpc_timeout: timedelta | None, _: Tuning | None
) -> str:
    return await apply_autoscaler(client, r, rpc_timeout=rpc_timeout)


async def _apply_serving(
    client: Client, r: Resource, rpc_timeout: timedelta | None, _: Tuning | None
) -> str:
    return await apply_serving(client, r, rpc_timeout=rpc_timeout)


async def apply_held(client: Client, r: Resource, rpc_timeout: timedelta | None) -> str:
    """Hand a document modelfleet keeps without acting upon to its AcceptedResource workflow."""
    document = AcceptedInput(document=r.to_wire())
    return await update_with_start(
        client,
        AcceptedResourceWorkflow.apply,
        document,
        run=AcceptedResourceWorkflow.run,
        run_arg=document,
        workflow_id=accepted_id(r.KIND, r.namespace, r.name),
        summary=f"{r.ref} (accepted, not acted upon)",
        rpc_timeout=rpc_timeout,
    )


async def delete_held(client: Client, workflow_id: str, wait: bool) -> None:
    handle = client.get_workflow_handle(workflow_id)
    await delete_entity(handle, AcceptedResourceWorkflow.delete, wait=wait)


async def _delete_deployment(client: Client, ns: str, name: str, wait: bool, _: bool) -> None:
    handle = client.get_workflow_handle(deployment_id(ns, name))
    if wait:
        await delete_entity(handle, DeploymentWorkflow.delete, wait=True)
    else:
        await handle.start_update(
            DeploymentWorkflow.delete, wait_for_stage=WorkflowUpdateStage.ACCEPTED
        )


async def _delete_cluster(client: Client, _: str, name: str, wait: bool, force: bool) -> None:
    await delete_cluster(client, name, force=force, wait=wait)


async def _delete_class(client: Client, _: str, name: str, wait: bool, force: bool) -> None:
    await client.get_workflow_handle(FLEET_ID).execute_update(FleetWorkflow.remove_class, name)


async def _delete_autoscaler(client: Client, ns: str, name: str, wait: bool, _: bool) -> None:
    handle = client.get_workflow_handle(autoscaler_id(ns, name))
    await delete_entity(handle, AutoscalerWorkflow.delete, wait=wait)


async def _delete_cache(client: Client, ns: str, name: str, wait: bool, force: bool) -> None:
    handle = client.get_workflow_handle(cache_id(ns, name))
    await handle.execute_update(CacheWorkflow.delete, DeleteCache(force=force))
    if wait:
        await handle.result()


async def _delete_service(client: Client, ns: str, name: str, wait: bool, _: bool) -> None:
    await delete_serving(client, "ModelService", ns, name, wait=wait)


async def _delete_endpoint(client: Client, ns: str, name: str, wait: bool, _: bool) -> None:
    await delete_serving(client, "ModelEndpoint", ns, name, wait=wait)


async def _endpoint_exists(client: Client, ns: str, name: str) -> bool:
    return any(
        e.name == name and not e.replica for e in await resources.directory_endpoints(client, ns)
    )


async def _class_exists(client: Client, _: str, name: str) -> bool:
    return any(c.name == name for c in await resources.fleet_classes(client))


async def _fetch_clusters(client: Client, _: str | None, wanted: set[str]) -> list[Fetched]:
    return await fetch_clusters(client, wanted)


def _held(model: type[Resource], short_name: str) -> KindSpec:
    """A kind accepted for Modelplane parity: held by the AcceptedResource workflow without
    being acted upon (applied, listed with the reason, deleted); nothing depends on it."""
    kind = model.KIND
    return KindSpec(
        model=model,
        plural=f"{kind.lower()}s",
        short_names=(short_name,),
        workflow="AcceptedResourceWorkflow",
        workflow_id=lambda ns, name: accepted_id(kind, ns, name),
        apply_rank=9,  # last: nothing depends on them
        delete_rank=0,
        columns=columns.ACCEPTED_COLUMNS[0],
        wide_columns=columns.ACCEPTED_COLUMNS[1],
        row=columns.accepted_row,
        fetch=_read_held(kind),
        held=True,
    )


def _read_held(kind: str) -> Fetch:
    """``fetch_accepted`` for one held kind."""

    async def read(client: Client, namespace: str | None, wanted: set[str]) -> list[Fetched]:
        return await resources.fetch_accepted(client, kind, namespace, wanted)

    return read


# Ranks: classes first (clusters reference them), then clusters and the front door on one of
# them, then what runs on them, then what routes to and scales what runs; deleting goes the
# other way (what scales and routes to deployments, then what runs on clusters, then clusters,
# then classes).
_SPECS: tuple[KindSpec, ...] = (
    KindSpec(
        model=InferenceClass,
        plural="inferenceclasses",
        short_names=("icl",),
        aliases=("class", "classes"),
        workflow="FleetWorkflow",
        workflow_id=lambda ns, name: FLEET_ID,
        apply_rank=0,
        delete_rank=5,
        columns=("NAME", "PROVIDER", "DEVICES", "AGE"),
        wide_columns=("USED-BY",),
        row=columns.class_row,
        fetch=resources.fetch_classes,
        describe=describers.inference_class,
        apply=_apply_class,
        delete=_delete_class,
        exists=_class_exists,
    ),
    KindSpec(
        model=InferenceCluster,
        plural="inferenceclusters",
        short_names=("ic",),
        aliases=("cluster", "clusters"),
        workflow="ClusterWorkflow",
        workflow_id=lambda ns, name: cluster_id(name),
        apply_rank=1,
        delete_rank=4,
        columns=cluster_view.HEADER,
        wide_columns=cluster_view.WIDE,
        row=cluster_view.cells,
        fetch=_fetch_clusters,
        describe=describers.cluster,
        apply=_apply_cluster,
        delete=_delete_cluster,
    ),
    KindSpec(
        model=ModelDeployment,
        plural="modeldeployments",
        short_names=("md", "deploy"),
        aliases=("deployment", "deployments"),
        workflow=DeploymentWorkflow.__name__,
        workflow_id=deployment_id,
        apply_rank=3,
        delete_rank=3,
        columns=("NAME", "READY", "UP-TO-DATE", "PHASE", "AGE"),
        wide_columns=("CLUSTERS", "MESSAGE"),
        row=columns.deployment_row,
        fetch=resources.fetch_deployments,
        describe=describers.deployment,
        apply=_apply_deployment,
        delete=_delete_deployment,
    ),
    KindSpec(
        model=ModelReplica,
        plural="modelreplicas",
        short_names=("mr",),
        aliases=("replica", "replicas"),
        workflow=ReplicaWorkflow.__name__,
        workflow_id=replica_id,
        not_applied="replicas are made by their deployment (read-only)",
        not_deleted="replicas belong to their deployment: scale or delete the deployment",
        columns=("NAME", "DEPLOYMENT", "CLUSTER", "PHASE", "AGE"),
        wide_columns=("POOLS",),
        row=columns.replica_row,
        fetch=resources.fetch_replicas,
        describe=describers.replica,
    ),
    KindSpec(
        model=ModelService,
        plural="modelservices",
        short_names=("ms", "svc"),
        aliases=("service", "services"),
        workflow=ServiceWorkflow.__name__,
        workflow_id=service_id,
        apply_rank=5,
        delete_rank=1,
        columns=("NAME", "PHASE", "ADDRESS", "IN-ROTATION", "AGE"),
        wide_columns=("GATEWAY", "MESSAGE"),
        row=columns.split_row(columns.service_cells),
        fetch=resources.fetch_services,
        describe=describers.service,
        apply=_apply_serving,
        delete=_delete_service,
    ),
    KindSpec(
        model=ModelEndpoint,
        plural="modelendpoints",
        short_names=("me", "ep"),
        aliases=("endpoint", "endpoints"),
        workflow="EndpointsWorkflow",
        workflow_id=lambda ns, name: ENDPOINTS_ID,
        apply_rank=4,
        delete_rank=2,
        columns=("NAME", "SOURCE", "URL", "AGE"),
        wide_columns=("LABELS",),
        row=columns.split_row(columns.endpoint_cells),
        fetch=resources.fetch_endpoints,
        describe=describers.endpoint,
        apply=_apply_serving,
        delete=_delete_endpoint,
        exists=_endpoint_exists,
    ),
    KindSpec(
        model=InferenceGateway,
        plural="inferencegateways",
        short_names=("ig", "gtw"),
        aliases=("gateway", "gateways"),
        workflow="EndpointsWorkflow",
        workflow_id=lambda ns, name: ENDPOINTS_ID,
        apply_rank=2,
        not_deleted="the fleet always has a front door: apply another InferenceGateway to move it",
        columns=("NAME", "CLUSTER", "GATEWAY", "ADDRESSES", "AGE"),
        row=columns.split_row(columns.gateway_cells),
        fetch=resources.fetch_gateways,
        describe=describers.gateway,
        apply=_apply_serving,
    ),
    KindSpec(
        model=ModelAutoscaler,
        plural="modelautoscalers",
        short_names=("ma", "hpa"),
        aliases=("autoscaler", "autoscalers"),
        workflow=AutoscalerWorkflow.__name__,
        workflow_id=autoscaler_id,
        apply_rank=6,
        delete_rank=0,
        columns=("NAME", "TARGET", "MIN", "MAX", "METRICS", "REPLICAS", "DESIRED", "AGE"),
        wide_columns=("REASON",),
        row=columns.split_row(columns.autoscaler_cells),
        fetch=resources.fetch_autoscalers,
        describe=describers.autoscaler,
        apply=_apply_autoscaler,
        delete=_delete_autoscaler,
    ),
    KindSpec(
        model=ModelCache,
        plural="modelcaches",
        short_names=("mc",),
        aliases=("cache", "caches"),
        workflow=CacheWorkflow.__name__,
        workflow_id=cache_id,
        # Before deployments: a deployment referencing it is placed once it is Ready somewhere.
        apply_rank=2,
        # After deployments: a volume still mounted by one is kept (unless --force).
        delete_rank=4,
        columns=("NAME", "SOURCE", "READY", "PHASE", "CLUSTERS", "AGE"),
        wide_columns=("REVISION", "SIZE", "MESSAGE"),
        row=columns.split_row(columns.cache_cells),
        fetch=resources.fetch_caches,
        describe=describers.cache,
        apply=_apply_cache,
        delete=_delete_cache,
    ),
    _held(ServingStack, "ss"),
    *(
        _held(model, short)
        for model, short in zip(
            CLOUD_CLUSTER_KINDS, ("gke", "eks", "aks", "mk8s", "vke"), strict=True
        )
    ),
)

REGISTRY: dict[str, KindSpec] = {spec.name: spec for spec in _SPECS}


# --- what is derived from the registry --------------------------------------------------------


def specs() -> Iterable[KindSpec]:
    """Every registered kind, in registry order."""
    return REGISTRY.values()


def spec_of(kind: str) -> KindSpec:
    """The spec of a registered kind (a kind name, as ``resolve`` returns it)."""
    return REGISTRY[kind]


def words() -> dict[str, str]:
    """Every word that names a kind (lower case) -> the kind."""
    return {word: spec.name for spec in specs() for word in spec.words}


def resolve(word: str) -> str:
    """The kind a CLI word names: ``md``, ``deployments``, ``ModelDeployment`` or the ``-o
    name`` form ``modeldeployment.modelfleet.dev``; ``UsageError`` listing the known kinds."""
    word = word.removesuffix(f".{API_GROUP}")
    if word in REGISTRY:
        return word
    try:
        return words()[word.lower()]
    except KeyError:
        raise UsageError(f"unknown kind {word!r} (known kinds: {listed(short=True)})") from None


def apply_order() -> dict[str, int]:
    """Applied kinds -> rank (lower first)."""
    return {s.name: s.apply_rank for s in specs() if s.apply_rank is not None and not s.held}


def delete_order() -> dict[str, int]:
    """Kinds deleted by name -> rank (lower first)."""
    return {s.name: s.delete_rank for s in specs() if s.delete_rank is not None}


def not_deleted() -> dict[str, str]:
    """Kinds that exist but are not deleted by name -> what to do instead."""
    return {s.name: s.not_deleted for s in specs() if s.not_deleted}


def held_kinds() -> tuple[str, ...]:
    return tuple(s.name for s in specs() if s.held)


def listed(*, short: bool = False) -> str:
    """``get --help``'s list of kinds, the words people type (with ``short``: each with its
    short names, as the unknown-kind error lists them)."""

    def word(s: KindSpec) -> str:
        return f"{s.listed_as} ({', '.join(s.short_names)})" if short else s.listed_as

    acted = ", ".join(word(s) for s in specs() if not s.held)
    held = ", ".join(word(s) for s in specs() if s.held)
    return f"{acted}; held, not acted upon: {held}"


def complete_kind(incomplete: str) -> list[str]:
    """Shell completion of a kind word: every word (plural, short name...) that starts so."""
    low = incomplete.lower()
    return sorted(w for w in words() if w.startswith(low))


def complete_kind_and_name(ctx: typer.Context, incomplete: str) -> list[str]:
    """Completion of ``KIND [NAME...]``: the kind first (names need a live fleet: none)."""
    typed = [a for a in (ctx.params.get("args") or []) if a != incomplete]
    if typed or "/" in incomplete:
        return []
    return complete_kind(incomplete)
