"""The serving stack's pieces on their own: fetching pinned manifests from a directory or over
HTTP (CRDs first, clear errors), and the reason that names what is missing."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from modelfleet.adapters.stack_source import StackSourceError, fetch_manifests
from modelfleet.cluster.stack import stack_reason
from modelfleet.contracts.stack_payloads import DEFAULT_STACK, StackReport
from modelfleet.sim.apiserver.server import serve_in_thread

DOCS = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lws-system"}},
    {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition"},
]


@pytest.fixture
def release(tmp_path: Path) -> Path:
    target = tmp_path / "lws" / "v0.7.0" / "manifests.yaml"
    target.parent.mkdir(parents=True)
    target.write_text(yaml.safe_dump_all(DOCS))
    return tmp_path


def test_a_local_directory_serves_the_manifests_crds_first(release: Path) -> None:
    docs = fetch_manifests(str(release), "lws/v0.7.0/manifests.yaml")
    assert [d["kind"] for d in docs] == ["CustomResourceDefinition", "Namespace"]


def test_a_missing_file_or_bad_yaml_is_a_permanent_error_naming_it(release: Path) -> None:
    with pytest.raises(StackSourceError) as caught:
        fetch_manifests(str(release), "lws/v9/manifests.yaml")
    assert "lws/v9/manifests.yaml: no such file" in str(caught.value)
    assert not caught.value.retryable
    (release / "bad.yaml").write_text("a: [unclosed")
    with pytest.raises(StackSourceError) as caught:
        fetch_manifests(str(release), "bad.yaml")
    assert "bad.yaml: not YAML" in str(caught.value)


@pytest.fixture
def unreachable() -> str:
    # A server that has just stopped: its port refuses connections.
    with serve_in_thread() as server:
        url = server.target.base_url
    return url


def test_http_404_is_permanent_and_a_refused_connection_retryable(unreachable: str) -> None:
    with serve_in_thread() as server:
        with pytest.raises(StackSourceError) as caught:
            fetch_manifests(server.target.base_url + "/releases", "lws/v0.7.0/manifests.yaml")
        assert "HTTP 404" in str(caught.value)
        assert not caught.value.retryable
    with pytest.raises(StackSourceError) as caught:
        fetch_manifests(unreachable, "lws/v0.7.0/manifests.yaml")
    assert caught.value.retryable


def test_the_reason_names_each_missing_piece_and_why() -> None:
    lws = next(c for c in DEFAULT_STACK if c.kind == "LeaderWorkerSet")
    dra = next(c for c in DEFAULT_STACK if c.manifest is None)
    reason = stack_reason(
        StackReport(missing=[dra, lws], problems={lws.name: "http://x/lws.yaml: HTTP 404"})
    )
    assert reason == (
        "ServingStackMissing: Dynamic Resource Allocation v1 (resource.k8s.io/v1 "
        "ResourceClaimTemplate); LeaderWorkerSet v0.7.0 (leaderworkerset.x-k8s.io/v1 "
        "LeaderWorkerSet): http://x/lws.yaml: HTTP 404"
    )
