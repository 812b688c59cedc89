"""``modelfleet get modelcaches``: one row per cache with its source, how many clusters are Ready,
the overall phase and each cluster's state; ``-o wide`` adds the revision, the size and why the
clusters that are not Ready are not. Read from the same manifest ``-o yaml`` prints."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.text import Text

from modelfleet.api.caches import ModelCache
from modelfleet.api.kinds import parse_resource
from modelfleet.cli import columns
from modelfleet.cli.manifests import cache_resource
from modelfleet.cli.targets import parse_targets
from modelfleet.contracts.cache_payloads import CachePhase, CacheStatus, ClusterCache

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def _fetched():  # type: ignore[no-untyped-def]
    spec = parse_resource(
        {
            "apiVersion": "modelplane.ai/v1alpha1",
            "kind": "ModelCache",
            "metadata": {"name": "coder", "namespace": "ml"},
            "spec": {
                "source": "HuggingFace",
                "huggingFace": {"repo": "Qwen/Qwen3-Coder", "revision": "r1", "sizeGiB": 1100},
            },
        }
    )
    assert isinstance(spec, ModelCache)
    status = CacheStatus(
        namespace="ml",
        name="coder",
        phase="Hydrating",
        ready=1,
        total=3,
        clusters=[
            ClusterCache(cluster="a", phase=CachePhase.READY),
            ClusterCache(cluster="b", phase=CachePhase.HYDRATING, bytes_done=40, bytes_total=100),
            ClusterCache(
                cluster="c",
                phase=CachePhase.FAILED,
                message="attempt 1 failed: 401 Unauthorized; retrying in 5s",
            ),
        ],
    )
    return cache_resource(spec, status, NOW)


def _plain(cells: list[str]) -> list[str]:
    return [Text.from_markup(c).plain for c in cells]


def test_get_modelcaches_shows_each_clusters_state() -> None:
    (target,) = parse_targets(["modelcaches"])
    assert target.kind == "ModelCache"
    item = _fetched()
    assert columns.header("ModelCache", wide=False, all_namespaces=False) == [
        "NAME",
        "SOURCE",
        "READY",
        "PHASE",
        "CLUSTERS",
        "AGE",
    ]
    row = _plain(columns.row(item, wide=False, all_namespaces=False, now=NOW))
    assert row[:5] == [
        "coder",
        "HuggingFace:Qwen/Qwen3-Coder",
        "1/3",
        "Hydrating",
        "a: Ready, b: Hydrating 40%, c: Failed",
    ]


def test_get_modelcaches_wide_says_why_and_all_namespaces_adds_the_namespace() -> None:
    item = _fetched()
    header = columns.header("ModelCache", wide=True, all_namespaces=True)
    row = _plain(columns.row(item, wide=True, all_namespaces=True, now=NOW))
    cells = dict(zip(header, row, strict=True))
    assert cells["NAMESPACE"] == "ml"
    assert cells["REVISION"] == "r1"
    assert cells["SIZE"] == "1100Gi"
    assert cells["MESSAGE"] == "c: attempt 1 failed: 401 Unauthorized; retrying in 5s"
    # The manifest -o yaml prints carries the same per-cluster status.
    clusters = item.manifest["status"]["clusters"]
    assert [c["cluster"] for c in clusters] == ["a", "b", "c"]
    assert item.manifest["spec"]["huggingFace"]["repo"] == "Qwen/Qwen3-Coder"
