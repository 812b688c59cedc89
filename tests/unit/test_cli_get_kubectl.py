"""``modelfleet get`` with kubectl's habits, run through the CLI against a fleet read that is
faked at ``fetch`` (the rest of ``get`` runs as it does against a live fleet): ``-o jsonpath``,
``-o custom-columns``, ``--no-headers``, ``--show-labels``, ``--sort-by``, comma-joined kinds,
kubectl's short names, and an unknown-kind error in the words people type.

That the JSONPath and custom-columns semantics are kubectl's own is shown against the real
kubectl in tests/kubectl; here the pure parts are pinned on their edge cases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from typer.testing import CliRunner

from modelfleet.api.meta import API_VERSION
from modelfleet.cli import custom_columns, jsonpath, kinds
from modelfleet.cli import get as get_module
from modelfleet.cli.main import app
from modelfleet.cli.manifests import Fetched

runner = CliRunner()
NOW = datetime.now(UTC)


def deployment(name: str, ready: int, labels: dict[str, str], age_minutes: int) -> Fetched:
    created = NOW - timedelta(minutes=age_minutes)
    manifest: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": "ml", "labels": labels},
        "spec": {"replicas": 2},
        "status": {"ready": ready, "desired": 2, "updated": ready, "phase": "Progressing"},
    }
    if ready:
        manifest["status"]["clusters"] = ["l4-dev"]
    return Fetched("ModelDeployment", name, "ml", manifest, created, labels)


def service(name: str) -> Fetched:
    manifest = {
        "apiVersion": API_VERSION,
        "kind": "ModelService",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {},
        "status": {"phase": "Ready", "address": "http://gw/x", "endpoints": []},
    }
    return Fetched("ModelService", name, "ml", manifest, NOW - timedelta(minutes=1))


FLEET = {
    "ModelDeployment": [
        deployment("r10", 2, {"team": "search", "app": "qwen"}, 30),
        deployment("r2", 0, {}, 10),
        deployment("r1", 1, {"team": "ads"}, 20),
    ],
    "ModelService": [service("qwen")],
}


@pytest.fixture(autouse=True)
def fake_fleet(monkeypatch: pytest.MonkeyPatch) -> None:
    async def connect(_: object) -> object:
        return object()

    async def fetch(
        _: object, kind: str, namespace: str | None, names: list[str], *, brief: bool = False
    ) -> list[Any]:
        items = FLEET.get(kind, [])
        return [i for i in items if not names or i.name in names]

    monkeypatch.setattr(get_module, "connect_with_worker", connect)
    monkeypatch.setattr(get_module, "fetch", fetch)
    monkeypatch.setenv("MODELFLEET_NAMESPACE", "ml")


def get(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["get", *args])
    return result.exit_code, result.stdout, result.stderr


def test_jsonpath_prints_the_template_over_the_list_as_kubectl() -> None:
    code, out, _ = get("deploy", "-o", "jsonpath={.items[*].metadata.name}")
    assert (code, out) == (0, "r10 r2 r1")
    template = '{range .items[*]}{.metadata.name}{"\\t"}{.status.ready}{"\\n"}{end}'
    code, out, _ = get("deployments", "-o", f"jsonpath={template}")
    assert out == "r10\t2\nr2\t0\nr1\t1\n"
    # One named resource: the template runs over the resource itself.
    code, out, _ = get("md", "r1", "-o", "jsonpath={.metadata.labels}")
    assert out == '{"team":"ads"}'
    code, out, _ = get("md", "-o", "jsonpath={.items[?(@.status.ready==2)].metadata.name}")
    assert out == "r10"


def test_custom_columns_are_kubectls_table() -> None:
    code, out, _ = get(
        "deploy",
        "-o",
        "custom-columns=NAME:.metadata.name,TEAM:.metadata.labels.team,CLUSTERS:.status.clusters",
    )
    assert code == 0
    # Go's tabwriter as kubectl sets it: columns at least 6 wide, 3 spaces of padding.
    assert out == (
        "NAME   TEAM     CLUSTERS\n"
        "r10    search   [l4-dev]\n"
        "r2     <none>   <none>\n"
        "r1     ads      [l4-dev]\n"
    )
    code, out, _ = get("deploy", "--no-headers", "-o", "custom-columns=N:metadata.name")
    assert out == "r10\nr2\nr1\n"


def test_sort_by_no_headers_and_show_labels() -> None:
    _, out, _ = get("deploy", "--sort-by", ".metadata.name", "-o", "name")
    assert out.split() == [f"modeldeployment.modelfleet.dev/{n}" for n in ("r1", "r2", "r10")]
    _, out, _ = get("deploy", "--sort-by", "{.status.ready}", "--no-headers")
    rows = [line.split() for line in out.splitlines()]
    assert [r[0] for r in rows] == ["r2", "r1", "r10"]
    assert all(r[0] != "NAME" for r in rows)
    __, out, _ = get("deploy", "--sort-by", ".metadata.labels.team", "--show-labels")
    rows = [line.split() for line in out.splitlines()]
    assert rows[0][-1] == "LABELS"
    # Missing values first, as kubectl; labels k=v in key order, <none> without any.
    assert [(r[0], r[-1]) for r in rows[1:]] == [
        ("r2", "<none>"),
        ("r1", "team=ads"),
        ("r10", "app=qwen,team=search"),
    ]


def test_comma_joined_kinds_print_a_table_each_with_kind_slash_name() -> None:
    code, out, _ = get("deploy,svc")
    assert code == 0
    tables = out.split("\n\n")
    assert len(tables) == 2
    assert tables[0].splitlines()[0].split()[0] == "NAME"
    assert tables[0].splitlines()[1].split()[0] == "modeldeployment.modelfleet.dev/r10"
    assert tables[1].splitlines()[1].split()[0] == "modelservice.modelfleet.dev/qwen"
    code, out, _ = get("deployments,services", "-o", "name")
    assert out.split()[-1] == "modelservice.modelfleet.dev/qwen"
    code, _, err = get("deploy,", "-o", "name")
    assert code == 2
    assert "empty kind" in err


@pytest.mark.parametrize(
    ("word", "kind"),
    [
        ("deploy", "ModelDeployment"),
        ("svc", "ModelService"),
        ("ep", "ModelEndpoint"),
        ("hpa", "ModelAutoscaler"),
        ("gtw", "InferenceGateway"),
    ],
)
def test_kubectls_short_names_name_the_same_ideas(word: str, kind: str) -> None:
    assert kinds.resolve(word) == kind


def test_no_word_names_two_kinds() -> None:
    seen: dict[str, str] = {}
    for spec in kinds.specs():
        for word in spec.words:
            assert seen.setdefault(word, spec.name) == spec.name, word


def test_the_unknown_kind_error_lists_the_words_help_lists() -> None:
    code, _, err = get("pods")
    assert code == 2
    assert "unknown kind 'pods'" in err
    assert "deployments (md, deploy)" in err
    assert "services (ms, svc)" in err
    assert "ModelDeployment" not in err
    help_text = runner.invoke(app, ["get", "--help"], env={"COLUMNS": "400"}).stdout
    for spec in kinds.specs():
        assert spec.listed_as in help_text
        assert spec.listed_as in err


def test_a_bad_output_format_is_one_line_and_exit_two() -> None:
    code, _, err = get("deploy", "-o", "tabel")
    assert code == 2
    assert "unknown output format 'tabel'" in err
    assert "jsonpath=TEMPLATE" in err
    code, _, err = get("deploy", "-o", "jsonpath={.items[*]")
    assert code == 2
    assert "unclosed action" in err
    code, _, err = get("deploy", "-o", "custom-columns=NAME")
    assert code == 2
    assert "expected <header>:<json-path-expr>" in err
    code, _, err = get("deploy", "-o", "jsonpath={.items[7]}")
    assert code == 1
    assert "array index out of bounds: index 7, length 3" in err


# --- the pure parts ---------------------------------------------------------------------------


DOC = {
    "items": [
        {"metadata": {"name": "a", "annotations": {"k8s.io/cause": "x"}}, "n": 1.0, "ok": True},
        {"metadata": {"name": "b"}, "n": 2.5, "ok": None, "tags": ["p", "q"]},
    ]
}


@pytest.mark.parametrize(
    ("template", "printed"),
    [
        ("{.items[0].metadata.annotations.k8s\\.io/cause}", "x"),
        ("{.items[*]['metadata.name']}", "a b"),
        ("{.items[-1:].metadata.name}", "b"),
        ("{.items[0:1].metadata.name}", "a"),
        ("{..name}", "a b"),
        ("{.items[*].n}", "1 2.5"),
        ("{.items[*].ok}", "true null"),
        ("{.items[1].tags}", '["p","q"]'),
        ("{.items[?(@.n > 1)].metadata.name}", "b"),
        ("{.items[?(@.tags)].metadata.name}", "b"),
        ('{.items[?(@.metadata.name != "a")].metadata.name}', "b"),
        ("names: {.items[*].metadata.name}", "names: a b"),
        ("{.missing}", ""),
        ("{$.items[0].metadata.name}", "a"),
        ("{range .items[*]}[{.metadata.name}]{end}", "[a][b]"),
    ],
)
def test_jsonpath_semantics(template: str, printed: str) -> None:
    assert jsonpath.execute(jsonpath.parse(template), DOC) == printed


def test_custom_column_cells_are_gos_sprint() -> None:
    columns = custom_columns.parse_columns("T:.tags,N:.n,M:.metadata,X:.ok")
    assert custom_columns.column_cells(columns, DOC["items"][1]) == [
        "[p q]",
        "2.5",
        "map[name:b]",
        "<nil>",
    ]
