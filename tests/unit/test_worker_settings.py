"""Client configuration precedence: flag > MODELFLEET_* > TEMPORAL_* / envconfig profile >
default; TLS from a profile; and no secret in what the settings print."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from modelfleet.cli.main import app
from modelfleet.worker.client import tls_option
from modelfleet.worker.settings import SettingsError, TemporalSettings

SECRET_KEY = "planted-api-key-7f3a"
CONFIG = f"""
[profile.default]
address = "profile-default:7233"

[profile.prod]
address = "prod.example:7233"
namespace = "prod-ns"
api_key = "{SECRET_KEY}"

[profile.prod.tls]
server_name = "prod.example"

[profile.plain]
address = "plain:7233"
[profile.plain.tls]
disabled = true
"""


@pytest.fixture
def config(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "temporal.toml"
    path.write_text(CONFIG)
    # HOME too, so the developer's own ~/.config/temporalio never leaks into a test.
    return {"TEMPORAL_CONFIG_FILE": str(path), "HOME": str(tmp_path)}


def test_defaults_without_any_configuration(tmp_path: Path) -> None:
    s = TemporalSettings.load(env={"HOME": str(tmp_path)})
    assert (s.address, s.namespace, s.tls_enabled, s.api_key) == (
        "127.0.0.1:7233",
        "default",
        False,
        None,
    )
    assert tls_option(s) is False


def test_the_default_profile_applies_when_none_is_named(config: dict[str, str]) -> None:
    assert TemporalSettings.load(env=config).address == "profile-default:7233"


def test_a_named_profile_gives_address_namespace_api_key_and_tls(config: dict[str, str]) -> None:
    s = TemporalSettings.load("prod", env=config)
    assert (s.address, s.namespace, s.profile) == ("prod.example:7233", "prod-ns", "prod")
    assert s.api_key is not None
    assert s.api_key.get_secret_value() == SECRET_KEY
    tls = tls_option(s)
    assert not isinstance(tls, bool)
    assert tls.domain == "prod.example"


def test_temporal_profile_env_selects_the_profile(config: dict[str, str]) -> None:
    s = TemporalSettings.load(env={**config, "TEMPORAL_PROFILE": "prod"})
    assert (s.address, s.profile) == ("prod.example:7233", "prod")


def test_temporal_env_vars_override_the_profile(config: dict[str, str]) -> None:
    env = {**config, "TEMPORAL_ADDRESS": "env:1", "TEMPORAL_NAMESPACE": "env-ns"}
    s = TemporalSettings.load("prod", env=env)
    assert (s.address, s.namespace) == ("env:1", "env-ns")


def test_modelfleet_env_vars_override_temporal_ones_and_the_profile(
    config: dict[str, str],
) -> None:
    env = {
        **config,
        "TEMPORAL_ADDRESS": "env:1",
        "MODELFLEET_TEMPORAL_ADDRESS": "mf:2",
        "MODELFLEET_TEMPORAL_NAMESPACE": "mf-ns",
        "MODELFLEET_TEMPORAL_API_KEY": "mf-key",
        "MODELFLEET_TEMPORAL_UI": "http://ui:1",
    }
    s = TemporalSettings.load("prod", env=env)
    assert (s.address, s.namespace, s.ui_url) == ("mf:2", "mf-ns", "http://ui:1")
    assert s.api_key is not None
    assert s.api_key.get_secret_value() == "mf-key"


def test_flags_override_everything(config: dict[str, str]) -> None:
    env = {**config, "TEMPORAL_ADDRESS": "env:1", "MODELFLEET_TEMPORAL_ADDRESS": "mf:2"}
    s = TemporalSettings.load("prod", env=env, address="flag:3", namespace="flag-ns")
    assert (s.address, s.namespace) == ("flag:3", "flag-ns")


def test_tls_switches(config: dict[str, str]) -> None:
    # An API key turns TLS on, a profile's `disabled = true` or MODELFLEET_TEMPORAL_TLS=0 off.
    assert TemporalSettings.load(env={**config, "TEMPORAL_API_KEY": "k"}).tls_enabled
    assert not TemporalSettings.load("plain", env=config).tls_enabled
    off = TemporalSettings.load("prod", env={**config, "MODELFLEET_TEMPORAL_TLS": "0"})
    assert tls_option(off) is False
    assert TemporalSettings.load(env={**config, "MODELFLEET_TEMPORAL_TLS": "yes"}).tls_enabled
    with pytest.raises(SettingsError, match="MODELFLEET_TEMPORAL_TLS='maybe'"):
        TemporalSettings.load(env={**config, "MODELFLEET_TEMPORAL_TLS": "maybe"})


def test_payload_key_comes_from_its_modelfleet_variable(config: dict[str, str]) -> None:
    s = TemporalSettings.load(env={**config, "MODELFLEET_PAYLOAD_KEY": "a2V5"})
    assert s.payload_key is not None
    assert s.payload_key.get_secret_value() == "a2V5"


def test_an_unknown_profile_is_a_clear_error(config: dict[str, str]) -> None:
    with pytest.raises(SettingsError, match="nope"):
        TemporalSettings.load("nope", env=config)


def test_no_secret_in_repr_dump_or_description(config: dict[str, str]) -> None:
    env = {**config, "MODELFLEET_PAYLOAD_KEY": "cGF5bG9hZC1zZWNyZXQ="}
    s = TemporalSettings.load("prod", env=env)
    shown = " ".join([repr(s), str(s), str(s.model_dump()), s.model_dump_json(), s.describe()])
    assert SECRET_KEY not in shown
    assert "cGF5bG9hZC1zZWNyZXQ=" not in shown
    assert "api_key=set" in s.describe()


def test_cli_profile_option_reaches_the_connection(
    config: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in config.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MODELFLEET_TEMPORAL_ADDRESS", "")
    monkeypatch.setenv("TEMPORAL_ADDRESS", "")
    result = CliRunner().invoke(app, ["--profile", "nope", "get", "deployments"])
    assert result.exit_code == 2
    assert "Profile 'nope' not found" in result.output
    assert "Traceback" not in result.output
