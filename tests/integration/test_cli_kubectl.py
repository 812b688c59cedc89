"""The ``modelfleet`` command as a kubectl user drives it, against the real dev server and the
simulated fleet: pipes keep whole names, ``get -o yaml | apply -f -`` round-trips for every
kind, apply says created/configured/unchanged, ``diff`` and ``apply --dry-run`` change nothing,
``rollout status`` is honest about 0 replicas and about what cannot be placed (Pending, with the
scheduler's reasons), rollout history, pause, resume and undo, bad scale signals are ignored
with a reason, and no worker is reported in seconds.

The CLI runs as a subprocess (stdout is a pipe, as in ``| cat``), asynchronously: the worker
answering its queries runs on this test's event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml
from integration_support import Stack, delete_deployment, deployment, wait_for
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError

from modelfleet.api.deployments import ModelDeployment
from modelfleet.cli.apply import apply_resource
from modelfleet.contracts.ids import deployment_id
from modelfleet.worker.devserver import start_dev_server

CLI = [sys.executable, "-m", "modelfleet.cli"]


async def run(
    address: str, *args: str, stdin: str | None = None, limit: float = 120
) -> tuple[int, str, str]:
    env = {
        **os.environ,
        "MODELFLEET_TEMPORAL_ADDRESS": address,
        "COLUMNS": "30",  # a narrow "terminal": a pipe must not care
        "MODELFLEET_NAMESPACE": "",
    }
    proc = await asyncio.create_subprocess_exec(
        *CLI,
        *args,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(
        proc.communicate(stdin.encode() if stdin is not None else None), limit
    )
    assert proc.returncode is not None
    text_err = err.decode()
    assert "Traceback" not in text_err, text_err
    return proc.returncode, out.decode(), text_err


@pytest_asyncio.fixture
async def doomed(stack: Stack) -> AsyncIterator[list[tuple[str, str]]]:
    """(namespace, name) of the test's deployments, deleted however the test ends: the stack
    and its GPUs are shared with every other integration test."""
    names: list[tuple[str, str]] = []
    yield names
    for namespace, name in names:
        handle = stack.client.get_workflow_handle(deployment_id(namespace, name))
        try:
            running = (await handle.describe()).status is WorkflowExecutionStatus.RUNNING
        except RPCError:
            running = False  # never created
        if running:
            await delete_deployment(stack, namespace, name)


def manifest_file(tmp_path: Path, md: ModelDeployment) -> str:
    path = tmp_path / f"{md.name}.yaml"
    path.write_text(yaml.safe_dump(md.to_wire(), sort_keys=False))
    return str(path)


async def test_pipes_keep_whole_names_and_get_yaml_round_trips_for_every_kind(
    stack: Stack, doomed: list[tuple[str, str]]
) -> None:
    address = stack.env.settings.address
    ns = "cli-pipe"
    md = deployment("a-deployment-with-a-rather-long-name-for-narrow-pipes", ns, replicas=2)
    doomed.append((ns, md.name))
    md.metadata.labels = {"team": "search"}
    await apply_resource(stack.client, md)
    await stack.wait_status(ns, md.name, lambda s: s.ready == 2)

    code, out, _ = await run(address, "get", "replicas", "-n", ns)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "DEPLOYMENT", "CLUSTER", "PHASE", "AGE"]
    replicas = [line.split()[0] for line in lines[1:]]
    assert len(replicas) == 2
    assert all(r.startswith(md.name + "-") for r in replicas), out

    for kind in ("classes", "clusters", "deployments"):
        code, listed, err = await run(address, "get", kind, "-A", "-o", "yaml")
        assert code == 0, err
        doc = yaml.safe_load(listed)
        assert doc["kind"] == "List"
        assert doc["items"], kind
        assert all("status" in item for item in doc["items"])
        # Every kind has an AGE (classes showed <unknown>: issue 23).
        assert all(item["metadata"].get("creationTimestamp") for item in doc["items"]), kind
        code, table, err = await run(address, "get", kind, "-A")
        assert code == 0, err
        assert "<unknown>" not in table, table
        code, applied, err = await run(address, "apply", "-f", "-", stdin=listed)
        assert code == 0, err
        verdicts = [line.split()[1] for line in applied.splitlines() if line]
        assert verdicts, applied
        assert set(verdicts) == {"unchanged"}, applied

    code, out, _ = await run(address, "get", f"md/{md.name}", "-n", ns, "-o", "json")
    one = json.loads(out)
    assert (one["kind"], one["status"]["ready"], one["status"]["desired"]) == (
        "ModelDeployment",
        2,
        2,
    )
    assert one["metadata"]["creationTimestamp"].endswith("Z")

    code, out, _ = await run(address, "get", "md", "-A", "-l", "team=search", "-o", "name")
    assert out.split() == [f"modeldeployment.modelfleet.dev/{md.name}"]
    code, out, err = await run(address, "get", "md", "-n", ns, "-l", "team in (ads)")
    assert (code, out) == (0, "")
    assert f"No resources found in {ns} namespace." in err

    code, out, err = await run(address, "get", "md", "nope", "-n", ns)
    assert code == 1
    assert "modeldeployment.modelfleet.dev/nope not found in namespace 'cli-pipe'" in err
    code, _, _ = await run(address, "get", "md", "nope", "-n", ns, "--ignore-not-found")
    assert code == 0


async def test_kubectl_habits_jsonpath_custom_columns_sort_labels_and_several_kinds(
    stack: Stack,
) -> None:
    """``get`` as a kubectl user types it, on the fleet's classes and clusters: short names,
    ``KIND,KIND``, ``-o jsonpath``, ``-o custom-columns``, ``--sort-by``, ``--no-headers``,
    ``--show-labels``."""
    from modelfleet.cli.get import _natural

    address = stack.env.settings.address
    code, out, err = await run(address, "get", "classes", "-o", "json")
    assert code == 0, err
    names = [i["metadata"]["name"] for i in json.loads(out)["items"]]
    assert len(names) > 1

    code, out, err = await run(
        address, "get", "icl", "--sort-by", ".metadata.name", "-o",
        "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}",
    )  # fmt: skip
    assert code == 0, err
    assert out.splitlines() == sorted(names, key=_natural)

    code, out, err = await run(
        address, "get", "classes,clusters", "--no-headers", "-o",
        "custom-columns=KIND:.kind,NAME:.metadata.name,NOPE:.spec.nothing",
    )  # fmt: skip
    assert code == 0, err
    rows = [line.split() for line in out.splitlines()]
    assert {r[0] for r in rows} == {"InferenceClass", "InferenceCluster"}
    assert {r[1] for r in rows if r[0] == "InferenceClass"} == set(names)
    assert {r[2] for r in rows} == {"<none>"}

    code, out, err = await run(address, "get", "classes,clusters")
    assert code == 0, err
    tables = out.split("\n\n")
    assert len(tables) == 2
    assert all(
        line.split()[0].startswith("inferenceclass.modelfleet.dev/")
        for line in tables[0].splitlines()[1:]
    )

    code, out, err = await run(address, "get", "classes", "--show-labels")
    assert code == 0, err
    assert out.splitlines()[0].split()[-1] == "LABELS"

    code, _, err = await run(address, "get", "deploy", "-A")
    assert code == 0, err


async def test_apply_verdicts_diff_and_dry_run_and_rollout_history_undo(
    stack: Stack, tmp_path: Path, doomed: list[tuple[str, str]]
) -> None:
    address = stack.env.settings.address
    ns = "cli-diff"
    doomed.append((ns, "dd"))
    v1 = deployment("dd", ns, replicas=1)
    first = manifest_file(tmp_path, v1)

    code, out, _ = await run(address, "diff", "-f", first)
    assert code == 1
    assert "+  name: dd" in out
    code, out, _ = await run(address, "apply", "--dry-run", "-f", first)
    assert code == 0
    assert "modeldeployment.modelfleet.dev/dd created (dry run)" in out
    assert "1/1 replicas scheduled" in out
    code, _, err = await run(address, "get", "md", "dd", "-n", ns)
    assert code == 1, "a dry run must not create anything"

    code, out, _ = await run(address, "apply", "-f", first)
    assert "modeldeployment.modelfleet.dev/dd created" in out
    await stack.wait_status(ns, "dd", lambda s: s.phase == "Ready")
    code, out, _ = await run(address, "apply", "-f", first)
    assert "modeldeployment.modelfleet.dev/dd unchanged" in out
    code, out, _ = await run(address, "diff", "-f", first)
    assert (code, out) == (0, "")

    v2 = deployment("dd", ns, replicas=1, image="vllm/vllm-openai:v0.24.0")
    (tmp_path / "v2").mkdir()
    second = manifest_file(tmp_path / "v2", v2)
    before = await stack.status(ns, "dd")
    code, out, _ = await run(address, "diff", "-f", second)
    assert code == 1
    assert "-                image: vllm/vllm-openai:v0.23.0" in out
    assert "+                image: vllm/vllm-openai:v0.24.0" in out
    assert f"would roll 1 replica(s) one at a time (surge 1): {before.replicas[0].name}" in out
    code, out, _ = await run(address, "apply", "--dry-run", "-f", second)
    assert "configured (dry run)" in out
    assert (await stack.status(ns, "dd")).generation == before.generation

    code, out, _ = await run(address, "apply", "-f", second)
    assert "modeldeployment.modelfleet.dev/dd configured" in out
    code, out, err = await run(address, "rollout", "status", "dd", "-n", ns, "--timeout", "90")
    assert code == 0, out + err
    assert "every replica is Ready (1/1)" in out

    code, out, _ = await run(address, "rollout", "history", "deployment/dd", "-n", ns)
    rows = [line.split() for line in out.splitlines()[2:]]
    assert [(r[0], r[3]) for r in rows] == [("1", "created"), ("2", "apply")]

    # Paused: get says so, undo is refused (as kubectl does) until resumed.
    code, out, _ = await run(address, "rollout", "pause", "deployment/dd", "-n", ns)
    assert (code, out.strip()) == (0, "modeldeployment.modelfleet.dev/dd paused")
    code, out, _ = await run(address, "get", "md", "dd", "-n", ns)
    assert out.splitlines()[1].split()[3] == "Paused"
    code, _, err = await run(address, "rollout", "undo", "dd", "-n", ns)
    assert code == 1
    assert "resume it first" in err
    code, out, _ = await run(address, "rollout", "resume", "dd", "-n", ns)
    assert (code, out.strip()) == (0, "modeldeployment.modelfleet.dev/dd resumed")

    code, out, _ = await run(address, "rollout", "undo", "dd", "-n", ns)
    assert code == 0
    assert "modeldeployment.modelfleet.dev/dd rolled back to revision 1" in out
    spec = await stack.client.get_workflow_handle(deployment_id(ns, "dd")).query("spec")
    image = spec["spec"]["template"]["spec"]["engines"][0]["members"][0]["template"]["spec"][
        "containers"
    ][0]["image"]
    assert image == "vllm/vllm-openai:v0.23.0"
    # The records say what happened: an undo names its revision, a restart is a restart.
    code, out, _ = await run(address, "rollout", "restart", "dd", "-n", ns)
    assert code == 0
    code, out, _ = await run(address, "rollout", "history", "deployment/dd", "-n", ns)
    causes = [line.split(maxsplit=3)[3].rsplit(maxsplit=2)[0] for line in out.splitlines()[2:]]
    assert causes == ["created", "apply", "undo (to revision 1)", "restart"]

    code, out, _ = await run(address, "delete", "-f", first)
    assert "modeldeployment.modelfleet.dev/dd deleted" in out
    code, _, err = await run(address, "delete", "-f", first)
    assert code == 1
    assert "not found" in err
    code, _, _ = await run(address, "delete", "-f", first, "--ignore-not-found")
    assert code == 0


async def test_rollout_status_is_honest_about_zero_replicas_and_what_cannot_be_placed(
    stack: Stack, doomed: list[tuple[str, str]]
) -> None:
    address = stack.env.settings.address
    ns = "cli-honest"
    doomed.extend([(ns, "zero"), (ns, "huge")])
    await apply_resource(stack.client, deployment("zero", ns, replicas=0))
    code, out, _ = await run(address, "rollout", "status", "zero", "-n", ns, "--timeout", "60")
    assert code == 0
    assert "scaled to 0 replicas" in out

    await apply_resource(stack.client, deployment("huge", ns, memory="5000Gi"))
    code, out, _ = await run(address, "rollout", "status", "md/huge", "-n", ns, "--timeout", "90")
    assert code == 1
    assert "cannot place the deployment (0 of 1 replicas placed)" in out
    assert "no pool satisfies device 'gpu'" in out
    assert "h100-east:" in out
    code, out, _ = await run(address, "get", "md", "huge", "-n", ns, "-o", "wide")
    row = out.splitlines()[1]
    assert row.split()[3] == "Pending"
    assert "no pool satisfies device 'gpu'" in row

    code, _, err = await run(address, "rollout", "status", "huge")
    assert code == 1
    assert "not found in namespace 'default' (the default namespace" in err


async def test_a_bad_scale_signal_is_ignored_with_its_reason(
    stack: Stack, caplog: pytest.LogCaptureFixture, doomed: list[tuple[str, str]]
) -> None:
    ns = "cli-signal"
    doomed.append((ns, "sig"))
    await apply_resource(stack.client, deployment("sig", ns, replicas=1))
    handle = stack.client.get_workflow_handle(deployment_id(ns, "sig"))
    with caplog.at_level(logging.WARNING):
        await handle.signal("scale", "three")
        await handle.signal("scale", {"replicas": 2})
        await stack.wait_status(ns, "sig", lambda s: s.desired == 2)
    ignored = [r for r in caplog.records if "ignored scale signal" in r.getMessage()]
    assert len(ignored) == 1
    assert "expected an integer replica count, got str 'three'" in ignored[0].getMessage()
    assert ignored[0].exc_info is None


async def test_without_a_worker_commands_say_so_within_seconds(
    tmp_path: Path, stack: Stack
) -> None:
    server = await start_dev_server(tmp_path / "temporal", ui=False)
    try:
        md = manifest_file(tmp_path, deployment("w", "cli-no-worker"))
        for args in (
            ("get", "deployments"),
            ("apply", "-f", md),
            ("rollout", "status", "w"),
            ("describe", "cluster", "x"),
        ):
            started = time.monotonic()
            code, _, err = await run(server.address, *args, limit=60)
            assert code == 1, err
            assert "no modelfleet worker is polling" in err
            assert "modelfleet worker" in err
            assert time.monotonic() - started < 30
    finally:
        server.stop()


async def test_get_watch_prints_a_row_when_a_deployment_changes(
    stack: Stack, doomed: list[tuple[str, str]]
) -> None:
    ns = "cli-watch"
    doomed.append((ns, "w"))
    await apply_resource(stack.client, deployment("w", ns, replicas=1))
    await stack.wait_status(ns, "w", lambda s: s.phase == "Ready")
    env = {**os.environ, "MODELFLEET_TEMPORAL_ADDRESS": stack.env.settings.address}
    proc = await asyncio.create_subprocess_exec(
        *CLI,
        *("get", "md", "w", "-n", ns, "--watch", "--watch-seconds", "30"),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    header = await asyncio.wait_for(proc.stdout.readline(), 60)
    first = await asyncio.wait_for(proc.stdout.readline(), 60)
    assert header.decode().split()[:2] == ["NAME", "READY"]
    assert first.decode().split()[:2] == ["w", "1/1"]
    handle = stack.client.get_workflow_handle(deployment_id(ns, "w"))
    await handle.execute_update("scale", {"replicas": 2})
    changed = await asyncio.wait_for(proc.stdout.readline(), 60)
    assert changed.decode().split()[:2] in (["w", "1/2"], ["w", "2/2"])
    proc.kill()
    await proc.wait()


SERVING = """\
apiVersion: modelfleet.dev/v1alpha1
kind: InferenceGateway
metadata:
  name: default
