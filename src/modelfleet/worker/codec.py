"""Optional payload encryption (AES-256-GCM): with a key configured, workflow inputs, results,
signals, updates and activity payloads are stored encrypted in Temporal's history. Search
attributes, IDs and summaries are never encrypted, so modelfleet never puts secrets there."""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

ENCODING = b"binary/encrypted"
KEY_ID = b"modelfleet-v1"


class EncryptionCodec(PayloadCodec):
    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise ValueError("the payload key must be 32 bytes (base64 of 32 random bytes)")
        self._aes = AESGCM(key)

    @classmethod
    def from_base64(cls, text: str) -> EncryptionCodec:
        try:
            key = base64.b64decode(text, validate=True)
        except ValueError:
            raise ValueError("the payload key is not valid base64") from None
        return cls(key)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for p in payloads:
            nonce = os.urandom(12)
            sealed = self._aes.encrypt(nonce, p.SerializeToString(), None)
            out.append(
                Payload(
                    metadata={"encoding": ENCODING, "encryption-key-id": KEY_ID},
                    data=nonce + sealed,
                )
            )
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for p in payloads:
            if p.metadata.get("encoding") != ENCODING:
                out.append(p)  # written before encryption was enabled
                continue
            if p.metadata.get("encryption-key-id") != KEY_ID:
                raise ValueError("payload encrypted with an unknown key id")
            plain = self._aes.decrypt(p.data[:12], p.data[12:], None)
            decoded = Payload()
            decoded.ParseFromString(plain)
            out.append(decoded)
        return out
