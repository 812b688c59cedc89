"""No traceback ever reaches a user: every verb, given bad arguments or no Temporal server,
ends with a clear message and exit code 1 (run time) or 2 (usage, validation)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from modelfleet.cli.errors import NotFoundError, NoWorkerError, UsageError, explain
from modelfleet.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
QWEN = str(ROOT / "examples" / "quickstart" / "qwen3-8b.yaml")
QUICKSTART = str(ROOT / "examples" / "quickstart")
GATEWAY = str(ROOT / "examples" / "quickstart" / "gateway.yaml")
AUTOSCALER = str(ROOT / "examples" / "autoscaling" / "qwen3-8b-autoscaler.yaml")
PARITY = ROOT / "tests" / "corpus" / "modelplane" / "valid"
CACHES = str(PARITY / "caches.yaml")
INFRASTRUCTURE = str(PARITY / "infrastructure.yaml")
TRAEFIK = str(PARITY / "gateway.yaml")
runner = CliRunner()


def _closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


NO_SERVER = f"127.0.0.1:{_closed_port()}"

# (arguments, exit code, a fragment the message must contain)
BAD_ARGUMENTS = [
    (["validate", "-f", "/no/such/file.yaml"], 2, "No such file"),
    (["schema", "Pod"], 2, "unknown kind 'Pod'"),
    (["plan", "-f", "/no/such/dir"], 2, "No such file"),
    (["render", "-f", QUICKSTART, "--replica", "nope"], 2, "no placed replica named"),
    (["apply", "-f", "/no/such/file.yaml"], 2, "No such file"),
    (["apply"], 2, "Missing option"),
    (["diff", "-f", "/no/such/file.yaml"], 2, "No such file"),
    (["get"], 2, "Missing argument"),
    (["get", "pods"], 2, "unknown kind 'pods'"),
    (["get", "md/a", "b"], 2, "KIND/NAME"),
    (["get", "md", "-l", "a in (b"], 2, "cannot parse"),
    (["get", "md", "-o", "xml"], 2, "Invalid value"),
    (["get", "services/a", "b"], 2, "KIND/NAME"),
    (["get", "autoscalers", "-o", "csv"], 2, "Invalid value"),
    (["describe", "md"], 2, "exactly one resource"),
    (["describe", "pods/x"], 2, "unknown kind"),
    (["describe", "services"], 2, "exactly one resource"),
    (["describe", "autoscaler/a", "autoscaler/b"], 2, "exactly one resource"),
    (["scale", "md", "x"], 2, "Missing option"),
    (["scale", "md", "x", "--replicas", "two"], 2, "Invalid value"),
    (["scale", "cluster", "x", "--replicas", "1"], 2, "only deployments can be scaled"),
    (["delete"], 2, "either KIND NAME"),
    (["delete", "md"], 2, "name what to delete"),
    (["delete", "md", "x", "-f", QWEN], 2, "either KIND NAME"),
    (["delete", "services"], 2, "name what to delete"),
    (["delete", "replicas", "x"], 2, "delete ModelReplica is not supported"),
    (["get", "caches/a", "b"], 2, "KIND/NAME"),
    (["get", "servingstacks", "-o", "xml"], 2, "Invalid value"),
    (["get", "gkeclusters", "-l", "a in (b"], 2, "cannot parse"),
    (["describe", "caches"], 2, "exactly one resource"),
    (["delete", "caches"], 2, "name what to delete"),
    (["delete", "ekscluster/a", "b"], 2, "KIND/NAME"),
    (["scale", "cache", "x", "--replicas", "1"], 2, "only deployments can be scaled"),
    (["rollout", "status", "servingstack/x"], 2, "rollouts are of deployments"),
    (["scale", "autoscaler", "x", "--replicas", "1"], 2, "only deployments can be scaled"),
    (["autoscaler"], 2, "Usage"),
    (["autoscaler", "status"], 2, "Missing argument"),
    (["autoscaler", "history", "x", "--limit", "many"], 2, "Invalid value"),
    (["autoscaler", "history", "x", "--limit", "0"], 2, "Invalid value"),
    (["autoscaler", "delete"], 2, "Missing argument"),
    (["autoscaler", "nope"], 2, "No such command"),
    (["rollout", "status"], 2, "Missing argument"),
    (["rollout", "history", "cluster/x"], 2, "rollouts are of deployments"),
    (["rollout", "status", "cluster/x", "cluster/y"], 2, "exactly one resource"),
    (["delete", "cluster"], 2, "name what to delete"),
    (["rollout", "history", "md", "a", "b"], 2, "exactly one resource"),
    (["rollout", "undo", "pods/x"], 2, "unknown kind"),
    (["rollout", "restart"], 2, "Missing argument"),
    (["rollout", "pause", "cluster/x"], 2, "rollouts are of deployments"),
    (["rollout", "resume"], 2, "Missing argument"),
    (["rollout", "nope"], 2, "No such command"),
    (["worker", "--max-concurrent-activities", "0"], 2, "Invalid value"),
    (["dev", "--fleet", "/no/such/dir"], 2, "No such file"),
    (["demo", "--fleet", "/no/such/dir"], 2, "No such file"),
    (["sim", "up", "--fleet", "/no/such/dir"], 2, "No such file"),
    (["sim", "faults"], 2, "name the simulated CLUSTER"),
    (["sim", "faults", "--fail", "quota"], 2, "add --cloud"),
    (["sim", "faults", "--cloud", "aws"], 2, "Invalid value"),
    (["sim", "faults", "x", "--cloud", "gke"], 2, "give no CLUSTER"),
    (["sim", "faults", "--cloud", "gke", "--fail", "meteor"], 2, "Invalid value"),
    (["nope"], 2, "No such command"),
]

# Verbs that talk to Temporal, pointed at an address where nothing listens.
NO_SERVER_CALLS = [
    ["apply", "-f", QWEN],
    ["apply", "--dry-run", "-f", QWEN],
    ["diff", "-f", QWEN],
    ["get", "deployments"],
    ["get", "md/x", "-o", "yaml"],
    ["describe", "deployment", "x"],
    ["scale", "deployment", "x", "--replicas", "1"],
    ["delete", "deployment", "x"],
    ["delete", "-f", QWEN],
    ["rollout", "status", "x"],
    ["rollout", "history", "x"],
    ["rollout", "undo", "x"],
    ["rollout", "restart", "x"],
    ["rollout", "pause", "deployment/x"],
    ["rollout", "resume", "x", "-n", "ml"],
    ["worker", "--credentials-dir", "/tmp"],
    ["apply", "-f", GATEWAY],
    ["apply", "--dry-run", "-f", AUTOSCALER],
    ["diff", "-f", AUTOSCALER],
    ["get", "services"],
    ["get", "endpoints", "-o", "yaml"],
    ["get", "gateways", "-o", "name"],
    ["get", "autoscalers", "-A", "-o", "wide"],
    ["describe", "service", "x"],
    ["describe", "autoscaler/x"],
    ["describe", "endpoint", "x"],
    ["delete", "service", "x"],
    ["delete", "endpoint/x", "--ignore-not-found"],
    ["delete", "-f", AUTOSCALER],
    ["autoscaler", "status", "x"],
    ["autoscaler", "history", "x", "-n", "ml"],
    ["autoscaler", "delete", "x"],
    ["apply", "-f", CACHES],
    ["apply", "--dry-run", "-f", INFRASTRUCTURE],
    ["diff", "-f", TRAEFIK],
    ["get", "caches", "-A", "-l", "tier=gold"],
    ["get", "gkeclusters", "-o", "name"],
    ["get", "servingstack/x", "-n", "modelplane-system", "-o", "json"],
    ["describe", "cache", "x"],
    ["delete", "cache", "x", "--ignore-not-found"],
    ["delete", "-f", CACHES],
    ["get", "clusters", "-o", "wide"],
    ["describe", "cluster", "x"],
    ["delete", "cluster", "x", "--force"],
    ["rollout", "status", "cluster/x"],
    # Modelplane's Traefik gateway is deletable by name: the fleet is asked which one it is.
    ["delete", "gateway", "default"],
]


def _assert_clean(output: str) -> None:
    assert "Traceback" not in output
    assert 'File "' not in output


@pytest.mark.parametrize(("args", "code", "fragment"), BAD_ARGUMENTS, ids=lambda a: str(a))
def test_every_verb_with_bad_arguments_says_why_and_exits_1_or_2(
    args: list[str], code: int, fragment: str
) -> None:
    result = runner.invoke(app, args, env={"MODELFLEET_TEMPORAL_ADDRESS": NO_SERVER})
    output = result.output + result.stderr
    assert result.exit_code == code, output
    assert fragment in output, output
    _assert_clean(output)
    assert result.exception is None or isinstance(result.exception, SystemExit), output


@pytest.mark.parametrize("args", NO_SERVER_CALLS, ids=lambda a: " ".join(a))
def test_every_server_verb_without_a_server_names_the_address_and_modelfleet_dev(
    args: list[str],
) -> None:
    result = runner.invoke(app, args, env={"MODELFLEET_TEMPORAL_ADDRESS": NO_SERVER})
    output = result.output + result.stderr
    assert result.exit_code == 1, output
    assert "cannot reach Temporal" in output
    assert NO_SERVER in output
    assert "modelfleet dev" in output
    _assert_clean(output)


def test_the_boundary_maps_exception_classes_to_exit_codes() -> None:
    assert explain(UsageError("bad"))[0] == 2
    assert explain(NotFoundError("gone")) == (1, "gone")
    assert explain(NoWorkerError("none"))[0] == 1
    code, message = explain(RuntimeError("boom"))
    assert code == 1
    assert "unexpected RuntimeError: boom" in message
    assert "MODELFLEET_DEBUG=1" in message


def test_an_unexpected_exception_in_a_verb_is_a_message_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def explode(*_: object, **__: object) -> None:
        raise KeyError("surprise")

    monkeypatch.setattr("modelfleet.cli.validate.load_paths", explode)
    result = runner.invoke(app, ["validate", "-f", QWEN])
    assert result.exit_code == 1
    assert "unexpected KeyError" in result.stderr
    _assert_clean(result.output + result.stderr)
