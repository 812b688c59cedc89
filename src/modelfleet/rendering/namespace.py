"""The workload namespace: every object of a replica goes into ``workload_namespace(<deployment
namespace>)`` on its cluster, never into ``default``, so tenants stay apart.

The namespace is shared by every replica of every deployment of that fleet namespace on the
cluster, so it carries only the labels that are true for all of them (never a replica or a
deployment), and tearing down one replica must never delete it. Every modelfleet writer that
applies it (the replicas, a ModelService's front door on the gateway cluster) applies this same
manifest: they share one field manager, and server-side apply removes what that manager applied
before and applies no more, so a writer applying it without the labels would strip them and
every replica would find its namespace "changed outside modelfleet". Writers that only need it
to exist create it without applying (``KubeCluster.ensure_namespace``). Pure.
"""

from __future__ import annotations

from typing import Any

from modelfleet.api.naming import LABEL_CLUSTER, LABEL_MANAGED_BY, LABEL_NAMESPACE, MANAGED_BY
from modelfleet.rendering.context import RenderContext, sorted_map


def namespace_manifest(name: str, deployment_namespace: str, cluster: str) -> dict[str, Any]:
    """Namespace ``name`` on ``cluster``, for the fleet namespace ``deployment_namespace``."""
    labels = {
        LABEL_NAMESPACE: deployment_namespace,
        LABEL_CLUSTER: cluster,
        LABEL_MANAGED_BY: MANAGED_BY,
    }
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": sorted_map(labels)},
    }


def render_namespace(ctx: RenderContext) -> dict[str, Any]:
    return namespace_manifest(ctx.namespace, ctx.deployment_namespace, ctx.cluster)
