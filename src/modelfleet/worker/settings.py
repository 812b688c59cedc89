"""How to reach Temporal: address, namespace, TLS, API key and gRPC metadata, the UI link, and the
payload encryption key.

Client settings come from Temporal's own environment configuration (``temporalio.envconfig``):
a profile from the TOML config file (``TEMPORAL_CONFIG_FILE``, default
``~/.config/temporalio/temporal.toml``; profile chosen by ``--profile`` or ``TEMPORAL_PROFILE``)
with ``TEMPORAL_ADDRESS``/``TEMPORAL_NAMESPACE``/``TEMPORAL_API_KEY``/``TEMPORAL_TLS*`` applied
over it. modelfleet's own variables override that, and flags override everything:

    flag  >  MODELFLEET_TEMPORAL_*  >  TEMPORAL_* env / profile  >  default

May touch: environment variables and the config file (read only). Secrets (API key, TLS client
key, gRPC metadata, payload key) are held here and never logged, printed or put in payloads;
``describe()`` is the form safe for a log line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import Field, SecretStr
from temporalio.envconfig import ClientConfigProfile, ClientConfigTLS

from modelfleet.api.meta import Model

ENV_ADDRESS = "MODELFLEET_TEMPORAL_ADDRESS"
ENV_NAMESPACE = "MODELFLEET_TEMPORAL_NAMESPACE"
ENV_API_KEY = "MODELFLEET_TEMPORAL_API_KEY"
ENV_TLS = "MODELFLEET_TEMPORAL_TLS"
ENV_UI = "MODELFLEET_TEMPORAL_UI"
ENV_PAYLOAD_KEY = "MODELFLEET_PAYLOAD_KEY"
ENV_CREDENTIALS = "MODELFLEET_CREDENTIALS_DIR"

DEFAULT_ADDRESS = "127.0.0.1:7233"
DEFAULT_NAMESPACE = "default"
DEFAULT_UI = "http://127.0.0.1:8233"
DEFAULT_STATE_DIR = Path(".modelfleet")

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class SettingsError(ValueError):
    """The client configuration cannot be used; the message names the source, never a secret."""


class TemporalSettings(Model):
    address: str = DEFAULT_ADDRESS
    namespace: str = DEFAULT_NAMESPACE
    # None: not said anywhere; TLS is then on exactly when an API key is set (as the SDK does).
    tls: bool | None = None
    # Server name, CA and client certificate/key from the profile or TEMPORAL_TLS_* variables;
    # read when connecting. The client key may be inline data, hence kept out of repr and dumps.
    tls_config: ClientConfigTLS | None = Field(default=None, repr=False, exclude=True)
    api_key: SecretStr | None = None
    # gRPC metadata from the profile; may carry an authorization header.
    rpc_metadata: dict[str, str] = Field(default_factory=dict, repr=False, exclude=True)
    ui_url: str = DEFAULT_UI
    # A base64 AES-256 key; when set, every payload is encrypted before it leaves the process.
    payload_key: SecretStr | None = Field(default=None, repr=False)
    # The envconfig profile these settings were read from, for messages.
    profile: str | None = None

    @classmethod
    def load(
        cls,
        profile: str | None = None,
        *,
        env: Mapping[str, str] | None = None,
        address: str | None = None,
        namespace: str | None = None,
        api_key: str | None = None,
        tls: bool | None = None,
        ui_url: str | None = None,
    ) -> TemporalSettings:
        """Settings from flags (the keyword arguments), the environment ``env`` (default: this
        process's) and the envconfig profile, in that order of precedence."""
        env = dict(os.environ if env is None else env)
        try:
            loaded = ClientConfigProfile.load(profile, override_env_vars=env)
        except Exception as exc:  # the SDK's ConfigError: bad TOML, unknown profile, ...
            where = env.get("TEMPORAL_CONFIG_FILE") or "the default Temporal config file"
            raise SettingsError(f"Temporal client configuration ({where}): {exc}") from None
        return resolve(
            loaded,
            env,
            profile=profile or env.get("TEMPORAL_PROFILE"),
            flags={
                "address": address,
                "namespace": namespace,
                "api_key": api_key,
                "tls": tls,
                "ui_url": ui_url,
            },
        )

    @property
    def tls_enabled(self) -> bool:
        if self.tls is not None:
            return self.tls
        return self.tls_config is not None or self.api_key is not None

    def describe(self) -> str:
        """Where these settings point, without any secret: safe for logs and messages."""
        parts = [f"address={self.address}", f"namespace={self.namespace}"]
        if self.profile:
            parts.append(f"profile={self.profile}")
        parts.append(f"tls={'on' if self.tls_enabled else 'off'}")
        parts.append(f"api_key={'set' if self.api_key else 'unset'}")
        parts.append(f"payload_encryption={'on' if self.payload_key else 'off'}")
        return " ".join(parts)

    def workflow_url(self, workflow_id: str) -> str:
        """A link to a workflow in the Temporal UI."""
        from urllib.parse import quote

        return f"{self.ui_url}/namespaces/{self.namespace}/workflows/{quote(workflow_id, safe='')}"


def parse_bool(name: str, raw: str | None) -> bool | None:
    """A boolean environment variable: unset or empty is None; anything unclear is an error."""
    if raw is None or not raw.strip():
        return None
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise SettingsError(f"{name}={raw!r}: expected one of true/false, yes/no, 1/0, on/off")


def resolve(
    loaded: ClientConfigProfile,
    env: Mapping[str, str],
    *,
    profile: str | None,
    flags: Mapping[str, object | None],
) -> TemporalSettings:
    """The precedence, as a pure function of the three sources: first non-empty value wins."""

    def first(*values: object | None) -> object | None:
        return next((v for v in values if v is not None and v != ""), None)

    profile_tls: bool | None = None
    if loaded.tls is not None:
        profile_tls = loaded.tls.disabled is not True
    values: dict[str, object | None] = {
        "address": first(flags.get("address"), env.get(ENV_ADDRESS), loaded.address),
        "namespace": first(flags.get("namespace"), env.get(ENV_NAMESPACE), loaded.namespace),
        "api_key": first(flags.get("api_key"), env.get(ENV_API_KEY), loaded.api_key),
        "tls": first(flags.get("tls"), parse_bool(ENV_TLS, env.get(ENV_TLS)), profile_tls),
        "ui_url": first(flags.get("ui_url"), env.get(ENV_UI)),
        "payload_key": first(env.get(ENV_PAYLOAD_KEY)),
    }
    settings = TemporalSettings.model_validate({k: v for k, v in values.items() if v is not None})
    settings.tls_config = loaded.tls if loaded.tls and loaded.tls.disabled is not True else None
    settings.rpc_metadata = dict(loaded.grpc_meta)
    settings.profile = profile
    return settings
