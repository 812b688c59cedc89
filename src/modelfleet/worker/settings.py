"""How to reach Temporal: address, namespace, TLS and API key, payload encryption key. Read from
flags or environment variables; secrets are held here and never logged or put in payloads."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field, SecretStr

from modelfleet.api.meta import Model

ENV_ADDRESS = "MODELFLEET_TEMPORAL_ADDRESS"
ENV_NAMESPACE = "MODELFLEET_TEMPORAL_NAMESPACE"
ENV_API_KEY = "MODELFLEET_TEMPORAL_API_KEY"
ENV_TLS = "MODELFLEET_TEMPORAL_TLS"
ENV_UI = "MODELFLEET_TEMPORAL_UI"
ENV_PAYLOAD_KEY = "MODELFLEET_PAYLOAD_KEY"
ENV_CREDENTIALS = "MODELFLEET_CREDENTIALS_DIR"

DEFAULT_ADDRESS = "127.0.0.1:7233"
DEFAULT_UI = "http://127.0.0.1:8233"
DEFAULT_STATE_DIR = Path(".modelfleet")


class TemporalSettings(Model):
    address: str = DEFAULT_ADDRESS
    namespace: str = "default"
    tls: bool = False
    api_key: SecretStr | None = None
    ui_url: str = DEFAULT_UI
    # A base64 AES-256 key; when set, every payload is encrypted before it leaves the process.
    payload_key: SecretStr | None = Field(default=None, repr=False)

    @classmethod
    def from_env(cls, **overrides: object) -> TemporalSettings:
        env = os.environ
        values: dict[str, object] = {
            "address": env.get(ENV_ADDRESS) or env.get("TEMPORAL_ADDRESS") or DEFAULT_ADDRESS,
            "namespace": env.get(ENV_NAMESPACE) or env.get("TEMPORAL_NAMESPACE") or "default",
            "tls": env.get(ENV_TLS, "").lower() in ("1", "true", "yes"),
            "api_key": env.get(ENV_API_KEY) or env.get("TEMPORAL_API_KEY") or None,
            "ui_url": env.get(ENV_UI) or DEFAULT_UI,
            "payload_key": env.get(ENV_PAYLOAD_KEY) or None,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(values)

    def workflow_url(self, workflow_id: str) -> str:
        """A link to a workflow in the Temporal UI."""
        from urllib.parse import quote

        return f"{self.ui_url}/namespaces/{self.namespace}/workflows/{quote(workflow_id, safe='')}"
