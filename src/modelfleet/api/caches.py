"""ModelCache: model weights to stage on every matching cluster, in Modelplane's shape (a Hugging
Face repo at a revision, its size, an optional token Secret, a cluster selector), plus where the
volume goes (StorageClass, access mode), which modelfleet adds. Pure models, no I/O.

The auth Secret is named, never inlined: it is read on the worker only. The ModelCache workflow
(``workflows.cache``) stages it; docs/model-cache.md says how.
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import Field

from modelfleet.api.meta import Model, Resource


class CacheSource(StrEnum):
    HUGGING_FACE = "HuggingFace"


class AuthSecretRef(Model):
    """A Secret in the cache's namespace holding the download token."""

    name: str = Field(min_length=1, max_length=253)
    key: str = Field(default="HF_TOKEN", min_length=1, max_length=253)


class HuggingFaceSource(Model):
    repo: str = Field(min_length=1, max_length=253)
    revision: str | None = Field(default=None, min_length=1, max_length=253)
    auth_secret: AuthSecretRef | None = None
    size_gib: int = Field(ge=1, le=100_000, alias="sizeGiB")


class CacheClusterSelector(Model):
    match_labels: dict[str, str] = Field(default_factory=dict)


class AccessMode(StrEnum):
    READ_WRITE_MANY = "ReadWriteMany"
    READ_WRITE_ONCE = "ReadWriteOnce"
    READ_ONLY_MANY = "ReadOnlyMany"


class ModelCacheSpec(Model):
    source: CacheSource
    hugging_face: HuggingFaceSource | None = None
    # Omitted: stage on every cluster.
    cluster_selector: CacheClusterSelector | None = None
    # modelfleet's additions; unset, the cluster's cache StorageClass and ReadWriteMany.
    storage_class_name: str | None = Field(default=None, min_length=1, max_length=253)
    access_mode: AccessMode = AccessMode.READ_WRITE_MANY


class ModelCache(Resource):
    KIND: ClassVar[str] = "ModelCache"
    NAMESPACED: ClassVar[bool] = True
    kind: Literal["ModelCache"] = "ModelCache"
    spec: ModelCacheSpec
