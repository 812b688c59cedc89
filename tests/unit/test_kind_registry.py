"""The CLI's kind registry (cli/kinds.py): every registered kind works with every verb that
takes kinds, and a kind registered there alone (a throwaway one, below) is picked up by ``get``,
completion, the unknown-kind error and apply/delete ordering with no other change."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Literal

import pytest
from temporalio.client import Client
from typer.testing import CliRunner

from modelfleet.api.kinds import KINDS
from modelfleet.api.meta import Model, ObjectMeta, Resource
from modelfleet.cli import apply, columns, get, kinds, mutate
from modelfleet.cli.errors import UsageError
from modelfleet.cli.main import app
from modelfleet.cli.manifests import Fetched
from modelfleet.cli.targets import parse_targets, resource_name
from modelfleet.worker.tuning import Tuning

NOW = datetime(2025, 1, 1, tzinfo=UTC)
ALL = sorted(kinds.REGISTRY)


def _plain(cells: list[str]) -> list[str]:
    from rich.text import Text

    return [Text.from_markup(c).plain for c in cells]


# --- (a) every registered kind, every verb ----------------------------------------------------


def test_the_registry_holds_exactly_the_kinds_the_api_parses() -> None:
    assert set(kinds.REGISTRY) == set(KINDS)
    for kind, spec in kinds.REGISTRY.items():
        assert spec.model is KINDS[kind]
        assert spec.namespaced is KINDS[kind].NAMESPACED


@pytest.mark.parametrize("kind", ALL)
def test_every_word_of_a_kind_resolves_to_it(kind: str) -> None:
    spec = kinds.spec_of(kind)
    words = [kind, kind.lower(), spec.plural, *spec.short_names, *spec.aliases]
    words += [w.upper() for w in words] + [f"{kind.lower()}.modelfleet.dev"]
    for word in words:
        assert kinds.resolve(word) == kind, word
        assert parse_targets([word, "x"])[0].kind == kind
        assert parse_targets([f"{word}/x"])[0].kind == kind
    assert spec.short_names, kind


def test_no_word_names_two_kinds() -> None:
    seen: dict[str, str] = {}
    for spec in kinds.specs():
        for word in spec.words:
            assert seen.setdefault(word, spec.name) == spec.name, word


@pytest.mark.parametrize("kind", ALL)
def test_every_kind_is_ordered_for_apply_and_delete_or_says_why_not(kind: str) -> None:
    spec = kinds.spec_of(kind)
    assert kind in apply.ORDER or spec.held or spec.not_applied
    assert kind in mutate.DELETE_ORDER or spec.held or spec.not_deleted
    assert kind in kinds.delete_order() or kind in kinds.not_deleted()


@pytest.mark.parametrize("kind", ALL)
@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("all_namespaces", [False, True])
def test_every_kind_has_columns_and_its_rows_fit_them(
    kind: str, wide: bool, all_namespaces: bool
) -> None:
    spec = kinds.spec_of(kind)
    header = columns.header(kind, wide=wide, all_namespaces=all_namespaces)
    assert spec.columns[0] == "NAME"
    assert "AGE" in spec.columns
    assert (header[0] == "NAMESPACE") is (all_namespaces and spec.namespaced)
    item = Fetched(kind, "x", "ns" if spec.namespaced else "", {"spec": {}, "status": {}}, NOW)
    row = columns.row(item, wide=wide, all_namespaces=all_namespaces, now=NOW)
    assert len(row) == len(header)
    assert _plain(row)[header.index("AGE")] == "0s"


@pytest.mark.parametrize("kind", ALL)
def test_every_kind_is_read_described_and_held_somewhere(kind: str) -> None:
    spec = kinds.spec_of(kind)
    assert spec.fetch is not None
    assert spec.describe is not None
    assert spec.workflow
    assert spec.workflow_id is not None
    assert spec.apply is not None or spec.held or spec.not_applied
    assert spec.delete is not None or spec.held or spec.not_deleted


@pytest.mark.parametrize("kind", ALL)
def test_completion_offers_every_kind(kind: str) -> None:
    spec = kinds.spec_of(kind)
    assert spec.plural in kinds.complete_kind("")
    assert spec.plural in kinds.complete_kind(spec.plural[:3])
    for short in spec.short_names:
        assert short in kinds.complete_kind(short)


def test_completion_through_the_shell_protocol() -> None:
    result = CliRunner().invoke(
        app,
        [],
        prog_name="modelfleet",
        env={
            "_MODELFLEET_COMPLETE": "complete_bash",
            "COMP_WORDS": "modelfleet get mod",
            "COMP_CWORD": "2",
        },
    )
    offered = result.output.split()
    assert "modeldeployments" in offered
    assert "modelcaches" in offered
    assert "inferenceclasses" not in offered


def test_the_unknown_kind_error_lists_every_kind() -> None:
    """In the words people type, as ``get --help`` lists them, with their short names."""
    with pytest.raises(UsageError) as caught:
        kinds.resolve("nosuchkind")
    assert caught.value.message == (
        "unknown kind 'nosuchkind' (known kinds: classes (icl), clusters (ic), "
        "deployments (md, deploy), replicas (mr), services (ms, svc), endpoints (me, ep), "
        "gateways (ig, gtw), autoscalers (ma, hpa), caches (mc); held, not acted upon: "
        "servingstacks (ss), gkeclusters (gke), eksclusters (eks), aksclusters (aks), "
        "nebiusclusters (mk8s), vultrclusters (vke))"
    )
    result = CliRunner().invoke(app, ["get", "nosuchkind"])
    assert result.exit_code == 2
    for kind in ALL:
        assert kinds.spec_of(kind).listed_as in result.output


def test_get_help_lists_the_registry() -> None:
    assert kinds.listed() == (
        "classes, clusters, deployments, replicas, services, endpoints, gateways, autoscalers, "
        "caches; held, not acted upon: servingstacks, gkeclusters, eksclusters, aksclusters, "
        "nebiusclusters, vultrclusters"
    )


def test_apply_and_delete_orders_keep_their_dependencies() -> None:
    order, gone = apply.ORDER, mutate.DELETE_ORDER
    assert order["InferenceClass"] < order["InferenceCluster"] < order["ModelDeployment"]
    assert order["ModelCache"] < order["ModelDeployment"] < order["ModelService"]
    assert order["InferenceGateway"] < order["ModelService"] < order["ModelAutoscaler"]
    assert gone["ModelAutoscaler"] < gone["ModelDeployment"] < gone["ModelCache"]
    assert gone["InferenceCluster"] < gone["InferenceClass"]
    assert mutate.NOT_DELETED.keys() == {"ModelReplica", "InferenceGateway"}


# --- (b) a kind registered in the registry alone ----------------------------------------------


class WidgetSpec(Model):
    size: int = 1


class ModelWidget(Resource):
    KIND: ClassVar[str] = "ModelWidget"
    NAMESPACED: ClassVar[bool] = True
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("mw",)
    kind: Literal["ModelWidget"] = "ModelWidget"
    spec: WidgetSpec = WidgetSpec()


def _widget(name: str, size: int) -> Fetched:
    manifest = {"kind": "ModelWidget", "metadata": {"name": name}, "spec": {"size": size}}
    created = datetime.now(UTC) - timedelta(minutes=3, seconds=5)  # AGE: 3m5s
    return Fetched("ModelWidget", name, "default", manifest, created)


applied: list[str] = []


async def _fetch_widgets(client: Client, namespace: str | None, wanted: set[str]) -> list[Fetched]:
    return [w for w in (_widget("big", 9), _widget("small", 1)) if not wanted or w.name in wanted]


async def _apply_widget(client: Client, r: Any, rpc_timeout: Any, tuning: Any) -> str:
    applied.append(r.name)
    return f"widget/{r.namespace}/{r.name}"


WIDGET = kinds.KindSpec(
    model=ModelWidget,
    aliases=("widget", "widgets"),
    workflow="WidgetWorkflow",
    workflow_id=lambda ns, name: f"widget/{ns}/{name}",
    apply_rank=4,
    delete_rank=1,
    columns=("NAME", "SIZE", "AGE"),
    row=lambda item, age, wide: [item.name, str(item.manifest["spec"]["size"]), age],
    fetch=_fetch_widgets,
    apply=_apply_widget,
)


@pytest.fixture
def widget(monkeypatch: pytest.MonkeyPatch) -> kinds.KindSpec:
    monkeypatch.setitem(kinds.REGISTRY, "ModelWidget", WIDGET)

    async def no_server(s: Any) -> Any:
        return object()

    monkeypatch.setattr(get, "connect_with_worker", no_server)
    monkeypatch.setattr(apply, "connect_with_worker", no_server)
    return WIDGET


def test_a_new_kind_resolves_completes_and_is_listed_as_known(widget: kinds.KindSpec) -> None:
    for word in ("ModelWidget", "modelwidget", "modelwidgets", "mw", "widget", "widgets"):
        assert kinds.resolve(word) == "ModelWidget"
    assert "modelwidgets" in kinds.complete_kind("mod")
    assert "mw" in kinds.complete_kind("m")
    assert "widgets" in kinds.listed()
    with pytest.raises(UsageError, match=r"widgets \(mw\)"):
        kinds.resolve("gadget")


def test_a_new_kind_is_ordered_for_apply_and_delete(widget: kinds.KindSpec) -> None:
    assert kinds.apply_order()["ModelWidget"] == 4
    assert kinds.delete_order()["ModelWidget"] == 1
    assert "ModelWidget" not in kinds.not_deleted()


def test_get_lists_a_new_kind_in_its_columns(widget: kinds.KindSpec) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["get", "widgets", "-n", "default"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    lines = [line.split() for line in result.output.splitlines()]
    assert [line[:2] for line in lines] == [["NAME", "SIZE"], ["big", "9"], ["small", "1"]]
    assert [line[2] for line in lines[1:]] == ["3m5s", "3m5s"] or lines[1][2].startswith("3m")

    result = runner.invoke(app, ["get", "mw/small", "-A", "-o", "name"])
    assert result.output.splitlines() == [resource_name("ModelWidget", "small")]

    result = runner.invoke(app, ["get", "mw", "-A"], env={"COLUMNS": "120"})
    assert result.output.split()[:4] == ["NAMESPACE", "NAME", "SIZE", "AGE"]


async def test_apply_dispatches_a_new_kind_through_its_spec(widget: kinds.KindSpec) -> None:
    applied.clear()
    resource = ModelWidget(kind="ModelWidget", metadata=ObjectMeta(name="w"))
    wid = await apply.apply_resource(object(), resource, tuning=Tuning())  # type: ignore[arg-type]
    assert wid == "widget/default/w"
    assert applied == ["w"]
    assert apply.not_applied(resource) is None


def test_a_registered_kind_without_a_reader_is_refused_by_get(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(kinds.REGISTRY, "ModelWidget", replace(WIDGET, fetch=None))
    result = CliRunner().invoke(app, ["get", "widgets"])
    assert result.exit_code == 2
    assert "ModelWidget is not orchestrated yet" in result.output
