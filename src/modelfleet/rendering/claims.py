"""DRA ResourceClaimTemplates (``resource.k8s.io/v1``): one per member that claims devices.

The scheduler has already resolved each member's devices into DRA requests; the renderer copies
them verbatim (class, count, CEL selectors). Synthetic devices never reach this layer: the
scheduler drops them, since nothing on the cluster can allocate them. Pure, no I/O.
"""

from __future__ import annotations

from typing import Any

from modelfleet.api.deployments import DeviceRequest, PlacedEngine, PlacedMember
from modelfleet.rendering.context import RenderContext
from modelfleet.rendering.names import claim_template_name

API_VERSION = "resource.k8s.io/v1"
KIND = "ResourceClaimTemplate"


def _request(request: DeviceRequest) -> dict[str, Any]:
    exactly: dict[str, Any] = {
        "deviceClassName": request.device_class_name,
        "count": request.count,
    }
    if request.selectors:
        exactly["selectors"] = [{"cel": {"expression": s.cel}} for s in request.selectors]
    return {"name": request.name, "exactly": exactly}


def claim_template_for(
    ctx: RenderContext, engine: PlacedEngine, member: PlacedMember
) -> str | None:
    """The name of the member's claim template, or None when it claims nothing."""
    if not member.device_requests:
        return None
    return claim_template_name(ctx.replica, engine.name, member.role)


def render_claim_templates(ctx: RenderContext, engine: PlacedEngine) -> list[dict[str, Any]]:
    manifests: list[dict[str, Any]] = []
    for member in engine.members:
        name = claim_template_for(ctx, engine, member)
        if name is None or not member.device_requests:
            continue
        requests = [_request(request) for request in member.device_requests]
        manifests.append(
            {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "metadata": ctx.metadata(name),
                "spec": {"spec": {"devices": {"requests": requests}}},
            }
        )
    return manifests
