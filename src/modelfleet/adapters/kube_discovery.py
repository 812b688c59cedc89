"""API discovery as the Kubernetes adapter caches it: each kind's plural and scope per group
version (``/api/v1``, ``/apis/<group>/<version>``), and the request path of a resource.
Pure."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ApiResource:
    api_version: str
    kind: str
    plural: str
    namespaced: bool

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        base = group_version_path(self.api_version)
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base


def group_version_path(api_version: str) -> str:
    """``/api/v1`` for the core group (no slash in its apiVersion), ``/apis/<g>/<v>`` otherwise."""
    return f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"


@dataclass
class GroupVersion:
    fetched_at: float
    kinds: dict[str, ApiResource]


__all__ = ["ApiResource", "GroupVersion", "group_version_path"]
