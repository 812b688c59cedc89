"""Shared building blocks of every modelfleet resource: the base model, object metadata and the
Kubernetes naming rules (DNS-1123 names, label keys and values).

This layer is pure: it may import pydantic and the standard library, never an SDK, Temporal or the
network. Every shape that crosses a boundary (manifest, workflow payload, CLI output) is one of
these models; workflow payloads use the lenient subclass in ``modelfleet.contracts.wire``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

API_GROUP = "modelfleet.dev"
API_VERSION = f"{API_GROUP}/v1alpha1"
# Modelplane documents are accepted unchanged as a migration path.
MODELPLANE_API_VERSION = "modelplane.ai/v1alpha1"
ACCEPTED_API_VERSIONS = (API_VERSION, MODELPLANE_API_VERSION)
# Modelplane's internal kinds (per-cloud clusters, ServingStack) live in their own group.
INFRASTRUCTURE_API_VERSION = f"infrastructure.{API_GROUP}/v1alpha1"
MODELPLANE_INFRASTRUCTURE_API_VERSION = "infrastructure.modelplane.ai/v1alpha1"
INFRASTRUCTURE_API_VERSIONS = (INFRASTRUCTURE_API_VERSION, MODELPLANE_INFRASTRUCTURE_API_VERSION)

# Label prefixes owned by the system; users may not set them.
RESERVED_LABEL_PREFIXES = (f"{API_GROUP}/", "modelplane.ai/")

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def dns1123_label_problem(value: str) -> str | None:
    """Why ``value`` is not a DNS-1123 label, or None when it is one."""
    if not value:
        return "must not be empty"
    if len(value) > 63:
        return f"must be at most 63 characters (got {len(value)})"
    if not _DNS1123_LABEL.match(value):
        return (
            "must consist of lower case alphanumeric characters or '-', and must start and end "
            "with an alphanumeric character"
        )
    return None


def label_key_problem(key: str) -> str | None:
    """Why ``key`` is not a valid Kubernetes label or annotation key, or None."""
    prefix, sep, name = key.rpartition("/")
    if sep:
        if not prefix:
            return "prefix must not be empty"
        if len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix):
            return "prefix must be a DNS-1123 subdomain of at most 253 characters"
    if not name:
        return "name part must not be empty"
    if len(name) > 63:
        return f"name part must be at most 63 characters (got {len(name)})"
    if not _LABEL_NAME.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character"
        )
    return None


def label_value_problem(value: str) -> str | None:
    """Why ``value`` is not a valid Kubernetes label value, or None."""
    if len(value) > 63:
        return f"must be at most 63 characters (got {len(value)})"
    if not _LABEL_VALUE.match(value):
        return (
            "must be empty or consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character"
        )
    return None


def _check_dns1123_label(value: str) -> str:
    problem = dns1123_label_problem(value)
    if problem:
        raise ValueError(f"invalid name {value!r}: {problem}")
    return value


def _dns1123_label_schema(schema: dict[str, Any]) -> None:
    # The schema says what the check above enforces, for editors and a CRD's admission; the
    # check keeps its own messages. A field's own tighter bound (``max_length``) stays.
    schema.setdefault("maxLength", 63)
    schema["pattern"] = _DNS1123_LABEL.pattern


DNSLabel = Annotated[
    str,
    AfterValidator(_check_dns1123_label),
    Field(json_schema_extra=_dns1123_label_schema),
]


class Model(BaseModel):
    """Base of every resource shape: camelCase on the wire, unknown fields rejected, so a typo in
    a manifest is an error naming the field. Workflow and activity payloads are
    :class:`modelfleet.contracts.wire.WireModel`, which ignores them instead."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=False,
        validate_default=False,
    )

    def to_wire(self) -> dict[str, Any]:
        """The manifest form: camelCase keys, unset optionals left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class ObjectMeta(Model):
    name: DNSLabel
    namespace: DNSLabel | None = None
    labels: dict[str, str] = Field(default_factory=dict, max_length=64)
    annotations: dict[str, str] = Field(default_factory=dict, max_length=64)


class Condition(Model):
    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str = ""


class Resource(Model):
    """A Kubernetes-shaped document: apiVersion, kind, metadata, spec."""

    KIND: ClassVar[str] = ""
    NAMESPACED: ClassVar[bool] = False
    # The apiVersions a document of this kind may declare; the first is modelfleet's own.
    API_VERSIONS: ClassVar[tuple[str, ...]] = ACCEPTED_API_VERSIONS
    # Another accepted shape of a kind whose own model is registered (api.kinds picks the shape
    # by a document's content), not a kind of its own.
    ALTERNATE_SHAPE: ClassVar[bool] = False
    # The words that name the kind, in the API (its CRD's names) and on the command line: the
    # plural (empty: the kind in lower case plus "s") and the short names.
    PLURAL: ClassVar[str] = ""
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ()
    # kubectl's own short names for the same idea (``deploy``, ``svc``, ``ep``, ``hpa``, ``gtw``
    # as Gateway API's): the CLI accepts them, a CRD does not declare them, as they would shadow
    # the built-in resources in kubectl on the cluster it is installed in.
    BORROWED_SHORT_NAMES: ClassVar[tuple[str, ...]] = ()

    api_version: str = API_VERSION
    kind: str
    metadata: ObjectMeta

    @classmethod
    def plural(cls) -> str:
        """The kind's plural, as a URL path and a CRD name use it (``modeldeployments``)."""
        return cls.PLURAL or f"{cls.KIND.lower()}s"

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def from_modelplane(self) -> bool:
        """Whether the document declared one of Modelplane's API groups (defaults follow it)."""
        return self.api_version.split("/", 1)[0].endswith("modelplane.ai")

    @property
    def namespace(self) -> str:
        """The namespace of a namespaced resource ("default" when unset); "" for fleet scope."""
        if not self.NAMESPACED:
            return ""
        return self.metadata.namespace or "default"

    @property
    def ref(self) -> str:
        """A human reference such as ``ModelDeployment ml/qwen`` or ``InferenceCluster a``."""
        if self.NAMESPACED:
            return f"{self.KIND} {self.namespace}/{self.name}"
        return f"{self.KIND} {self.name}"
