"""Inspection and golden-file helpers shared by the rendering tests."""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

import yaml

from modelfleet.api.deployments import ModelReplica
from modelfleet.rendering.facts import ClusterFacts
from modelfleet.rendering.replica_manifests import RenderedReplica, Step, render_replica

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden" / "render"
SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schemas"
UPDATE_ENV = "MODELFLEET_UPDATE_GOLDEN"

Manifest = dict[str, Any]


def render(replica: ModelReplica, facts: ClusterFacts | None = None) -> RenderedReplica:
    return render_replica(replica, facts or ClusterFacts())


def of_kind(rendered: RenderedReplica, kind: str) -> list[Manifest]:
    return [m for m in rendered.manifests() if m["kind"] == kind]


def one(rendered: RenderedReplica, kind: str) -> Manifest:
    found = of_kind(rendered, kind)
    assert len(found) == 1, f"expected one {kind}, got {[m['metadata']['name'] for m in found]}"
    return found[0]


def workloads(rendered: RenderedReplica) -> list[Manifest]:
    return rendered.step(Step.WORKLOADS).manifests


def workload(rendered: RenderedReplica, engine: str) -> Manifest:
    """The workload of ``engine`` (its name starts with ``<replica>-<engine>-``)."""
    prefix = f"{rendered.replica}-{engine}-"
    found = [w for w in workloads(rendered) if w["metadata"]["name"].startswith(prefix)]
    assert len(found) == 1, [w["metadata"]["name"] for w in workloads(rendered)]
    return found[0]


def pod_templates(manifest: Manifest) -> dict[str, Manifest]:
    """``{"pod": ...}`` for a Deployment, ``{"leader": ..., "worker": ...}`` for an LWS."""
    if manifest["kind"] == "LeaderWorkerSet":
        lwt = manifest["spec"]["leaderWorkerTemplate"]
        return {"leader": lwt["leaderTemplate"], "worker": lwt["workerTemplate"]}
    return {"pod": manifest["spec"]["template"]}


def serving_template(manifest: Manifest) -> Manifest:
    templates = pod_templates(manifest)
    return templates.get("leader") or templates["pod"]


def engine_container(template: Manifest) -> Manifest:
    containers: list[Manifest] = template["spec"]["containers"]
    assert [c["name"] for c in containers] == ["engine"]
    return containers[0]


def env_names(container: Manifest) -> list[str]:
    return [var["name"] for var in container.get("env", [])]


def labels(template: Manifest) -> dict[str, str]:
    return dict(template.get("metadata", {}).get("labels", {}))


def epp_config(rendered: RenderedReplica) -> Manifest:
    text = one(rendered, "ConfigMap")["data"]["epp-config.yaml"]
    loaded: Manifest = yaml.safe_load(text)
    return loaded


# --- golden files -----------------------------------------------------------------------------


class _GoldenDumper(yaml.SafeDumper):
    """Readable, stable YAML: no anchors, multi-line strings (the EPP config) as blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_GoldenDumper.add_representer(str, _str)


def to_yaml(rendered: RenderedReplica) -> str:
    """Every manifest in apply order, each preceded by a comment naming its step."""
    parts = []
    for step in rendered.steps:
        for manifest in step.manifests:
            body = yaml.dump(manifest, Dumper=_GoldenDumper, sort_keys=False, width=100)
            parts.append(f"# step: {step.step.value}\n{body}")
    return "---\n".join(parts)


def assert_golden(name: str, text: str) -> None:
    """Compare ``text`` with ``tests/golden/render/<name>.yaml``; rewrite the file instead when
    MODELFLEET_UPDATE_GOLDEN=1."""
    path = GOLDEN_DIR / f"{name}.yaml"
    if os.environ.get(UPDATE_ENV) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"no golden file {path}; create it with {UPDATE_ENV}=1"
    expected = path.read_text()
    if text != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                text.splitlines(keepends=True),
                fromfile=str(path),
                tofile="rendered",
            )
        )
        raise AssertionError(
            f"rendering differs from {path.name} ({UPDATE_ENV}=1 updates):\n{diff}"
        )
