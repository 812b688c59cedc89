"""Modelplane's InferenceGateway: the control-plane front door it installs (Traefik, optionally
behind MetalLB), a singleton named ``default``. modelfleet's own InferenceGateway names the
workload cluster whose Gateway carries the front door (``spec.cluster``), so a document in
Modelplane's shape (``spec.backend`` and no ``spec.cluster``) is validated here, kept and reported
as not acted upon (``api.support``). Pure models, no I/O.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from modelfleet.api.meta import Model, Resource


class MetalLB(Model):
    # An IP range such as 172.18.255.200-172.18.255.250.
    address_pool: str = Field(min_length=1, max_length=253)


class Traefik(Model):
    # The Helm chart version.
    version: str = Field(min_length=1, max_length=63)
    load_balancer: Literal["MetalLB"] | None = None
    metallb: MetalLB | None = None


class TraefikGatewaySpec(Model):
    backend: Literal["Traefik"]
    traefik: Traefik | None = None


class ModelplaneInferenceGateway(Resource):
    """An InferenceGateway document in Modelplane's shape."""

    KIND: ClassVar[str] = "InferenceGateway"
    ALTERNATE_SHAPE: ClassVar[bool] = True
    kind: Literal["InferenceGateway"] = "InferenceGateway"
    spec: TraefikGatewaySpec


def is_modelplane_gateway(document: dict[str, Any]) -> bool:
    """Whether an InferenceGateway document is in Modelplane's shape rather than modelfleet's."""
    spec = document.get("spec")
    return isinstance(spec, dict) and "backend" in spec and "cluster" not in spec
