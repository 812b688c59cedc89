"""ModelEndpoint (a reachable OpenAI-compatible endpoint), ModelService (a weighted,
label-selected front door over endpoints) and InferenceGateway (which cluster's gateway is the
fleet's front door). Pure models, no I/O.

Secrets are only ever named here (``authSecretRef``, ``auth.apiKeysSecretRef``): the worker
resolves them inside activities, so no key enters a workflow payload or history.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from modelfleet.api.meta import DNSLabel, Model, Resource

# The one InferenceGateway a fleet has (Modelplane's convention): services look it up by name.
DEFAULT_GATEWAY = "default"


class SecretReference(Model):
    """A secret the worker resolves from its credentials directory (``<dir>/secrets/<name>``)."""

    name: DNSLabel


class ModelEndpointSpec(Model):
    url: str = Field(min_length=1, max_length=2048)
    rewrite_path: str = "/"
    protocol: Literal["openai"] = "openai"
    # The provider's API key, sent upstream as a bearer token (external providers only).
    auth_secret_ref: SecretReference | None = None


class ModelEndpoint(Resource):
    KIND: ClassVar[str] = "ModelEndpoint"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("me",)
    BORROWED_SHORT_NAMES: ClassVar[tuple[str, ...]] = ("ep",)
    NAMESPACED: ClassVar[bool] = True
    kind: Literal["ModelEndpoint"] = "ModelEndpoint"
    spec: ModelEndpointSpec


class LabelSelector(Model):
    match_labels: dict[str, str] = Field(min_length=1)


class ServiceEndpoint(Model):
    selector: LabelSelector
    weight: int = Field(default=1, ge=1, le=1_000_000)


class ServiceAuth(Model):
    """Callers must send ``Authorization: Bearer <key>`` with one of the keys in the secret
    (one key per line). Only SHA-256 hashes of the keys reach the gateway."""

    api_keys_secret_ref: SecretReference


class OutlierDetection(Model):
    """How the front door takes a failing endpoint out of rotation between probes (the
    gateway's passive health check, Envoy's outlier detection): after ``consecutiveErrors``
    5xx answers or connection failures in a row, the endpoint gets no traffic for
    ``baseEjectionSeconds`` times the number of times it was ejected (capped at 300 s; the
    count decays while it serves), but only while the endpoints already out are fewer than
    ``maxEjectionPercent`` of all (Envoy's rule: of two, one may go). ``0`` switches ejection
    off."""

    consecutive_errors: int = Field(default=3, ge=1, le=1000)
    base_ejection_seconds: int = Field(default=10, ge=1, le=3600)
    max_ejection_percent: int = Field(default=50, ge=0, le=100)
    # How often ejected endpoints are let back in and ejection counts decay.
    interval_seconds: int = Field(default=1, ge=1, le=300)


class ServiceRetries(Model):
    """How often the front door sends a request again, each time to another endpoint where one
    is left, when it failed before any byte reached the caller: a connection failure or reset,
    or one of ``statusCodes``. ``attempts: 0`` switches retries off."""

    attempts: int = Field(default=2, ge=0, le=10)
    status_codes: list[Annotated[int, Field(ge=500, le=599)]] = Field(
        default_factory=lambda: [500, 502, 503, 504], max_length=16
    )


class ModelServiceSpec(Model):
    endpoints: list[ServiceEndpoint] = Field(min_length=1)
    auth: ServiceAuth | None = None
    outlier_detection: OutlierDetection = Field(default_factory=OutlierDetection)
    retries: ServiceRetries = Field(default_factory=ServiceRetries)


class ModelService(Resource):
    KIND: ClassVar[str] = "ModelService"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("ms",)
    BORROWED_SHORT_NAMES: ClassVar[tuple[str, ...]] = ("svc",)
    NAMESPACED: ClassVar[bool] = True
    kind: Literal["ModelService"] = "ModelService"
    spec: ModelServiceSpec


class GatewayListener(Model):
    name: DNSLabel = "http"
    port: int = Field(default=80, ge=1, le=65535)
    protocol: Literal["HTTP"] = "HTTP"


class GlobalHealthCheck(Model):
    """How the global load balancer checks each front door (a Cloudflare monitor): ``GET
    /<namespace>/<service>/v1/models`` through that cluster's gateway every
    ``intervalSeconds``; a front door leaves the address after ``consecutiveDown`` failed checks
    in a row and comes back after ``consecutiveUp`` good ones. Worst case out of the address:
    ``intervalSeconds x consecutiveDown + timeoutSeconds x (retries + 1)``."""

    interval_seconds: int = Field(default=5, ge=1, le=3600)
    timeout_seconds: int = Field(default=2, ge=1, le=10)
    retries: int = Field(default=0, ge=0, le=5)
    consecutive_down: int = Field(default=1, ge=1, le=10)
    consecutive_up: int = Field(default=1, ge=1, le=10)


class GlobalAddress(Model):
    """One stable address in front of every front door: a proxied load balancer (Cloudflare
    Load Balancing) named ``<service>.<namespace>.<zone>`` with one origin per gateway cluster,
    health-checked, relaying each request to a healthy front door. The API token is named here
    and read by the worker (``<credentials dir>/secrets/<name>``)."""

    provider: Literal["cloudflare"] = "cloudflare"
    account_id: str = Field(pattern=r"^[0-9a-f]{32}$")
    zone_id: str = Field(pattern=r"^[0-9a-f]{32}$")
    zone: str = Field(
        min_length=1, max_length=200, pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)+[a-z]{2,63}$"
    )
    api_token_secret_ref: SecretReference
    # ``random``: spread over every healthy front door; ``off``: the first healthy one in
    # ``cluster``, ``additionalClusters`` order (failover).
    steering: Literal["random", "off"] = "random"
    health_check: GlobalHealthCheck = Field(default_factory=GlobalHealthCheck)


class InferenceGatewaySpec(Model):
    """Which clusters' Gateways carry the front-door routes: ``cluster`` and, for front doors
    that survive the loss of a cluster, ``additionalClusters`` (each gets every service's route,
    to every healthy endpoint wherever it runs), with ``globalAddress`` as the one address in
    front of them all. ``listeners`` and ``addresses`` describe a gateway installed by the
    platform team; empty ``addresses`` means "the address the cluster's Gateway reports"
    (``addresses`` describe ``cluster``'s gateway only)."""

    cluster: str = Field(min_length=1, max_length=253)
    additional_clusters: list[Annotated[str, Field(min_length=1, max_length=253)]] = Field(
        default_factory=list, max_length=15
    )
    global_address: GlobalAddress | None = None
    gateway_name: str = Field(default="inference-gateway", min_length=1, max_length=253)
    gateway_namespace: DNSLabel = "modelfleet-system"
    listeners: list[GatewayListener] = Field(default_factory=lambda: [GatewayListener()])
    addresses: list[str] = Field(default_factory=list, max_length=16)


class InferenceGateway(Resource):
    KIND: ClassVar[str] = "InferenceGateway"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("ig",)
    BORROWED_SHORT_NAMES: ClassVar[tuple[str, ...]] = ("gtw",)
    kind: Literal["InferenceGateway"] = "InferenceGateway"
    spec: InferenceGatewaySpec

    @property
    def front_door_clusters(self) -> list[str]:
        """Every cluster whose Gateway carries the routes, ``cluster`` first."""
        return [self.spec.cluster, *self.spec.additional_clusters]
