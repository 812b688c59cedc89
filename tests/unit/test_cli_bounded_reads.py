"""Reads that survive overload (issue 22 item 4), without a server: which outputs ``get`` serves
from visibility alone, a deployment's row built from its search attributes, what a deployment
publishes (and so when it upserts), and ``get clusters`` when one cluster workflow does not
answer."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.text import Text
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.loading import load_paths
from modelfleet.cli import clusters, columns
from modelfleet.cli.errors import CliError, NoWorkerError
from modelfleet.cli.get import parse_output
from modelfleet.cli.resources import brief_row
from modelfleet.contracts import search
from modelfleet.contracts.status import (
    ClusterRecord,
    ClusterStatus,
    DeploymentStatus,
    FleetView,
    ReplicaPhase,
    ReplicaStatus,
    ReplicaStep,
)
from modelfleet.deployment.report import search_values

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("output", "show_labels", "brief"),
    [
        ("table", False, True),
        ("name", False, True),
        ("table", True, False),  # labels live in the spec
        ("wide", False, False),  # MESSAGE is the workflow's
        ("json", False, False),
        ("yaml", False, False),
        ("jsonpath={.items[*].metadata.name}", False, False),
        ("custom-columns=N:.metadata.name", False, False),
    ],
)
def test_only_the_plain_table_and_names_come_from_visibility_alone(
    output: str, show_labels: bool, brief: bool
) -> None:
    assert parse_output(output, show_labels=show_labels).brief is brief


def _run(wid: str, pairs: list[SearchAttributePair[Any]]) -> Any:
    return SimpleNamespace(
        id=wid, start_time=datetime(2026, 11, 28, 13, 0, tzinfo=UTC),
        typed_search_attributes=TypedSearchAttributes(pairs),
    )  # fmt: skip


def _plain(cells: list[str]) -> list[str]:
    return [Text.from_markup(c).plain for c in cells]


def test_a_deployment_row_from_its_search_attributes() -> None:
    run = _run(
        "deployment/ml/qwen",
        [
            SearchAttributePair(search.PHASE, "Progressing"),
            SearchAttributePair(search.READY, 1),
            SearchAttributePair(search.DESIRED, 3),
            SearchAttributePair(search.UPDATED, 2),
            SearchAttributePair(search.CREATED, T0),
        ],
    )
    item = brief_row(run)
    assert item is not None
    assert (item.namespace, item.name, item.created) == ("ml", "qwen", T0)  # not the run's start
    row = _plain(columns.row(item, wide=False, all_namespaces=True, now=T0))
    assert row == ["ml", "qwen", "1/3", "2", "Progressing", "0s"]


def test_a_deployment_that_published_no_counts_is_asked() -> None:
    """A workflow of an older worker publishes its phase only: its row needs a query."""
    run = _run("deployment/ml/old", [SearchAttributePair(search.PHASE, "Ready")])
    assert brief_row(run) is None


def _status(ready: int, clusters: list[str], phase: str = "Progressing") -> DeploymentStatus:
    return DeploymentStatus(
        namespace="ml", name="qwen", generation=1, desired=2, scheduled=2, ready=ready,
        updated=2, phase=phase,
        replicas=[
            ReplicaStatus(
                name=f"qwen-{n}", cluster=c, index=n, phase=ReplicaPhase.READY,
                step=ReplicaStep.DONE,
            )
            for n, c in enumerate(clusters)
        ],
    )  # fmt: skip


def test_a_deployment_upserts_when_a_published_value_changes_only() -> None:
    same = search_values(_status(1, ["b", "a"]))
    assert search_values(_status(1, ["a", "b", "a"])) == same  # clusters as a sorted set
    assert search_values(_status(2, ["a", "b"])) != same  # a replica became Ready
    assert search_values(_status(1, ["a", "b"], "Ready")) != same
    assert same.clusters == ("a", "b")


async def test_get_clusters_lists_every_cluster_when_one_workflow_does_not_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loaded = load_paths([str(QUICKSTART)]).resources
    specs = [r for r in loaded if isinstance(r, InferenceCluster)][:2]
    assert len(specs) == 2
    answers, silent = specs
    classes = {r.name: r for r in loaded if r.KIND == "InferenceClass"}
    view = FleetView(
        classes=sorted(classes),
        clusters=[ClusterRecord(spec=s, ready=True) for s in specs],
        replicas=[],
    )

    async def fleet_state(client: Any) -> Any:
        return view, classes

    async def status(client: Any, name: str) -> ClusterStatus:
        if name == silent.name:
            raise NoWorkerError("no worker answered a query within 8s")
        return ClusterStatus(name=name, phase="Ready", ready=True, created=T0)

    async def running(client: Any, kind: str) -> list[Any]:
        return [_run(f"cluster/{silent.name}", [SearchAttributePair(search.PHASE, "Provisioning")])]

    monkeypatch.setattr(clusters, "fleet_state", fleet_state)
    monkeypatch.setattr(clusters, "cluster_status", status)
    monkeypatch.setattr(clusters, "running", running)
    items = {i.name: i for i in await clusters.fetch_clusters(object(), set())}  # type: ignore[arg-type]

    assert set(items) == {answers.name, silent.name}
    assert (items[answers.name].error, items[answers.name].status["phase"]) == ("", "Ready")
    assert items[silent.name].error == "no worker answered a query within 8s"
    assert items[silent.name].status["phase"] == "Provisioning"  # as it last published


def test_a_cluster_row_from_visibility_alone_shows_the_fleet_columns_unknown() -> None:
    run = _run(
        "cluster/east",
        [
            SearchAttributePair(search.NAME, "east"),
            SearchAttributePair(search.PHASE, "Provisioning"),
            SearchAttributePair(search.CREATED, T0),
        ],
    )
    item = clusters.published_cluster(run, "the Fleet workflow did not answer: busy")
    assert (item.name, item.created, item.source_error, item.error) == (
        "east", T0, "the Fleet workflow did not answer: busy", "",
    )  # fmt: skip
    assert "spec" not in item.manifest  # nothing the Fleet holds is made up
    assert item.manifest["metadata"]["creationTimestamp"] == "2026-11-28T12:00:00Z"
    u = "<unknown>"
    assert _plain(columns.row(item, wide=True, all_namespaces=False, now=T0)) == [
        "east", u, "Provisioning", u, u, u, "0s", u, u,
    ]  # fmt: skip
    older = clusters.published_cluster(_run("cluster/west", []), "why")
    assert (older.name, older.created) == ("west", run.start_time)  # no published creation
    assert _plain(columns.row(older, wide=False, all_namespaces=False, now=T0))[2] == u


def test_the_fleet_silent_line_names_the_missing_columns() -> None:
    from modelfleet.cli.cluster_view import fleet_silent

    line = fleet_silent("no worker answered a query within 8s")
    assert line.startswith("the Fleet workflow did not answer: no worker answered")
    assert line.endswith("SOURCE, STEP, POOLS, FREE, GATEWAY, REASON are <unknown>")


async def test_get_clusters_falls_back_to_visibility_when_the_fleet_does_not_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def fleet_state(client: Any) -> Any:
        raise NoWorkerError("no worker answered a query to the Fleet workflow within 8s")

    async def running(client: Any, kind: str) -> list[Any]:
        assert kind == "InferenceCluster"
        return [_run("cluster/a", [SearchAttributePair(search.PHASE, "Ready")])]

    monkeypatch.setattr(clusters, "fleet_state", fleet_state)
    monkeypatch.setattr(clusters, "running", running)
    (item,) = await clusters.fetch_clusters(object(), set())  # type: ignore[arg-type]
    assert (item.name, item.status["phase"]) == ("a", "Ready")
    assert "the Fleet workflow did not answer: no worker answered" in item.source_error

    async def nothing(client: Any, kind: str) -> list[Any]:
        return []

    monkeypatch.setattr(clusters, "running", nothing)
    with pytest.raises(CliError, match=r"Fleet workflow did not answer.*no cluster workflow runs"):
        await clusters.fetch_clusters(object(), set())  # type: ignore[arg-type]


def _pub(
    phase: str, counts: tuple[int, int, int] | None, clusters: tuple[str, ...] = ("a",)
) -> Any:
    from modelfleet.cli.rollout import Published

    ready, desired, updated = counts if counts is not None else (None, None, None)
    return Published(phase, ready, desired, updated, clusters)


def test_rollout_status_ends_on_what_a_deployment_publishes_only_where_that_is_enough() -> None:
    from modelfleet.cli.rollout import judge_published

    def verdict(pub: Any, running_now: bool = True) -> tuple[bool, str] | None:
        v = judge_published("ml", "qwen", pub, running_now)
        return None if v is None else (v.ok, v.message)

    assert verdict(_pub("Ready", (2, 2, 2))) == (True, "every replica is Ready (2/2)")
    assert verdict(_pub("Ready", (0, 0, 0), ())) == (True, "scaled to 0 replicas: nothing to run")
    # Scaled to 0 with replicas still placed: as judge, Ready with its counts.
    assert verdict(_pub("Ready", (0, 0, 0))) == (True, "every replica is Ready (0/0)")
    paused = verdict(_pub("Paused", (1, 2, 1)))
    assert paused == (
        False,
        "rollout paused (1/2 ready): resume it with "
        "`modelfleet rollout resume deployment/qwen -n ml`",
    )
    gone = verdict(_pub("Progressing", (1, 2, 2)), running_now=False)
    assert gone == (False, "the deployment's workflow is no longer running (was it deleted?)")
    # Which replica failed, what the scheduler said: only the workflow's status holds that.
    for phase in ("Progressing", "Waiting", "Degraded", "Pending", "Deleting"):
        assert verdict(_pub(phase, (1, 2, 2))) is None
    assert verdict(_pub("Ready", None)) is None  # an older worker published no counts


def test_rollout_status_asks_the_workflow_on_a_change_or_now_and_then() -> None:
    from modelfleet.cli.rollout import ASK_EVERY_SECONDS, published, should_ask

    pub = published(
        TypedSearchAttributes(
            [
                SearchAttributePair(search.PHASE, "Progressing"),
                SearchAttributePair(search.READY, 1),
                SearchAttributePair(search.DESIRED, 2),
                SearchAttributePair(search.UPDATED, 2),
                SearchAttributePair(search.CLUSTERS, ["a", "b"]),
            ]
        )
    )
    assert pub == _pub("Progressing", (1, 2, 2), ("a", "b"))
    assert published(TypedSearchAttributes([])) == _pub("", None, ())
    assert should_ask(pub, None, 0.0)  # never asked
    assert not should_ask(pub, pub, 0.5)  # asked about this very state just now
    assert should_ask(pub, pub, ASK_EVERY_SECONDS)
    assert should_ask(_pub("Progressing", (2, 2, 2), ("a", "b")), pub, 0.0)  # it changed


def test_describe_of_a_silent_deployment_prints_what_it_published() -> None:
    from modelfleet.cli.describers import published_deployment
    from modelfleet.cli.manifests import brief_deployment_resource

    item = brief_deployment_resource("ml", "qwen", T0, "Waiting", 0, 3, 0, [])
    assert published_deployment(item, "http://ui/x") == [
        "ModelDeployment ml/qwen  phase Waiting, 0/3 ready, 0 up to date (as last published)",
        "Workflow: http://ui/x",
        "Clusters: -",
        "Created: 2026-11-28T12:00:00Z",
    ]
    older = brief_deployment_resource("ml", "qwen", None, "Ready", 1, 1, 1)
    assert published_deployment(older, "u")[2:] == ["Clusters: ?", "Created: ?"]
