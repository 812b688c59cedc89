"""The generated CRDs against the real kubectl and the simulated API server: `modelfleet crds`
piped to `kubectl apply`, the quickstart manifests applied as custom objects, printer columns
in `kubectl get`, admission refusing what the schema and the CEL rules refuse (with
`modelfleet validate`'s words), and `kubectl scale` through the scale subresource.

The cluster runs on its own loop in a thread; every kubectl call is a subprocess with its own
timeout. Without kubectl the suite fails (never skips).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubectl_support import CLUSTER, QUICKSTART, Kubectl, kubectl_binary, quickstart_fleet
from typer.testing import CliRunner

from modelfleet.cli.main import app
from modelfleet.sim.loop_thread import LoopThread
from modelfleet.sim.simulated_fleet import SimulatedFleet


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopThread[SimulatedFleet]]:
    with quickstart_fleet(tmp_path_factory.mktemp("crd-fleet")) as running:
        yield running


@pytest.fixture(scope="module")
def kubectl(fleet: LoopThread[SimulatedFleet], tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    k = Kubectl(kubectl_binary(), fleet.target.kubeconfig(CLUSTER), tmp_path_factory.mktemp("home"))
    printed = CliRunner().invoke(app, ["crds"])
    assert printed.exit_code == 0, printed.output
    k.out("apply", "-f", "-", stdin=printed.output)
    k.out(
        "wait",
        "--for=condition=Established",
        "--timeout=30s",
        "crd/modeldeployments.modelfleet.dev",
    )
    return k


def _deployment(name: str, **spec: Any) -> str:
    doc = yaml.safe_load((QUICKSTART / "qwen3-8b.yaml").read_text().split("\n---")[0])
    assert doc["kind"] == "ModelDeployment"
    doc["metadata"] = {"name": name}
    doc["spec"].update(spec)
    return yaml.safe_dump(doc)


def test_quickstart_applies_and_get_shows_the_printer_columns(kubectl: Kubectl) -> None:
    kubectl.out("create", "namespace", "ml-team")  # the quickstart's team namespace
    out = kubectl.out("apply", "-f", str(QUICKSTART))
    assert "modeldeployment.modelfleet.dev/qwen3-8b created" in out
    assert "inferenceclass.modelfleet.dev/l4 created" in out
    table = kubectl.out("get", "modeldeployments", "-n", "ml-team")
    header, row = (line.split() for line in table.strip().splitlines())
    assert header == ["NAME", "DESIRED", "READY", "UP-TO-DATE", "PHASE", "AGE"]
    # spec.replicas, then the status columns, empty until the controller writes status (as
    # kubectl prints a missing value), then an age such as 3s.
    assert row[:2] == ["qwen3-8b", "2"]
    assert len(row) == 3, row
    assert re.fullmatch(r"\d+s", row[2]), row
    wide = kubectl.out("get", "md", "-n", "ml-team", "-o", "wide").splitlines()[0].split()
    assert wide[-3:] == ["AGE", "REPLICAS", "MESSAGE"]
    # Cluster-scoped kinds, by their short name; every kind, by the category.
    assert "l4-dev" in kubectl.out("get", "ic")
    everything = kubectl.out("get", "modelfleet", "-n", "ml-team")
    assert "modeldeployment.modelfleet.dev/qwen3-8b" in everything
    assert "modelservice.modelfleet.dev/qwen" in everything


def test_defaults_are_applied_and_unknown_fields_refused(kubectl: Kubectl) -> None:
    kubectl.out("apply", "-f", "-", stdin=_deployment("defaulted", replicas=2, strategy={}))
    stored = json.loads(kubectl.out("get", "md", "defaulted", "-o", "json"))
    # The models' defaults, filled where their object is present (as pydantic reads them).
    assert stored["spec"]["strategy"] == {
        "maxSurge": 1,
        "progressDeadlineSeconds": 1800,
        "minReadySeconds": 30,
        "rollbackWindowSeconds": 600,
        "maxErrorPercent": 5,
        "crashLoopRestarts": 2,
        "borrow": "None",
    }
    engine = stored["spec"]["template"]["spec"]["engines"][0]
    assert engine["copies"] == 1
    assert engine["members"][0]["role"] == "Standalone"
    err = kubectl.refused("apply", "-f", "-", stdin=_deployment("typo", replicas=1, replica=2))
    assert 'unknown field "spec.replica"' in err


def test_schema_and_cel_violations_are_refused_with_their_messages(kubectl: Kubectl) -> None:
    err = kubectl.refused("apply", "-f", "-", stdin=_deployment("negative", replicas=-1))
    assert (
        "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or "
        "equal to 0" in err
    )
    both_zero = _deployment("stuck", replicas=1, strategy={"maxSurge": 0, "maxUnavailable": 0})
    err = kubectl.refused("apply", "-f", "-", stdin=both_zero)
    assert (
        'spec.strategy: Invalid value: "object": maxSurge and maxUnavailable must not both be '
        "0 (a rollout could never progress)" in err
    )
    assert kubectl.run("get", "md", "negative", check=False).returncode != 0
    assert kubectl.run("get", "md", "stuck", check=False).returncode != 0


def test_scale_goes_through_the_subresource(kubectl: Kubectl) -> None:
    kubectl.out("apply", "-f", "-", stdin=_deployment("scaled", replicas=1))
    before = json.loads(kubectl.out("get", "md", "scaled", "-o", "json"))["metadata"]
    assert "scaled" in kubectl.out("scale", "modeldeployment/scaled", "--replicas", "3")
    after = json.loads(kubectl.out("get", "md", "scaled", "-o", "json"))
    assert after["spec"]["replicas"] == 3
    assert after["metadata"]["generation"] == before["generation"] + 1
    err = kubectl.refused("scale", "modeldeployment/scaled", "--replicas", "11")
    assert "spec.replicas in body should be less than or equal to 10" in err


def test_status_subresource_and_generation(kubectl: Kubectl) -> None:
    kubectl.out("apply", "-f", "-", stdin=_deployment("observed", replicas=2))
    gen = json.loads(kubectl.out("get", "md", "observed", "-o", "json"))["metadata"]["generation"]
    status = {
        "replicas": 2,
        "readyReplicas": 1,
        "updatedReplicas": 2,
        "phase": "Progressing",
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "Placing", "message": "1/2 ready"}
        ],
    }
    # A write to /status changes status only (the spec in it is ignored)...
    kubectl.out(
        "patch", "md", "observed", "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status, "spec": {"replicas": 7}}),
    )  # fmt: skip
    # ...and a write to the resource changes all but status.
    kubectl.out(
        "patch", "md", "observed", "--type=merge",
        "-p", json.dumps({"status": {"readyReplicas": 0}, "metadata": {"labels": {"a": "b"}}}),
    )  # fmt: skip
    got = json.loads(kubectl.out("get", "md", "observed", "-o", "json"))
    assert got["spec"]["replicas"] == 2
    assert got["status"]["readyReplicas"] == 1
    assert got["metadata"]["labels"] == {"a": "b"}
    assert got["metadata"]["generation"] == gen  # neither write changed the spec
    row = kubectl.out("get", "md", "observed", "-o", "wide").splitlines()[1].split()
    assert row[:5] == ["observed", "2", "1", "2", "Progressing"]
    assert row[-3:] == ["2", "1/2", "ready"]  # REPLICAS, then the Ready condition's message
    # Status is validated against its schema too.
    err = kubectl.refused(
        "patch", "md", "observed", "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"readyReplicas": -1}}),
    )  # fmt: skip
    assert "status.readyReplicas in body should be greater than or equal to 0" in err
    twice = {"conditions": [{"type": "Ready", "status": "True"}] * 2}
    err = kubectl.refused(
        "patch", "md", "observed", "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": twice}),
    )  # fmt: skip
    assert 'status.conditions[1]: Duplicate value: map[string]interface {}{"type":"Ready"}' in err
