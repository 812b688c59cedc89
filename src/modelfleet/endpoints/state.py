"""The endpoint directory's whole state, carried whole across continue-as-new, and its input
(settings beside the state; the directory has none yet).

In the workflow the state is by key (endpoints by ``namespace/name``, watches by watcher); on
the wire it is compact: replicas' endpoints in groups (``rendering.endpoint_groups``), the
others whole. As whole records it would grow ~360 bytes an endpoint and pass Temporal's 2 MiB
payload limit near 5,800 endpoints (issue 11). The wire form is the one the directory's input
had before it held a state, so either reads the other.

Pure: pydantic models only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field, SerializationInfo, model_serializer, model_validator

from modelfleet.api.services import InferenceGateway
from modelfleet.contracts.serving_payloads import WatchRequest
from modelfleet.contracts.wire import WireModel
from modelfleet.rendering.endpoint_groups import EndpointGroup, expand_groups, group_endpoints
from modelfleet.rendering.front_door import EndpointRecord


class CarriedEndpoints(WireModel):
    """The wire form of :class:`EndpointsState`."""

    endpoints: list[EndpointRecord] = Field(default_factory=list)
    groups: list[EndpointGroup] = Field(default_factory=list)
    watches: list[WatchRequest] = Field(default_factory=list)
    gateway: InferenceGateway | None = None
    gateway_created: datetime | None = None
    revision: int = 0


class EndpointsState(WireModel):
    """Everything the directory knows. Bounded by the fleet's endpoints and services."""

    endpoints: dict[str, EndpointRecord] = Field(default_factory=dict)
    # Which service watches which endpoints, by the watcher's workflow ID.
    watches: dict[str, WatchRequest] = Field(default_factory=dict)
    gateway: InferenceGateway | None = None
    # When the gateway (by name) was first applied: ``get gateways``' AGE.
    gateway_created: datetime | None = None
    # One more per change of the endpoints or the gateway; sent with every answer and signal.
    revision: int = 0

    @model_validator(mode="before")
    @classmethod
    def _from_wire(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not _wire_form(data):
            return data
        carried = CarriedEndpoints.model_validate(data)
        records = [*carried.endpoints, *expand_groups(carried.groups)]
        return {
            "endpoints": {r.key: r for r in records},
            "watches": {w.watcher: w for w in carried.watches},
            "gateway": carried.gateway,
            "gateway_created": carried.gateway_created,
            "revision": carried.revision,
        }

    @model_serializer(mode="plain")
    def _to_wire(self, info: SerializationInfo) -> dict[str, Any]:
        return self.carried().model_dump(
            mode="json" if info.mode_is_json() else "python",
            by_alias=bool(info.by_alias),
            exclude_none=info.exclude_none,
        )

    def carried(self) -> CarriedEndpoints:
        """The compact form, in key order."""
        groups, whole = group_endpoints(self.endpoints[k] for k in sorted(self.endpoints))
        return CarriedEndpoints(
            endpoints=whole,
            groups=groups,
            watches=[self.watches[k] for k in sorted(self.watches)],
            gateway=self.gateway,
            gateway_created=self.gateway_created,
            revision=self.revision,
        )


def _wire_form(data: dict[str, Any]) -> bool:
    """A payload (lists, groups) rather than the in-memory form (maps by key)."""
    return "groups" in data or any(
        isinstance(data.get(name), list) for name in ("endpoints", "watches")
    )


class EndpointsInput(WireModel):
    state: EndpointsState = Field(default_factory=EndpointsState)
