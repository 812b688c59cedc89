"""Connecting to Temporal with modelfleet's data converter (pydantic, optionally encrypted)."""

from __future__ import annotations

import dataclasses

from temporalio.client import Client
from temporalio.converter import DataConverter
from temporalio.service import TLSConfig

from modelfleet.worker.codec import EncryptionCodec
from modelfleet.worker.converter import wire_data_converter
from modelfleet.worker.settings import TemporalSettings


def data_converter(settings: TemporalSettings | None = None) -> DataConverter:
    """The pydantic converter that reads payloads by the wire contract (``worker.converter``),
    with the profile's payload encryption when it has a key."""
    if settings is not None and settings.payload_key is not None:
        codec = EncryptionCodec.from_base64(settings.payload_key.get_secret_value())
        return dataclasses.replace(wire_data_converter, payload_codec=codec)
    return wire_data_converter


def tls_option(settings: TemporalSettings) -> bool | TLSConfig:
    """``Client.connect``'s ``tls``: off, on with system roots, or the profile's certificates
    (read from their files here, at connect time)."""
    if not settings.tls_enabled:
        return False
    if settings.tls_config is not None:
        return settings.tls_config.to_connect_tls_config()
    return True


async def connect(settings: TemporalSettings) -> Client:
    api_key = settings.api_key.get_secret_value() if settings.api_key else None
    return await Client.connect(
        settings.address,
        namespace=settings.namespace,
        data_converter=data_converter(settings),
        tls=tls_option(settings),
        api_key=api_key,
        rpc_metadata=settings.rpc_metadata,
    )
