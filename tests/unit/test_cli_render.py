"""``modelfleet render``: manifests for every placed replica, ready for kubectl."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from modelfleet.cli.main import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()


@pytest.mark.parametrize("extra", ["quickstart", "frontier"])
def test_render_every_example_gives_namespaced_manifests(extra: str) -> None:
    result = runner.invoke(
        app, ["render", "-f", str(EXAMPLES / "quickstart"), "-f", str(EXAMPLES / extra)]
    )
    assert result.exit_code == 0, result.output
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert docs
    kinds = {d["kind"] for d in docs}
    assert {"Namespace", "Deployment", "InferencePool", "HTTPRoute"} <= kinds
    for d in docs:
        if d["kind"] != "Namespace":
            assert d["metadata"]["namespace"].startswith("mf-")


def test_render_frontier_includes_gang_and_prefill_decode() -> None:
    result = runner.invoke(
        app,
        [
            "render",
            "-f",
            str(EXAMPLES / "quickstart"),
            "-f",
            str(EXAMPLES / "frontier"),
            "-o",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    items = json.loads(result.stdout)["items"]
    lws = [i for i in items if i["kind"] == "LeaderWorkerSet"]
    assert [w["spec"]["leaderWorkerTemplate"]["size"] for w in lws] == [2]
    roles = {
        i["spec"]["template"]["metadata"]["labels"].get("llm-d.ai/role")
        for i in items
        if i["kind"] == "Deployment"
    }
    assert {"prefill", "decode"} <= roles


def test_render_one_replica_and_unknown_replica() -> None:
    plan = runner.invoke(app, ["plan", "-f", str(EXAMPLES / "quickstart"), "-o", "json"])
    name = json.loads(plan.stdout)["deployments"][0]["replicas"][0]["name"]
    one = runner.invoke(app, ["render", "-f", str(EXAMPLES / "quickstart"), "--replica", name])
    assert one.exit_code == 0
    labels = {
        d["metadata"]["labels"].get("modelfleet.dev/replica")
        for d in yaml.safe_load_all(one.stdout)
        if d and d["kind"] != "Namespace"
    }
    assert labels == {name}
    missing = runner.invoke(app, ["render", "-f", str(EXAMPLES / "quickstart"), "--replica", "x"])
    assert missing.exit_code == 2
    assert "no placed replica" in missing.stderr
