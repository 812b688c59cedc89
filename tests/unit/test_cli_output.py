"""The CLI's pure parts: tables that never cut in a pipe and fit a terminal, kubectl's AGE,
label selectors, KIND/NAME targets and the default namespace, manifest-shaped output that loads
back, rollout history and verdicts, and scale signal payload validation."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from rich.console import Console
from rich.text import Text

from modelfleet.api.deployments import ModelDeployment
from modelfleet.api.kinds import parse_resource
from modelfleet.api.loading import load_text
from modelfleet.api.meta import Condition
from modelfleet.cli import columns, output
from modelfleet.cli.changes import LiveFleet, consequences, live_plan
from modelfleet.cli.errors import UsageError
from modelfleet.cli.manifests import as_document, deployment_resource
from modelfleet.cli.revisions import restart_spec, undo_spec
from modelfleet.cli.rollout import judge
from modelfleet.cli.selectors import matches, parse_selector
from modelfleet.cli.targets import Target, parse_targets, resolve_namespace, resource_name
from modelfleet.contracts.status import (
    DeploymentStatus,
    FleetView,
    ReplicaPhase,
    ReplicaStatus,
    ReplicaStep,
)
from modelfleet.deployment import decisions as rollout
from modelfleet.deployment.decisions import DeploymentState
from modelfleet.deployment.signals import scale_replicas

QWEN = Path(__file__).resolve().parents[2] / "examples" / "quickstart" / "qwen3-8b.yaml"
LONG = "gemma3-27b-bf16-a-very-long-replica-name-0123456789abcdef"


def qwen(replicas: int = 2, image: str = "vllm/vllm-openai:v0.23.0") -> ModelDeployment:
    doc = yaml.safe_load(QWEN.read_text().split("---")[0])
    doc["spec"]["replicas"] = replicas
    doc["spec"]["template"]["spec"]["engines"][0]["members"][0]["template"]["spec"]["containers"][
        0
    ]["image"] = image
    md = parse_resource(doc)
    assert isinstance(md, ModelDeployment)
    return md


def status(**kw: object) -> DeploymentStatus:
    base: dict[str, object] = {
        "namespace": "ml-team",
        "name": "qwen3-8b",
        "generation": 1,
        "desired": 2,
        "scheduled": 0,
        "ready": 0,
        "updated": 0,
        "phase": "Progressing",
    }
    base.update(kw)
    return DeploymentStatus.model_validate(base)


# --- tables -----------------------------------------------------------------------------------


def test_a_table_in_a_pipe_keeps_every_cell_whole_and_uncoloured(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    url = "http://127.0.0.1:8233/namespaces/default/workflows/deployment%2Fml-team%2Fqwen3-8b"
    output.print_table(["NAME", "PHASE", "MESSAGE"], [[LONG, "[green]Ready[/]", url]])
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == [LONG, "Ready", url]
    assert "\x1b[" not in lines[1]
    assert len(lines) == 2  # nothing wrapped onto another line


def test_a_table_on_a_terminal_fits_its_width(monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = io.StringIO()
    terminal = Console(file=buffer, width=60, force_terminal=True, highlight=False)
    monkeypatch.setattr(output, "console", terminal)
    monkeypatch.setattr(output, "stdout_is_terminal", lambda: True)
    output.print_table(
        ["NAME", "MESSAGE"], [["qwen3-8b", "0/3 clusters fit: " + "x" * 200]], flexible=["MESSAGE"]
    )
    lines = [line for line in buffer.getvalue().splitlines() if line.strip()]
    plain = [Text.from_ansi(line).plain for line in lines]
    assert all(len(line) <= 60 for line in plain), plain
    assert "qwen3-8b" in plain[1]  # the name stays whole; the message gives way
    assert "0/3 clusters fit: xxx" in plain[1]


@pytest.mark.parametrize(
    ("seconds", "age"),
    [
        (5, "5s"),
        (119, "119s"),
        (200, "3m20s"),
        (600, "10m"),
        (3 * 3600 + 120, "3h2m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 4 * 3600, "3d4h"),
        (45 * 86400, "45d"),
        (3 * 365 * 86400 + 86400, "3y1d"),
    ],
)
def test_age_is_kubectls(seconds: int, age: str) -> None:
    now = datetime(2026, 11, 23, tzinfo=UTC)
    assert output.human_age(now - timedelta(seconds=seconds), now) == age
    assert output.human_age(None) == "<unknown>"


# --- selectors and targets --------------------------------------------------------------------


def test_label_selectors_follow_kubernetes_semantics() -> None:
    labels = {"model": "qwen", "tier": "gold"}
    assert matches(parse_selector("model=qwen,tier in (gold, silver)"), labels)
    assert matches(parse_selector("model==qwen,!absent,tier"), labels)
    assert not matches(parse_selector("model!=qwen"), labels)
    assert not matches(parse_selector("tier notin (gold)"), labels)
    assert matches(parse_selector("other notin (x)"), labels)
    assert not matches(parse_selector("absent"), labels)
    with pytest.raises(UsageError, match="cannot parse"):
        parse_selector("model=(")


def test_targets_accept_kind_names_and_kind_slash_name() -> None:
    assert parse_targets(["md"]) == [Target("ModelDeployment", None)]
    assert parse_targets(["deployments", "a", "b"]) == [
        Target("ModelDeployment", "a"),
        Target("ModelDeployment", "b"),
    ]
    assert parse_targets(["md/a", "cluster/b"]) == [
        Target("ModelDeployment", "a"),
        Target("InferenceCluster", "b"),
    ]
    # The -o name form goes back in.
    assert parse_targets([resource_name("ModelDeployment", "a")]) == [
        Target("ModelDeployment", "a")
    ]
    with pytest.raises(UsageError):
        parse_targets(["md/a", "b"])
    with pytest.raises(UsageError, match="unknown kind"):
        parse_targets(["pods"])


def test_the_default_namespace_comes_from_flag_env_config_then_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.yaml"
    monkeypatch.setenv("MODELFLEET_CONFIG", str(config))
    monkeypatch.delenv("MODELFLEET_NAMESPACE", raising=False)
    assert resolve_namespace(None).name == "default"
    assert "pass -n" in resolve_namespace(None).described()
    config.write_text("namespace: from-config\n")
    assert resolve_namespace(None).name == "from-config"
    assert str(config) in resolve_namespace(None).source
    monkeypatch.setenv("MODELFLEET_NAMESPACE", "from-env")
    assert resolve_namespace(None).name == "from-env"
    assert resolve_namespace("flag").described() == "namespace 'flag'"


# --- manifests --------------------------------------------------------------------------------


def test_get_yaml_of_a_deployment_loads_back_as_the_same_resource() -> None:
    md = qwen()
    created = datetime(2026, 11, 23, 17, 0, tzinfo=UTC)
    item = deployment_resource(md, status(ready=1), created)
    assert item.manifest["metadata"]["creationTimestamp"] == "2026-11-23T17:00:00Z"
    assert item.manifest["status"]["ready"] == 1
    for single in (True, False):
        text = yaml.safe_dump(as_document([item, item] if not single else [item], single))
        loaded = load_text(text, "<get>")
        assert not loaded.errors, loaded.errors
        assert all(r.to_wire() == md.to_wire() for r in loaded.resources)
    listed = as_document([item], single=False)
    assert (listed["apiVersion"], listed["kind"]) == ("v1", "List")


def test_a_list_item_with_an_error_is_located_by_its_field() -> None:
    item = deployment_resource(qwen(), status(), None).manifest
    item["spec"]["replicas"] = 20
    loaded = load_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [item]}), "x")
    assert [e.field for e in loaded.errors] == ["spec.replicas"]
    assert loaded.errors[0].line is not None


def test_deployment_message_column_prefers_the_schedulers_words() -> None:
    s = status(
        summary="0/3 clusters fit: 2 no pool satisfies device 'gpu'",
        conditions=[Condition(type="ReplicasScheduled", status="False", reason="X", message="m")],
    )
    item = deployment_resource(qwen(), s, None)
    row = columns.row(item, wide=True, all_namespaces=True)
    assert row[0] == "ml-team"
    assert row[-1] == "0/3 clusters fit: 2 no pool satisfies device 'gpu'"
    zero = deployment_resource(qwen(0), status(desired=0), None)
    assert columns.row(zero, wide=True, all_namespaces=False)[-1] == ""


# --- rollout ----------------------------------------------------------------------------------


def test_history_has_a_revision_per_template_and_undo_restores_the_previous_one() -> None:
    at = datetime(2026, 11, 23, tzinfo=UTC)
    v1, v2 = qwen(2), qwen(2, image="vllm/vllm-openai:v0.24.0")
    state = rollout.started(DeploymentState(spec=v1), at)
    state = rollout.scaled(state, 3, at)
    state = rollout.applied(state, v2, at)
    history = state.revisions
    assert [(r.number, r.cause, r.replicas) for r in history] == [
        (1, "created", 3),
        (2, "apply", 2),
    ]
    back, number = undo_spec(history, v2, None)
    assert number == 1
    assert back.spec.template == v1.spec.template
    assert back.spec.replicas == v2.spec.replicas
    # Applied, the undo is recorded as one, naming its revision; a restart as a restart.
    state = rollout.applied(state, back, at)
    restarted = restart_spec(back, "2026-11-23T00:00:00Z")
    state = rollout.applied(state, restarted, at)
    assert [(r.number, r.cause) for r in state.revisions[2:]] == [
        (3, "undo (to revision 1)"),
        (4, "restart"),
    ]
    # A plain apply afterwards (a manifest without the annotation) is an apply again.
    state = rollout.applied(state, v2, at)
    assert state.revisions[-1].cause == "apply"
    with pytest.raises(ValueError, match="revision 7 not found"):
        undo_spec(history, v2, 7)
    with pytest.raises(ValueError, match="no previous revision"):
        undo_spec(history[:1], v1, None)


def test_a_paused_rollout_ends_saying_how_to_resume_it() -> None:
    verdict = judge(status(paused=True, phase="Paused", ready=2, updated=2), True, 0.0)
    assert verdict is not None
    assert not verdict.ok
    assert "rollout resume deployment/qwen3-8b -n ml-team" in verdict.message


def test_zero_desired_replicas_is_a_finished_rollout() -> None:
    verdict = judge(status(desired=0, phase="Ready"), True, 0.0)
    assert verdict is not None
    assert verdict.ok


def test_an_unplaceable_deployment_ends_with_the_schedulers_reasons() -> None:
    s = status(
        summary="0/3 clusters fit: 1 untolerated taint frontier-only=true:NoSchedule",
        conditions=[
            Condition(type="ReplicasScheduled", status="False", reason="Insufficient", message="")
        ],
        rejections={"h200-west": "untolerated taint frontier-only=true:NoSchedule"},
    )
    assert judge(s, True, 1.0) is None  # give the scheduler a moment
    verdict = judge(s, True, 60.0)
    assert verdict is not None
    assert not verdict.ok
    assert "0 of 2 replicas placed" in verdict.message
    assert "h200-west: untolerated taint" in verdict.message
    # A verdict of a pass that finished for this generation needs no grace.
    current = judge(s.model_copy(update={"observed_generation": 1}), True, 0.0)
    assert current is not None
    assert current.message == verdict.message


def test_a_failed_replica_with_nothing_in_flight_fails_the_rollout_with_its_reason() -> None:
    replica = ReplicaStatus(
        name="r-1",
        cluster="l4-dev",
        index=0,
        phase=ReplicaPhase.FAILED,
        step=ReplicaStep.DONE,
        reason="image pull failed",
    )
    verdict = judge(status(scheduled=1, replicas=[replica]), True, 0.0)
    assert verdict is not None
    assert not verdict.ok
    assert "r-1 on l4-dev: image pull failed" in verdict.message
    gone = judge(status(), False, 0.0)
    assert gone is not None
    assert "no longer running" in gone.message


def test_a_replica_under_repair_keeps_the_rollout_followed_not_failed() -> None:
    repairing = ReplicaStatus(
        name="r-1",
        cluster="l4-dev",
        index=0,
        phase=ReplicaPhase.DEGRADED,
        step=ReplicaStep.SERVING,
        reason="Deployment mf-ml/r-1-vllm was deleted outside modelfleet: re-created",
    )
    # Recovery in progress (drift repair, failed health checks): no verdict, `rollout status`
    # keeps following rather than exiting 1, however long it has been following.
    assert judge(status(scheduled=1, replicas=[repairing]), True, 600.0) is None


@pytest.mark.parametrize(
    ("payload", "wanted"),
    [(3, 3), ("4", 4), ({"replicas": 0}, 0), (10, 10)],
)
def test_scale_signal_payloads_that_are_usable(payload: object, wanted: int) -> None:
    assert scale_replicas(payload, 10) == wanted


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ("three", "expected an integer"),
        (True, "expected an integer"),
        (2.5, "expected an integer"),
        (11, "between 0 and 10"),
        (-1, "between 0 and 10"),
        ({"count": 1}, "expected {'replicas': N}"),
        (None, "expected an integer"),
    ],
)
def test_scale_signal_payloads_that_are_not_say_why(payload: object, reason: str) -> None:
    result = scale_replicas(payload, 10)
    assert isinstance(result, str)
    assert reason in result


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"\xff\xfe\x00binary", "not UTF-8 text"),
        (b"namespace: [unclosed\n", "not valid YAML"),
        (b"- a\n- b\n", "expected a YAML mapping"),
        (b"just words", "expected a YAML mapping"),
    ],
)
def test_a_config_file_that_is_not_a_yaml_mapping_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes, reason: str
) -> None:
    """MODELFLEET_CONFIG at a non-YAML file is not silently ignored (issue 23)."""
    config = tmp_path / "config.txt"
    config.write_bytes(content)
    monkeypatch.setenv("MODELFLEET_CONFIG", str(config))
    monkeypatch.delenv("MODELFLEET_NAMESPACE", raising=False)
    with pytest.raises(UsageError) as raised:
        resolve_namespace(None)
    message = str(raised.value)
    assert "MODELFLEET_CONFIG" in message
    assert str(config) in message
    assert reason in message
    assert "\n" not in message
    assert resolve_namespace("flag").name == "flag"


def test_a_dry_run_of_a_new_deployment_counts_only_the_replicas_that_fit() -> None:
    """`would start 2 replica(s)` then `0/2 replicas scheduled` contradicted itself (issue 23)."""
    md = qwen(replicas=2)
    live = LiveFleet(FleetView(classes=[], clusters=[], replicas=[]), {})
    plan = live_plan(live, md, [md])
    assert (plan.scheduled, plan.desired) == (0, 2)
    (line,) = consequences(live, md, plan)
    assert line.startswith("would start 0 of 2 replica(s) now; 2 would wait Pending")
    assert consequences(live, md) == ["would start 2 replica(s)"]
