"""``get deployments`` when deployments' workflows cannot answer (issue 22 item 4). The plain
table and ``-o name`` come from visibility alone (the phase, counts and creation time each
deployment publishes): every row prints and the command succeeds though no workflow answers a
query. Outputs that need a workflow's answer (``-o wide|yaml|json``...) ask each, a few at a
time: the list shows every row it could read, a row of what visibility knows for one that did
not answer, one error line naming it and why, and exits 1, as kubectl does after a partial
list; ``-o yaml`` leaves the unanswered one out. Against the real dev server: a silent
deployment is a workflow on a task queue nobody polls, so its queries time out."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio import workflow
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from typer.testing import CliRunner

from modelfleet.api.deployments import ModelDeployment
from modelfleet.api.loading import load_paths
from modelfleet.cli import clusters, resources
from modelfleet.cli.main import app
from modelfleet.contracts import search
from modelfleet.contracts.activity_names import TASK_QUEUE
from modelfleet.contracts.ids import FLEET_ID, cluster_id, deployment_id
from modelfleet.contracts.status import DeploymentStatus

QWEN = Path(__file__).resolve().parents[2] / "examples" / "quickstart" / "qwen3-8b.yaml"


@workflow.defn(name="Poller")
class Poller:
    """Something polling the CLI's task queue, so ``get`` finds a worker there."""

    @workflow.run
    async def run(self) -> None:
        return None


def _get(address: str) -> Callable[..., Any]:
    """``modelfleet get ARGS`` in process against ``address``, wide enough for every column."""

    def get(*args: str) -> Any:
        return CliRunner().invoke(app, ["--address", address, "get", *args], env={"COLUMNS": "200"})

    return get


async def _two_rows(
    get: Callable[..., Any], *args: str, namespace: str | None = None
) -> tuple[Any, list[list[str]]]:
    """The first ``get ARGS`` listing two rows (of ``namespace`` when given, its first column),
    or the last one tried after 60 s: visibility lags a start by well under a second."""
    deadline = time.monotonic() + 60
    while True:
        result = await asyncio.to_thread(get, *args)
        rows = [line.split() for line in result.stdout.splitlines()[1:]]
        if namespace is not None:
            rows = [r for r in rows if r[0] == namespace]
        if len(rows) == 2 or time.monotonic() > deadline:
            return result, rows
        await asyncio.sleep(0.2)


async def _start(
    client: Client,
    name: str,
    phase: str,
    counts: tuple[int, int, int] | None = None,
    ns: str = "ml",
    clusters: list[str] | None = None,
) -> None:
    """A deployment-kind workflow on a queue nobody polls: listed by visibility, never answers.
    ``counts`` (ready, desired, updated): published as a deployment workflow publishes them."""
    published: list[SearchAttributePair[Any]] = [
        SearchAttributePair(search.KIND, "ModelDeployment"),
        SearchAttributePair(search.NAMESPACE, ns),
        SearchAttributePair(search.NAME, name),
        SearchAttributePair(search.PHASE, phase),
    ]
    if counts is not None:
        published += [
            SearchAttributePair(search.READY, counts[0]),
            SearchAttributePair(search.DESIRED, counts[1]),
            SearchAttributePair(search.UPDATED, counts[2]),
            SearchAttributePair(search.CREATED, CREATED),
        ]
    if clusters is not None:
        published.append(SearchAttributePair(search.CLUSTERS, clusters))
    await client.start_workflow(
        "ModelDeployment",
        id=deployment_id(ns, name),
        task_queue=f"nobody-{uuid.uuid4().hex[:6]}",
        search_attributes=TypedSearchAttributes(published),
    )


CREATED = datetime(2026, 11, 1, tzinfo=UTC)


