"""The CLI's registry of resource kinds: one ``KindSpec`` per kind, and everything the verbs
need to know about kinds derived from it: the words that name a kind (kind, its model's plural
and short names, aliases), the "unknown kind" error, apply and delete order, ``get`` columns
and rows, how a kind is read (``get``), shown (``describe``), applied and deleted, its workflow
and workflow IDs, and shell completion of kinds.

A new kind touches three places, and nothing lists it anywhere else: its API model (a module
under api/, found by api.kinds), its entity package (a ``workflow`` module, found by
worker.entities) and its spec here. A kind whose workflow follows the entity convention is
declared with :func:`entity_kind` and needs no hooks of its own (tests/workflow/test_new_kind.py
adds one that way); the others name their apply hooks in applying/kinds (shared with the
controller) and their delete hooks in cli/kind_actions. The readers, rows and describers named
below live in cli/resources, cli/columns and cli/describers, which look the registry up at call
time (this module imports them).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import typer
from temporalio.client import Client

from modelfleet.api.autoscalers import ModelAutoscaler
from modelfleet.api.caches import ModelCache
from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelDeployment, ModelReplica
from modelfleet.api.infrastructure import CLOUD_CLUSTER_KINDS, ServingStack
from modelfleet.api.meta import API_GROUP, Resource
from modelfleet.api.services import InferenceGateway, ModelEndpoint, ModelService
from modelfleet.applying import kinds as applying_kinds
from modelfleet.autoscaler.workflow import AutoscalerWorkflow, autoscaler_id
from modelfleet.cache.workflow import CacheWorkflow
from modelfleet.cli import (
    accepted_reads,
    cluster_view,
    columns,
    describers,
    kind_actions,
    resources,
)
from modelfleet.cli.columns import Row, accepted_row
from modelfleet.cli.describers import Described
from modelfleet.cli.errors import UsageError
from modelfleet.cli.manifests import Fetched
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
from modelfleet.deployment.workflow import DeploymentWorkflow
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
    # The rows of the plain table and ``-o name`` from visibility alone (no workflow query):
    # None when the kind has no such reader (``fetch`` serves every output).
    brief: Fetch | None = None
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
    def plural(self) -> str:
        return self.model.plural()

    @property
    def short_names(self) -> tuple[str, ...]:
        """The model's short names, then kubectl's own where they name the same idea (``deploy``,
        ``svc``...): the CLI, unlike a CRD, may borrow them."""
        return (*self.model.SHORT_NAMES, *self.model.BORROWED_SHORT_NAMES)

    @property
    def words(self) -> tuple[str, ...]:
        """Every word that names the kind on a command line, lower case."""
        return (self.name.lower(), self.plural, *self.short_names, *self.aliases)

    @property
    def listed_as(self) -> str:
        """How ``get --help`` names the kind: its everyday plural, else its plural."""
        return self.aliases[1] if len(self.aliases) > 1 else self.plural


def entity_kind(
    model: type[Resource],
    workflow: Any,
    *,
    input_of: Callable[[Any], Any],
    workflow_id: Callable[[str, str], str],
    **spec: Any,
) -> KindSpec:
    """A kind held by its own entity workflow that follows the entity convention, so that it
    needs no hooks of its own: the run starts with ``run(input_of(resource))`` under
    ``workflow_id(namespace, name)``, marks itself with the ``ModelfleetKind`` (and namespace and
    name) search attributes, takes its spec through an ``apply`` Update and ends on a
    ``delete`` Update; its ``spec`` and ``status`` queries answer ``get``. ``spec`` holds the
    rest of the ``KindSpec`` (words, ranks, columns, row, describe)."""
    return KindSpec(
        model=model,
        workflow=workflow.__name__,
        workflow_id=workflow_id,
        fetch=resources.entity_fetch(model.KIND, workflow, workflow_id),
        apply=applying_kinds.entity_apply(workflow, input_of, workflow_id),
        delete=kind_actions.entity_delete(workflow, workflow_id),
        **spec,
    )


def _held(model: type[Resource]) -> KindSpec:
    """A kind accepted for Modelplane parity: held by the AcceptedResource workflow without
    being acted upon (applied, listed with the reason, deleted); nothing depends on it."""
    kind = model.KIND
    return KindSpec(
        model=model,
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
        return await accepted_reads.fetch_accepted(client, kind, namespace, wanted)

    return read


# Ranks: classes first (clusters reference them), then clusters and the front door on one of
# them, then what runs on them, then what routes to and scales what runs; deleting goes the
# other way (what scales and routes to deployments, then what runs on clusters, then clusters,
# then classes).
_SPECS: tuple[KindSpec, ...] = (
    KindSpec(
        model=InferenceClass,
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
        apply=applying_kinds.apply_class,
        delete=kind_actions.delete_class_kind,
        exists=kind_actions.class_exists_kind,
    ),
    KindSpec(
        model=InferenceCluster,
        aliases=("cluster", "clusters"),
        workflow="ClusterWorkflow",
        workflow_id=lambda ns, name: cluster_id(name),
        apply_rank=1,
        delete_rank=4,
        columns=cluster_view.HEADER,
        wide_columns=cluster_view.WIDE,
        row=cluster_view.cells,
        fetch=kind_actions.fetch_clusters_kind,
        describe=describers.cluster,
        apply=applying_kinds.apply_cluster,
        delete=kind_actions.delete_cluster_kind,
    ),
    KindSpec(
        model=ModelDeployment,
        aliases=("deployment", "deployments"),
        workflow=DeploymentWorkflow.__name__,
        workflow_id=deployment_id,
        apply_rank=3,
        delete_rank=3,
        columns=("NAME", "READY", "UP-TO-DATE", "PHASE", "AGE"),
        wide_columns=("CLUSTERS", "MESSAGE"),
        row=columns.deployment_row,
        fetch=resources.fetch_deployments,
        brief=resources.brief_deployments,
        describe=describers.deployment,
        apply=applying_kinds.apply_deployment,
        delete=kind_actions.delete_deployment_kind,
    ),
    KindSpec(
        model=ModelReplica,
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
        aliases=("service", "services"),
        workflow=ServiceWorkflow.__name__,
        workflow_id=service_id,
        apply_rank=5,
        delete_rank=1,
        columns=("NAME", "PHASE", "ADDRESS", "IN-ROTATION", "FRONT-DOORS", "AGE"),
        wide_columns=("GATEWAY", "MESSAGE"),
        row=columns.split_row(columns.service_cells),
        fetch=resources.fetch_services,
        describe=describers.service,
        apply=applying_kinds.apply_serving_kind,
        delete=kind_actions.delete_service_kind,
    ),
    KindSpec(
        model=ModelEndpoint,
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
        apply=applying_kinds.apply_serving_kind,
        delete=kind_actions.delete_endpoint_kind,
        exists=kind_actions.endpoint_exists_kind,
    ),
    KindSpec(
        model=InferenceGateway,
        aliases=("gateway", "gateways"),
        workflow="EndpointsWorkflow",
        workflow_id=lambda ns, name: ENDPOINTS_ID,
        apply_rank=2,
        not_deleted="the fleet always has a front door: apply another InferenceGateway to move it",
        columns=("NAME", "CLUSTER", "GATEWAY", "ADDRESSES", "AGE"),
        wide_columns=("ADDITIONAL-CLUSTERS", "GLOBAL-ZONE"),
        row=columns.split_row(columns.gateway_cells),
        fetch=accepted_reads.fetch_gateways,
        describe=describers.gateway,
        apply=applying_kinds.apply_serving_kind,
    ),
    KindSpec(
        model=ModelAutoscaler,
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
        apply=applying_kinds.apply_autoscaler,
        delete=kind_actions.delete_autoscaler_kind,
    ),
    KindSpec(
        model=ModelCache,
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
        apply=applying_kinds.apply_cache,
        delete=kind_actions.delete_cache_kind,
    ),
    _held(ServingStack),
    *(_held(model) for model in CLOUD_CLUSTER_KINDS),
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
    """Completion of ``KIND [NAME...]`` and ``KIND/NAME``: the kind first, then the names of
    live resources of that kind (``cli.completion``: bounded, silent when the fleet is out of
    reach)."""
    from modelfleet.cli.completion import complete_names  # Temporal only when completing names

    typed = [a for a in (ctx.params.get("args") or []) if a != incomplete]
    if "/" in incomplete:
        word, _, partial = incomplete.partition("/")
        kind = _kind_or_none(word)
        if kind is None:
            return []
        return [f"{word}/{name}" for name in complete_names(ctx, kind, partial)]
    if typed:
        kind = _kind_or_none(typed[0])
        return [] if kind is None or "/" in typed[0] else complete_names(ctx, kind, incomplete)
    return complete_kind(incomplete)


def _kind_or_none(word: str) -> str | None:
    try:
        return resolve(word)
    except UsageError:
        return None
