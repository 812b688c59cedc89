"""modelfleet's payload converter: Temporal's pydantic converter, with every payload that is (or
holds) a :class:`~modelfleet.contracts.wire.WireModel` validated with ``extra="ignore"``.

That one option, given once for the whole payload, is what lets an unknown field inside an
embedded strict resource (a ModelDeployment in a placement request) be dropped, as the wire
contract says (``contracts.wire``), while pydantic-core validates the payload in one pass with
no Python callback per nested model. A payload of a strict type alone (a ModelDeployment as an
Update argument) is validated as the type says: unknown fields rejected.

Layer rule: no I/O; the worker, the CLI and the tests' clients use it through
``worker.client.data_converter``.
"""

from __future__ import annotations

import functools
import types
import typing
from typing import Any

import temporalio.api.common.v1
from pydantic import BaseModel, TypeAdapter
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
)

from modelfleet.contracts.wire import WireModel


def holds_wire_model(hint: Any) -> bool:
    """Whether ``hint`` is a WireModel or a type built of one (``list[CacheTarget]``,
    ``Decision | None``)."""
    try:
        return _holds_cached(hint)
    except TypeError:  # an unhashable hint
        return _holds(hint)


@functools.lru_cache(maxsize=1024)
def _holds_cached(hint: Any) -> bool:
    return _holds(hint)


def _holds(hint: Any) -> bool:
    if isinstance(hint, type) and not isinstance(hint, types.GenericAlias):
        return issubclass(hint, WireModel)
    return any(_holds(arg) for arg in typing.get_args(hint))


class WirePayloadJSONConverter(PydanticJSONPlainPayloadConverter):
    """JSON payloads through pydantic; a payload that holds a WireModel ignores unknown fields
    at every depth (one pass in pydantic-core), any other validates as its type says."""

    def from_payload(
        self,
        payload: temporalio.api.common.v1.Payload,
        type_hint: type | None = None,
    ) -> Any:
        if type_hint is None or not holds_wire_model(type_hint):
            return super().from_payload(payload, type_hint)
        if isinstance(type_hint, type) and issubclass(type_hint, BaseModel):
            return type_hint.model_validate_json(payload.data, extra="ignore")
        return _adapter(type_hint).validate_json(payload.data, extra="ignore")


def _adapter(hint: Any) -> TypeAdapter[Any]:
    try:
        return _cached_adapter(hint)
    except TypeError:  # an unhashable hint
        return TypeAdapter(hint)


@functools.lru_cache(maxsize=256)
def _cached_adapter(hint: Any) -> TypeAdapter[Any]:
    return TypeAdapter(hint)


class WirePayloadConverter(CompositePayloadConverter):
    """Temporal's default payload converters with :class:`WirePayloadJSONConverter` for JSON
    (as ``temporalio.contrib.pydantic.PydanticPayloadConverter``, whose JSON one it extends)."""

    def __init__(self) -> None:
        json_converter = WirePayloadJSONConverter()
        super().__init__(
            *(
                json_converter if isinstance(c, JSONPlainPayloadConverter) else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            )
        )


wire_data_converter = DataConverter(payload_converter_class=WirePayloadConverter)
"""The data converter of every modelfleet client and worker (unencrypted)."""
