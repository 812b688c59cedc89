"""Resource registry for the simulated Kubernetes API server.

Development/test emulator only: product code never imports ``modelfleet.sim``. This module is pure
data plus lookups (no I/O, no asyncio); it may be imported by any other ``modelfleet.sim`` module.

Each :class:`ResourceType` says where a kind is served (group, version, plural), whether it is
namespaced, which subresources it has, and which fields are required (a deliberately modest,
data-driven validation table). List-merge keys for server-side apply and strategic merge patch
live here as well, so that both merge engines agree on them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ALL_VERBS",
    "LIST_MAP_KEYS",
    "RequiredField",
    "ResourceRegistry",
    "ResourceType",
    "default_registry",
]

ALL_VERBS: tuple[str, ...] = (
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
)

# Lists that are maps keyed by these fields (x-kubernetes-list-type: map). Anything not in here is
# an atomic list, except the set-typed ``metadata.finalizers``. The key is the field name of the
# list; where one name has two shapes (container ports vs Service ports) the first key set whose
# fields are all present in an item wins.
LIST_MAP_KEYS: dict[str, tuple[tuple[str, ...], ...]] = {
    "containers": (("name",),),
    "initContainers": (("name",),),
    "ephemeralContainers": (("name",),),
    "env": (("name",),),
    "volumes": (("name",),),
    "volumeMounts": (("mountPath",),),
    "volumeDevices": (("devicePath",),),
    "ports": (("containerPort", "protocol"), ("port", "protocol")),
    "imagePullSecrets": (("name",),),
    "resourceClaims": (("name",),),
    "claims": (("name",),),
    "conditions": (("type",),),
    "ownerReferences": (("uid",),),
    "hostAliases": (("ip",),),
    "topologySpreadConstraints": (("topologyKey", "whenUnsatisfiable"),),
}

# Fields that default to a value when they are part of a list-map key but absent.
LIST_MAP_KEY_DEFAULTS: dict[str, object] = {"protocol": "TCP"}

# Set-typed lists (x-kubernetes-list-type: set): items are owned one by one.
SET_LISTS: frozenset[str] = frozenset({"finalizers"})


@dataclass(frozen=True)
class RequiredField:
    """A dotted path that must be present (and non-empty) for the object to be valid."""

    path: str
    # Alternative paths: the requirement is met when any one of them is present.
    any_of: tuple[str, ...] = ()
    # An empty map/list counts as present (e.g. ResourceClaimTemplate ``spec.spec: {}``).
    allow_empty: bool = False

    def paths(self) -> tuple[str, ...]:
        return (self.path, *self.any_of)


@dataclass(frozen=True)
class ResourceType:
    """One served resource (a plural under a group/version)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    status_subresource: bool = False
    scale_subresource: bool = False
    # Dotted path of the replica count and of the label selector used by /scale.
    scale_replicas_path: str = "spec.replicas"
    scale_status_replicas_path: str = "status.replicas"
    scale_selector_path: str = ""
    builtin: bool = True
    required: tuple[RequiredField, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    categories: tuple[str, ...] = ()
    # DELETE answers with the deleted object (CRDs, pods) rather than a Success Status.
    return_deleted_object: bool = False
    # Create keeps a client-supplied status even with a status subresource (Node does).
    create_keeps_status: bool = False
    # Server-side defaults: (dotted path, value), applied when the parent map exists.
    defaults: tuple[tuple[str, Any], ...] = ()
    # A CRD version's openAPIV3Schema (objects are pruned, defaulted and validated against it,
    # :mod:`.crd_objects`) and its additionalPrinterColumns (:mod:`.crd_columns`).
    schema: Any = field(default=None, compare=False, hash=False)
    printer_columns: tuple[Any, ...] = field(default=(), compare=False, hash=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def key(self) -> str:
        """Stable identifier, e.g. ``deployments.apps`` or ``pods``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def strategic_merge_allowed(self) -> bool:
        return self.builtin

    def discovery_entries(self) -> list[dict[str, object]]:
        """APIResource entries for this type (the resource and its subresources)."""
        entry: dict[str, object] = {
            "name": self.plural,
            "singularName": self.singular_name,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(self.verbs),
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        if self.categories:
            entry["categories"] = list(self.categories)
        entries = [entry]
        if self.status_subresource:
            entries.append(
                {
                    "name": f"{self.plural}/status",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "kind": self.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
        if self.scale_subresource:
            entries.append(
                {
                    "name": f"{self.plural}/scale",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "group": "autoscaling",
                    "version": "v1",
                    "kind": "Scale",
                    "verbs": ["get", "patch", "update"],
                }
            )
        return entries


@dataclass
class ResourceRegistry:
    """Lookups over a set of resource types. Mutable: CRDs may add types at run time."""

    types: list[ResourceType] = field(default_factory=lambda: _builtin_types())

    def __post_init__(self) -> None:
        self._by_path: dict[tuple[str, str, str], ResourceType] = {}
        self._by_kind: dict[tuple[str, str], ResourceType] = {}
        for rt in list(self.types):
            self._index(rt)

    def _index(self, rt: ResourceType) -> None:
        self._by_path[(rt.group, rt.version, rt.plural)] = rt
        self._by_kind[(rt.api_version, rt.kind)] = rt

    def add(self, rt: ResourceType) -> None:
        """Serve an additional type (replacing one at the same group/version/plural)."""
        old = self._by_path.get((rt.group, rt.version, rt.plural))
        if old is not None:
            self.types.remove(old)
            self._by_kind.pop((old.api_version, old.kind), None)
        self.types.append(rt)
        self._index(rt)

    def remove(self, group: str, version: str, plural: str) -> None:
        old = self._by_path.pop((group, version, plural), None)
        if old is not None:
            self.types.remove(old)
            self._by_kind.pop((old.api_version, old.kind), None)

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(self.types)

    def by_path(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        return self._by_kind.get((api_version, kind))

    def groups(self) -> dict[str, list[str]]:
        """Group name to its versions (core group "" included), in registration order."""
        out: dict[str, list[str]] = {}
        for rt in self.types:
            versions = out.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for rt in self.types if rt.group == group and rt.version == version]


def _builtin_types() -> list[ResourceType]:
    # The table imports this module's types; imported here, not at the top, to break the cycle.
    from modelfleet.sim.apiserver.builtin_types import builtin_types

    return builtin_types()


def default_registry() -> ResourceRegistry:
    return ResourceRegistry()