spec:
  cluster: l4-dev
---
apiVersion: modelfleet.dev/v1alpha1
kind: ModelEndpoint
metadata:
  name: ext
  namespace: cli-serve
  labels:
    model: elsewhere
spec:
  url: http://127.0.0.1:9/v1
---
apiVersion: modelfleet.dev/v1alpha1
kind: ModelService
metadata:
  name: sv-svc
  namespace: cli-serve
spec:
  endpoints:
    - selector:
        matchLabels:
          modelfleet.dev/deployment: sv
---
apiVersion: modelfleet.dev/v1alpha1
kind: ModelAutoscaler
metadata:
  name: sv-as
  namespace: cli-serve
spec:
  scaleTargetRef:
    name: sv
  minReplicas: 1
  maxReplicas: 2
  metrics:
    - type: Engine
      engine:
        name: vllm:num_requests_waiting
        target:
          averageValue: 4
"""


async def test_serving_kinds_and_autoscalers_apply_get_round_trip_describe_and_delete(
    stack: Stack, tmp_path: Path, doomed: list[tuple[str, str]]
) -> None:
    address = stack.env.settings.address
    ns = "cli-serve"
    doomed.append((ns, "sv"))
    await apply_resource(stack.client, deployment("sv", ns, replicas=1))
    path = tmp_path / "serving.yaml"
    path.write_text(SERVING)
    refs = {
        "service": "modelservice.modelfleet.dev/sv-svc",
        "endpoint": "modelendpoint.modelfleet.dev/ext",
        "autoscaler": "modelautoscaler.modelfleet.dev/sv-as",
    }
    try:
        code, out, err = await run(address, "apply", "--dry-run", "-f", str(path))
        assert code == 0, err
        for ref in refs.values():
            assert f"{ref} created (dry run)" in out
        assert "would keep ModelDeployment cli-serve/sv between 1 and 2 replicas" in out
        code, out, _ = await run(address, "get", "autoscalers", "-n", ns)
        assert (code, out) == (0, ""), "a dry run must not create anything"

        code, out, err = await run(address, "apply", "-f", str(path))
        assert code == 0, err
        for ref in refs.values():
            assert f"{ref} created" in out
        code, out, err = await run(address, "apply", "-f", str(path))
        assert code == 0, err
        verdicts = {line.split()[0]: line.split()[1] for line in out.splitlines() if line}
        assert set(verdicts.values()) == {"unchanged"}, out

        await stack.wait_status(ns, "sv", lambda s: s.phase == "Ready")

        async def published() -> list[str] | None:
            code, out, _ = await run(address, "get", "endpoints", "-n", ns, "-o", "name")
            names = out.split()
            return names if code == 0 and len(names) == 2 else None

        await wait_for(published, 90, "the replica's endpoint in the directory")

        for kind in ("services", "endpoints", "gateways", "autoscalers"):
            code, listed, err = await run(address, "get", kind, "-n", ns, "-o", "yaml")
            assert code == 0, err
            doc = yaml.safe_load(listed)
            assert doc["kind"] == "List"
            assert doc["items"], kind
            assert all("status" in item for item in doc["items"])
            code, applied, err = await run(address, "apply", "-f", "-", stdin=listed)
            assert code == 0, err
            for line in applied.splitlines():
                if line.startswith("skipped"):  # the replica's own endpoint: read-only
                    assert "published by modelreplica/sv-" in line, line
                else:
                    assert line.split()[1] == "unchanged", applied

        code, out, err = await run(address, "get", "autoscalers", "-n", ns)
        assert code == 0, err
        header, row = (line.split() for line in out.splitlines())
        assert header == ["NAME", "TARGET", "MIN", "MAX", "METRICS", "REPLICAS", "DESIRED", "AGE"]
        assert row[:5] == ["sv-as", "ModelDeployment/sv", "1", "2", "vllm:num_requests_waiting"]
        assert row[5].endswith("/4")  # current (or ? before the first read) against the target

        code, out, err = await run(address, "get", "endpoints", "ext", "-n", ns, "-o", "wide")
        assert code == 0, err
        assert out.splitlines()[1].split()[:3] == ["ext", "external", "http://127.0.0.1:9/v1"]
        code, out, err = await run(address, "describe", "service/sv-svc", "-n", ns)
        assert code == 0, err
        assert "ModelService cli-serve/sv-svc" in out
        assert "Route backends" in out
        code, out, err = await run(address, "describe", "autoscaler", "sv-as", "-n", ns)
        assert code == 0, err
        assert "ModelAutoscaler cli-serve/sv-as -> ModelDeployment sv" in out
        assert "(min 1, max 2)" in out

        code, out, err = await run(address, "delete", "-f", str(path))
        assert code == 0, err
        for ref in refs.values():
            assert f"{ref} deleted" in out
        assert "skipped inferencegateway.modelfleet.dev/default" in out
        code, _, err = await run(address, "delete", "-f", str(path))
        assert code == 1
        assert "modelautoscaler.modelfleet.dev/sv-as not found in namespace 'cli-serve'" in err
        code, _, _ = await run(address, "delete", "-f", str(path), "--ignore-not-found")
        assert code == 0
    finally:
        await run(address, "delete", "-f", str(path), "--ignore-not-found")


GATEWAY = Path(__file__).resolve().parents[1] / "corpus/modelplane/valid/gateway.yaml"
CACHES = """\
apiVersion: modelplane.ai/v1alpha1
kind: ModelCache
metadata: {name: weights-a, namespace: cli-acc, labels: {tier: gold}}
spec:
  source: HuggingFace
  huggingFace: {repo: Qwen/Qwen3-8B, sizeGiB: 1}