async def test_one_silent_deployment_does_not_take_the_list_down(
    dev_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    address = dev_client.service_client.config.target_host
    qwen = next(r for r in load_paths([str(QWEN)]).resources if isinstance(r, ModelDeployment))
    monkeypatch.setattr(resources, "QUERY_TIMEOUT", resources.timedelta(seconds=1))
    real_status, real_spec = resources.deployment_status, resources.deployment_spec

    # "answers" stands for a deployment whose workflow answers; "silent" asks for real.
    async def status(client: Client, ns: str, name: str) -> DeploymentStatus:
        if name == "answers":
            return DeploymentStatus(
                namespace=ns, name=name, generation=1, desired=2, scheduled=2, ready=2,
                updated=2, phase="Ready",
            )  # fmt: skip
        return await real_status(client, ns, name)

    async def spec(client: Client, ns: str, name: str) -> Any:
        if name == "answers":
            return qwen.model_copy(
                update={"metadata": qwen.metadata.model_copy(update={"name": name})}
            )
        return await real_spec(client, ns, name)

    monkeypatch.setattr(resources, "deployment_status", status)
    monkeypatch.setattr(resources, "deployment_spec", spec)
    await _start(dev_client, "answers", "Ready")
    await _start(dev_client, "silent", "Progressing")

    get = _get(address)
    async with Worker(
        dev_client,
        task_queue=TASK_QUEUE,
        workflows=[Poller],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        result, rows = await _two_rows(get, "deployments", "-n", "ml")
        as_yaml = await asyncio.to_thread(get, "deployments", "-n", "ml", "-o", "yaml")

    assert result.exit_code == 1, result.output
    assert sorted(r[:4] for r in rows) == [
        ["answers", "2/2", "2", "Ready"],
        ["silent", "?/?", "?", "Progressing"],
    ], result.stdout
    assert (
        "Error from server (Unavailable): modeldeployment.modelfleet.dev/silent in namespace ml "
        "did not answer: no worker answered a query"
    ) in " ".join(result.stderr.split())
    assert "Traceback" not in result.output
    assert as_yaml.exit_code == 1
    assert [i["metadata"]["name"] for i in yaml.safe_load(as_yaml.stdout)["items"]] == ["answers"]


async def test_the_plain_list_needs_no_workflow_to_answer(
    dev_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two deployments whose workflows never answer a query (nobody polls their queue): ``get
    deployments`` and ``-o name`` list both from what they published, exit 0 and ask nothing;
    ``-o wide`` (MESSAGE is the workflow's) asks, shows both rows from visibility with the
    counts they published, an error line each, and exits 1. ``get md NAME`` reads the
    workflow's own record (describe: no lag behind an apply, no workflow task)."""
    address = dev_client.service_client.config.target_host
    monkeypatch.setattr(resources, "QUERY_TIMEOUT", resources.timedelta(seconds=1))
    asked: list[str] = []
    real_status = resources.deployment_status

    async def status(client: Client, ns: str, name: str) -> DeploymentStatus:
        asked.append(name)
        return await real_status(client, ns, name)

    monkeypatch.setattr(resources, "deployment_status", status)
    await _start(dev_client, "busy-a", "Progressing", (1, 2, 2), ns="ml-brief")
    await _start(dev_client, "busy-b", "Waiting", (0, 1, 0), ns="ml-brief")

    get = _get(address)
    async with Worker(
        dev_client,
        task_queue=TASK_QUEUE,
        workflows=[Poller],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        table, rows = await _two_rows(get, "deployments", "-A", namespace="ml-brief")
        names = await asyncio.to_thread(get, "md", "-n", "ml-brief", "-o", "name")
        one = await asyncio.to_thread(get, "md", "busy-b", "-n", "ml-brief")
        assert asked == []  # not one query so far
        wide = await asyncio.to_thread(get, "md", "-n", "ml-brief", "-o", "wide")

    assert table.exit_code == 0, table.output
    assert sorted(r[:5] for r in rows) == [
        ["ml-brief", "busy-a", "1/2", "2", "Progressing"],
        ["ml-brief", "busy-b", "0/1", "0", "Waiting"],
    ], table.stdout
    assert all(r[5].endswith("d") for r in rows), table.stdout  # AGE: days, as published
    assert (names.exit_code, names.stdout.split()) == (
        0,
        ["modeldeployment.modelfleet.dev/busy-a", "modeldeployment.modelfleet.dev/busy-b"],
    )
    assert one.exit_code == 0, one.output
    assert one.stdout.splitlines()[1].split()[:4] == ["busy-b", "0/1", "0", "Waiting"]
    assert sorted(asked) == ["busy-a", "busy-b"]
    assert wide.exit_code == 1, wide.output
    wide_rows = sorted(line.split()[:4] for line in wide.stdout.splitlines()[1:])
    assert wide_rows == [["busy-a", "1/2", "2", "Progressing"], ["busy-b", "0/1", "0", "Waiting"]]
    errors = " ".join(wide.stderr.split())
    for name in ("busy-a", "busy-b"):
        assert f"modeldeployment.modelfleet.dev/{name} in namespace ml-brief did not answer" in (
            errors
        )
    assert "Traceback" not in wide.output


async def _start_cluster(client: Client, name: str, phase: str, created: datetime | None) -> None:
    """A cluster-kind workflow on a queue nobody polls, published as a cluster workflow does."""
    published: list[SearchAttributePair[Any]] = [
        SearchAttributePair(search.KIND, "InferenceCluster"),
        SearchAttributePair(search.NAME, name),
        SearchAttributePair(search.CLUSTERS, [name]),
        SearchAttributePair(search.PHASE, phase),
    ]
    if created is not None:
        published.append(SearchAttributePair(search.CREATED, created))
    await client.start_workflow(
        "InferenceCluster",
        id=cluster_id(name),
        task_queue=f"nobody-{uuid.uuid4().hex[:6]}",
        search_attributes=TypedSearchAttributes(published),
    )


async def test_get_clusters_when_the_fleet_does_not_answer(
    dev_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Fleet (and every cluster workflow) on a queue nobody polls: ``get clusters`` lists
    the running cluster workflows from visibility (NAME, the PHASE each published, AGE from
    its published creation time), the Fleet-only columns ``<unknown>``, one error line saying
    so, exit 1; no cluster workflow is asked. ``-o name`` prints the names, ``-o json`` leaves
    the rows out rather than invent a spec, ``describe`` shows what is published and exits 1."""
    address = dev_client.service_client.config.target_host
    monkeypatch.setattr(resources, "QUERY_TIMEOUT", resources.timedelta(seconds=1))
    asked: list[str] = []

    async def status(client: Client, name: str) -> Any:
        asked.append(name)
        raise AssertionError("a cluster workflow was asked")

    monkeypatch.setattr(clusters, "cluster_status", status)
    await dev_client.start_workflow(
        "FleetWorkflow", id=FLEET_ID, task_queue=f"nobody-{uuid.uuid4().hex[:6]}"
    )
    await _start_cluster(dev_client, "east", "Ready", CREATED)
    await _start_cluster(dev_client, "west", "Provisioning", None)

    def cli(*args: str) -> Any:
        return CliRunner().invoke(app, ["--address", address, *args], env={"COLUMNS": "200"})

    async with Worker(
        dev_client,
        task_queue=TASK_QUEUE,
        workflows=[Poller],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        table, rows = await _two_rows(_get(address), "clusters")
        wide = await asyncio.to_thread(cli, "get", "clusters", "-o", "wide")
        one = await asyncio.to_thread(cli, "get", "cluster", "west")
        names = await asyncio.to_thread(cli, "get", "clusters", "-o", "name")
        as_json = await asyncio.to_thread(cli, "get", "clusters", "-o", "json")
        described = await asyncio.to_thread(cli, "describe", "cluster", "east")

    assert table.exit_code == 1, table.output
    assert table.stdout.split()[:7] == ["NAME", "SOURCE", "PHASE", "STEP", "POOLS", "FREE", "AGE"]
    unknown = "<unknown>"
    assert [r[:6] for r in rows] == [
        ["east", unknown, "Ready", unknown, unknown, unknown],
        ["west", unknown, "Provisioning", unknown, unknown, unknown],
    ], table.stdout
    assert rows[0][6].endswith("d"), table.stdout  # AGE: days, from the published creation
    errors = " ".join(table.stderr.split())
    assert errors.count("Error from server (Unavailable)") == 1, table.stderr
    assert "the Fleet workflow did not answer: no worker answered a query" in errors
    assert "SOURCE, STEP, POOLS, FREE, GATEWAY, REASON are <unknown>" in errors
    assert "Traceback" not in table.output
    assert wide.exit_code == 1
    assert [line.split()[7:] for line in wide.stdout.splitlines()[1:]] == [[unknown] * 2] * 2
    assert (one.exit_code, one.stdout.splitlines()[1].split()[:3]) == (
        1,
        ["west", unknown, "Provisioning"],
    )
    assert (names.exit_code, names.stdout.split()) == (
        1,
        ["inferencecluster.modelfleet.dev/east", "inferencecluster.modelfleet.dev/west"],
    )
    assert as_json.exit_code == 1
    assert json.loads(as_json.stdout)["items"] == []  # nothing made up
    assert "the Fleet workflow did not answer" in " ".join(as_json.stderr.split())
    assert described.exit_code == 1, described.output
    assert "InferenceCluster east  Ready (as last published)" in described.stdout
    assert "Created: 2026-11-01T00:00:00Z" in described.stdout
    assert "the Fleet workflow did not answer" in " ".join(described.stderr.split())
    assert "Traceback" not in described.output
    assert asked == []


async def test_describe_and_rollout_status_of_a_deployment_whose_workflow_does_not_answer(
    dev_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deployments whose workflows never answer a query: ``describe`` prints what each
    published (phase, counts, clusters, creation, the workflow link), says the workflow did not
    answer and exits 1; ``rollout status`` follows what they publish: a Ready one ends 0 (its
    replicas not shown, and it says why), a paused one ends 1 with kubectl's words, one still
    Progressing is followed until ``--timeout`` instead of failing at its first query."""
    address = dev_client.service_client.config.target_host
    monkeypatch.setattr(resources, "QUERY_TIMEOUT", resources.timedelta(seconds=1))
    await _start(dev_client, "steady", "Ready", (2, 2, 2), ns="ml-r", clusters=["east"])
    await _start(dev_client, "held", "Paused", (1, 2, 1), ns="ml-r", clusters=["east"])
    await _start(dev_client, "busy", "Progressing", (1, 2, 2), ns="ml-r", clusters=["a", "b"])

    def cli(*args: str) -> Any:
        return CliRunner().invoke(
            app, ["--address", address, *args, "-n", "ml-r"], env={"COLUMNS": "200"}
        )

    async with Worker(
        dev_client,
        task_queue=TASK_QUEUE,
        workflows=[Poller],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        # Until the server sees the worker poll (and visibility lists the three).
        deadline = time.monotonic() + 60
        while True:
            listed = await asyncio.to_thread(cli, "get", "md")
            if len(listed.stdout.splitlines()) == 4 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        described = await asyncio.to_thread(cli, "describe", "md", "busy")
        steady = await asyncio.to_thread(cli, "rollout", "status", "md/steady", "--timeout", "30")
        held = await asyncio.to_thread(cli, "rollout", "status", "held", "--timeout", "30")
        busy = await asyncio.to_thread(cli, "rollout", "status", "busy", "--timeout", "3")

    assert described.exit_code == 1, described.output
    lines = described.stdout.splitlines()
    assert lines[0] == (
        "ModelDeployment ml-r/busy  phase Progressing, 1/2 ready, 2 up to date (as last published)"
    )
    assert lines[1].startswith("Workflow: http"), lines
    assert lines[1].endswith("/workflows/deployment%2Fml-r%2Fbusy"), lines
    assert lines[2:4] == ["Clusters: a, b", "Created: 2026-11-01T00:00:00Z"]
    errors = " ".join(described.stderr.split())
    assert "modeldeployment.modelfleet.dev/busy in namespace ml-r did not answer" in errors
    assert "Traceback" not in described.output

    assert steady.exit_code == 0, steady.output
    assert "ml-r/steady Ready: 2/2 ready, 2 up to date" in steady.stdout
    assert "did not answer: its replicas are not shown" in " ".join(steady.stdout.split())
    assert steady.stdout.rstrip().endswith("every replica is Ready (2/2)")
    assert held.exit_code == 1, held.output
    assert "rollout paused (1/2 ready): resume it with" in " ".join(held.stdout.split())
    assert busy.exit_code == 1, busy.output
    assert "ml-r/busy Progressing: 1/2 ready, 2 up to date" in busy.stdout
    assert busy.stdout.rstrip().endswith("gave up after 3s (--timeout)")
    assert "Traceback" not in steady.output + held.output + busy.output
