"""ModelCache: model weights to stage on every matching cluster, in Modelplane's shape (a Hugging
Face repo at a revision, its size, an optional token Secret, a cluster selector), plus where the
volume goes (StorageClass, access mode), which modelfleet adds. Pure models, no I/O.

modelfleet also takes ``source: URI`` with a ``uri`` block naming an object-store prefix or an
OCI artifact (``s3://bucket/prefix``, ``gs://bucket/prefix``, ``oci://registry/repo:tag``), the
sources a simple pinned download tool covers (``rendering.model_cache`` says which).

The auth Secret is named, never inlined: it is read on the worker only. The ModelCache workflow
(``cache.workflow``) stages it; docs/model-cache.md says how.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from modelfleet.api.meta import Model, Resource


class CacheSource(StrEnum):
    HUGGING_FACE = "HuggingFace"
    URI = "URI"


class UriScheme(StrEnum):
    S3 = "s3"
    GCS = "gs"
    OCI = "oci"


class AuthSecretRef(Model):
    """A Secret in the cache's namespace holding the download token."""

    name: str = Field(min_length=1, max_length=253)
    key: str = Field(default="HF_TOKEN", min_length=1, max_length=253)


class HuggingFaceSource(Model):
    repo: str = Field(min_length=1, max_length=253)
    revision: str | None = Field(default=None, min_length=1, max_length=253)
    auth_secret: AuthSecretRef | None = None
    size_gib: int = Field(ge=1, le=100_000, alias="sizeGiB")


class UriSource(Model):
    """Weights behind a URI. The auth Secret's value is a file the download tool reads: an AWS
    shared credentials file (s3), a service-account JSON key (gs), a Docker config.json (oci)."""

    uri: str = Field(min_length=1, max_length=2048)
    auth_secret: AuthSecretRef | None = None
    size_gib: int = Field(ge=1, le=100_000, alias="sizeGiB")

    @field_validator("uri")
    @classmethod
    def _known_uri(cls, value: str) -> str:
        problem = uri_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @property
    def scheme(self) -> UriScheme:
        return UriScheme(self.uri.split("://", 1)[0])

    @property
    def revision(self) -> str | None:
        """A URI names its content itself (an OCI tag or digest); there is no revision."""
        return None


_SCHEMES = ", ".join(f"{s.value}://" for s in UriScheme)
# A bucket as S3 and GCS name them: 3-63 (GCS: up to 222 with dots) lowercase letters, digits,
# dots, dashes and underscores (GCS only), starting and ending with a letter or digit.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")
# ``registry[:port]/repo[/more]`` then ``:tag`` or ``@sha256:<64 hex>``.
_OCI = re.compile(
    r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+"
    r"(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127}|@sha256:[0-9a-f]{64})$"
)


def uri_problem(uri: str) -> str | None:
    """Why ``uri`` is not a source modelfleet can download, or None."""
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme not in {s.value for s in UriScheme}:
        return f"unsupported URI {uri!r}: expected one of {_SCHEMES}"
    if any(c.isspace() for c in uri) or any(c in uri for c in "'\"`$;|&<>"):
        return f"invalid URI {uri!r}: no spaces, quotes or shell characters"
    if scheme == UriScheme.OCI:
        if not _OCI.match(rest):
            return (
                f"invalid OCI reference {uri!r}: expected oci://registry/repository:tag "
                "or oci://registry/repository@sha256:<digest>"
            )
        return None
    bucket, _, _prefix = rest.partition("/")
    if not _BUCKET.match(bucket):
        return (
            f"invalid bucket {bucket!r} in {uri!r}: 3-222 lowercase letters, digits, dots, "
            "dashes or underscores"
        )
    return None


class CacheClusterSelector(Model):
    match_labels: dict[str, str] = Field(default_factory=dict)


class AccessMode(StrEnum):
    READ_WRITE_MANY = "ReadWriteMany"
    READ_WRITE_ONCE = "ReadWriteOnce"
    READ_ONLY_MANY = "ReadOnlyMany"


class ModelCacheSpec(Model):
    source: CacheSource
    hugging_face: HuggingFaceSource | None = None
    uri: UriSource | None = None
    # Omitted: stage on every cluster.
    cluster_selector: CacheClusterSelector | None = None
    # modelfleet's additions; unset, the cluster's cache StorageClass and ReadWriteMany.
    storage_class_name: str | None = Field(default=None, min_length=1, max_length=253)
    access_mode: AccessMode = AccessMode.READ_WRITE_MANY

    @property
    def artifact(self) -> HuggingFaceSource | UriSource | None:
        """The block ``source`` names (None only for a spec that failed its rules)."""
        return self.uri if self.source is CacheSource.URI else self.hugging_face


class ModelCache(Resource):
    KIND: ClassVar[str] = "ModelCache"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("mc",)
    NAMESPACED: ClassVar[bool] = True
    kind: Literal["ModelCache"] = "ModelCache"
    spec: ModelCacheSpec
