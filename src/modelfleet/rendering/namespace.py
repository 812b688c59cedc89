"""The workload namespace: every object of a replica goes into ``workload_namespace(<deployment
namespace>)`` on its cluster, never into ``default``, so tenants stay apart.

The namespace is shared by every replica of every deployment of that fleet namespace on the
cluster, so it carries only the labels that are true for all of them (never a replica or a
deployment), and tearing down one replica must never delete it. Pure.
"""

from __future__ import annotations

from typing import Any

from modelfleet.api.naming import LABEL_CLUSTER, LABEL_MANAGED_BY, LABEL_NAMESPACE, MANAGED_BY
from modelfleet.rendering.context import RenderContext, sorted_map


def render_namespace(ctx: RenderContext) -> dict[str, Any]:
    labels = {
        LABEL_NAMESPACE: ctx.deployment_namespace,
        LABEL_CLUSTER: ctx.cluster,
        LABEL_MANAGED_BY: MANAGED_BY,
    }
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": ctx.namespace, "labels": sorted_map(labels)},
    }
