"""The simulated gateway's credentials: the API-key check (a rule's ``ExtensionRef`` to a Secret
of SHA-256 key hashes; a caller must send ``Authorization: Bearer`` with a key whose hash is
there) and upstream credentials (a backendRef's ``ExtensionRef`` to a Secret whose ``token`` is
sent to that backend instead of the caller's key).

Development/test emulator only. Reads Secrets from the cluster's in-process store.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
from collections.abc import Mapping

from modelfleet.sim.apiserver.store import ClusterStore
from modelfleet.sim.serving.routes import BackendRef, RuleMatch
from modelfleet.sim.serving.store_view import get

__all__ = ["authorised", "upstream_token"]


def authorised(store: ClusterStore, headers: Mapping[str, str], match: RuleMatch) -> bool:
    refs = [e for e in match.extensions if e.get("kind") == "Secret"]
    if not refs:
        return True
    header = headers.get("Authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        return False
    digest = hashlib.sha256(key.strip().encode()).hexdigest()
    for ref in refs:
        secret = get(store, "v1", "Secret", match.namespace, str(ref.get("name", "")))
        for value in ((secret or {}).get("data") or {}).values():
            with contextlib.suppress(ValueError):
                if base64.b64decode(value).decode().strip() == digest:
                    return True
    return False


def upstream_token(store: ClusterStore, backend: BackendRef) -> str | None:
    """A backendRef's ExtensionRef to a Secret: its ``token`` replaces the caller's
    Authorization on requests to that backend (a provider's key)."""
    for ref in backend.extensions:
        if ref.get("kind") != "Secret":
            continue
        secret = get(store, "v1", "Secret", backend.namespace, str(ref.get("name", "")))
        token = ((secret or {}).get("data") or {}).get("token")
        if token:
            with contextlib.suppress(ValueError):
                return base64.b64decode(token).decode().strip()
    return None