---
apiVersion: modelplane.ai/v1alpha1
kind: ModelCache
metadata: {name: weights-b, namespace: cli-acc}
spec:
  source: HuggingFace
  huggingFace: {repo: Qwen/Qwen3-32B, sizeGiB: 2}
"""


async def test_model_caches_apply_get_round_trip_and_delete_and_a_traefik_gateway_is_held(
    stack: Stack, tmp_path: Path
) -> None:
    """ModelCaches go through apply, get, describe and delete like every kind (staged by their
    workflows, shown per cluster); Modelplane's Traefik gateway is held with the reason it is
    not acted upon in apply's note and get's table."""
    address = stack.env.settings.address
    ns = "cli-acc"
    path = tmp_path / "caches.yaml"
    path.write_text(CACHES)
    gateway = GATEWAY
    refs = ["modelcache.modelfleet.dev/weights-a", "modelcache.modelfleet.dev/weights-b"]
    try:
        code, out, err = await run(address, "apply", "--dry-run", "-f", str(path))
        assert code == 0, err
        for ref in refs:
            assert f"{ref} created (dry run)" in out
        assert "NotActedUpon" not in out
        code, out, _ = await run(address, "get", "caches", "-n", ns)
        assert (code, out) == (0, ""), "a dry run must not create anything"

        code, out, err = await run(address, "apply", "-f", str(path))
        assert code == 0, err
        for ref in refs:
            assert f"{ref} created" in out
        assert "note:" not in out
        code, out, err = await run(address, "apply", "-f", str(path))
        assert code == 0, err
        assert f"{refs[0]} unchanged" in out
        assert f"{refs[1]} unchanged" in out

        code, out, err = await run(address, "get", "caches", "-n", ns)
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0].split() == ["NAME", "SOURCE", "READY", "PHASE", "CLUSTERS", "AGE"]
        assert [line.split()[:2] for line in lines[1:]] == [
            ["weights-a", "HuggingFace:Qwen/Qwen3-8B"],
            ["weights-b", "HuggingFace:Qwen/Qwen3-32B"],
        ]
        code, out, err = await run(address, "describe", "cache/weights-a", "-n", ns)
        assert code == 0, err
        assert "ModelCache cli-acc/weights-a" in out
        assert "Source: Qwen/Qwen3-8B at main, 1 GiB" in out
        code, out, err = await run(address, "get", "caches", "-A", "-l", "tier=gold")
        assert code == 0, err
        assert [line.split()[:2] for line in out.splitlines()[1:]] == [[ns, "weights-a"]]
        code, out, err = await run(address, "get", "modelcache/weights-b", "-n", ns, "-o", "name")
        assert (code, out) == (0, f"{refs[1]}\n"), err

        code, listed, err = await run(address, "get", "caches", "-n", ns, "-o", "json")
        assert code == 0, err
        doc = json.loads(listed)
        assert doc["items"][1]["spec"]["huggingFace"]["sizeGiB"] == 2
        assert all("clusters" in i["status"] for i in doc["items"])
        doc["items"][1]["spec"]["huggingFace"]["sizeGiB"] = 3
        code, out, err = await run(address, "apply", "-f", "-", stdin=json.dumps(doc))
        assert code == 0, err
        assert f"{refs[0]} unchanged" in out
        assert f"{refs[1]} configured" in out

        code, out, err = await run(address, "apply", "-f", str(gateway))
        assert code == 0, err
        assert "inferencegateway.modelfleet.dev/default created" in out
        assert "note: NotActedUpon: this is Modelplane's control-plane Traefik gateway" in out
        code, out, err = await run(address, "get", "gateways")
        assert code == 0, err
        assert ["default", "-", "-", "NotActedUpon"] in [
            line.split()[:4] for line in out.splitlines()
        ]
        code, out, err = await run(address, "delete", "gateway", "default")
        assert code == 0, err
        assert "inferencegateway.modelfleet.dev/default deleted" in out
        code, _, err = await run(address, "delete", "gateway", "default")
        assert code == 2  # the front door itself is never deleted by name
        assert "apply another InferenceGateway" in err

        code, out, err = await run(address, "delete", "cache", "weights-a", "-n", ns)
        assert code == 0, err
        assert f"{refs[0]} deleted" in out
        code, _, err = await run(address, "delete", "-f", str(path))
        assert code == 1
        assert f"{refs[0]} not found in namespace 'cli-acc'" in err
        code, out, err = await run(address, "get", "caches", "-n", ns)
        assert (code, out) == (0, ""), out
        code, _, _ = await run(address, "delete", "-f", str(path), "--ignore-not-found")
        assert code == 0
    finally:
        await run(address, "delete", "-f", str(path), "--ignore-not-found")
        await run(address, "delete", "-f", str(gateway), "--ignore-not-found")
