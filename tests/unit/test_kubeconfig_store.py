"""``existing.secretRef`` is honoured on the worker: the kubeconfig is found by the Secret's name
(a ``<name>.yaml`` file or a mounted Secret ``<name>/<key>``), learnt from the cluster's probe, and
the probe counts pools by each cluster's own node label (issue 14 items 4 and 5)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError

from modelfleet.activities.kube_ops import KubeActivities, KubeconfigStore
from modelfleet.adapters.kube_client import KubeCluster
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.kinds import parse_resource
from modelfleet.contracts.kube_payloads import KubeconfigRef, ProbeRequest
from modelfleet.rendering.cluster_settings import cluster_facts
from modelfleet.sim.apiserver.server import FleetApiServer, serve_in_thread
from modelfleet.sim.loop_thread import LoopThread


def test_the_store_prefers_the_secret_ref_over_the_cluster_name(tmp_path: Path) -> None:
    (tmp_path / "byo.yaml").write_text("by cluster name")
    (tmp_path / "byo-kubeconfig").mkdir()
    (tmp_path / "byo-kubeconfig" / "config").write_text("mounted secret")
    (tmp_path / "shared.yaml").write_text("by secret name")
    store = KubeconfigStore(tmp_path)
    assert store.path("byo").read_text() == "by cluster name"
    mounted = store.path("byo", KubeconfigRef(name="byo-kubeconfig", key="config"))
    assert mounted.read_text() == "mounted secret"
    assert store.path("byo", KubeconfigRef(name="shared")).read_text() == "by secret name"


def test_a_missing_secret_names_what_was_looked_for(tmp_path: Path) -> None:
    store = KubeconfigStore(tmp_path)
    with pytest.raises(ApplicationError) as info:
        store.path("byo", KubeconfigRef(name="byo-secret"))
    message = str(info.value)
    assert "byo-secret/kubeconfig" in message
    assert "byo-secret.yaml" in message
    assert info.value.non_retryable


@pytest.fixture(scope="module")
def srv() -> Iterator[LoopThread[FleetApiServer]]:
    with serve_in_thread() as server:
        yield server


def _node(name: str, labels: dict[str, str]) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def test_a_probe_learns_the_secret_ref_and_counts_pools_by_their_label(
    srv: LoopThread[FleetApiServer], tmp_path: Path
) -> None:
    name = f"c-{uuid.uuid4().hex[:8]}"
    srv.call(srv.target.add_cluster, name)
    # The kubeconfig exists only under the Secret's name, as a mounted Secret would.
    mounted = tmp_path / "byo-secret" / "kubeconfig"
    mounted.parent.mkdir()
    srv.call(srv.target.write_kubeconfig, name, mounted)
    with KubeCluster(mounted, request_timeout=5.0) as kube:
        kube.apply(_node("n-mp", {"modelplane.ai/pool": "gpu-h100"}))
        kube.apply(_node("n-mf", {"modelfleet.dev/pool": "gpu-h100"}))
        kube.apply(_node("n-custom", {"example.com/pool": "cpu"}))
    spec = parse_resource(
        {
            "apiVersion": "modelplane.ai/v1alpha1",
            "kind": "InferenceCluster",
            "metadata": {"name": name},
            "spec": {
                "cluster": {
                    "source": "Existing",
                    "existing": {"secretRef": {"name": "byo-secret"}},
                },
                "nodePools": [
                    {"name": "gpu-h100", "className": "h100"},
                    {"name": "cpu", "className": "cpu", "nodeLabel": "example.com/pool"},
                ],
            },
        }
    )
    assert isinstance(spec, InferenceCluster)
    activities = KubeActivities(KubeconfigStore(tmp_path))
    try:
        with pytest.raises(ApplicationError):
            # Without the ref the worker only knows <cluster>.yaml, which does not exist.
            activities.probe(ProbeRequest(cluster=name))
        result = activities.probe(
            ProbeRequest(
                cluster=name,
                kubeconfig=KubeconfigRef(name="byo-secret"),
                facts=cluster_facts(spec),
            )
        )
        assert result.reachable
        # modelplane.ai/pool is this cluster's default label; the cpu pool has its own.
        assert {p: o.nodes for p, o in result.pools.items()} == {"gpu-h100": 1, "cpu": 1}
        # Later activities name only the cluster: the learnt ref still resolves it.
        again = activities.probe(ProbeRequest(cluster=name))
        assert again.reachable
        assert {p: o.nodes for p, o in again.pools.items()} == {"gpu-h100": 1}
    finally:
        activities.close()
