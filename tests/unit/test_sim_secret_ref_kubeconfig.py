"""A fleet whose clusters name a kubeconfig ``secretRef`` comes up reachable on the simulated
fleet (issue 29 item 8): ``modelfleet dev --fleet FILE`` used to leave such clusters NotReady
(``MissingCredentials``) because the worker looks for ``<secretRef name>/<key>`` (or
``<name>.yaml``) and the simulated fleet wrote only ``<cluster>.yaml``. The worker's own probe
activity, over HTTP, against the fleet's kubeconfig directory."""

from __future__ import annotations

from pathlib import Path

from modelfleet.activities.kube_ops import KubeActivities, KubeconfigStore
from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.kinds import parse_resource
from modelfleet.api.loading import load_paths
from modelfleet.cluster.plan import probe_request
from modelfleet.sim.simulated_fleet import SimulatedFleet

ROOT = Path(__file__).resolve().parents[2]


def _cluster(name: str, secret: dict[str, str] | None) -> InferenceCluster:
    source: dict[str, object] = {"source": "Existing"}
    if secret is not None:
        source["existing"] = {"secretRef": secret}
    doc = {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": name},
        "spec": {
            "cluster": source,
            "nodePools": [{"name": "gpu-l4", "className": "l4", "nodeCount": 1}],
        },
    }
    cluster = parse_resource(doc)
    assert isinstance(cluster, InferenceCluster)
    return cluster


def test_clusters_naming_a_secret_ref_are_reachable_by_the_worker(tmp_path: Path) -> None:
    loaded = load_paths([str(ROOT / "examples" / "quickstart" / "classes.yaml")])
    classes = [r for r in loaded.resources if isinstance(r, InferenceClass)]
    clusters = [
        _cluster("team-a", {"name": "team-a-admin"}),
        _cluster("team-b", {"name": "shared-creds", "key": "value"}),
        _cluster("plain", None),
    ]
    with SimulatedFleet.start_in_thread(
        classes, clusters, state_dir=tmp_path, startup_seconds=0
    ) as running:
        activities = KubeActivities(KubeconfigStore(running.target.kubeconfig_dir))
        for cluster in clusters:
            result = activities.probe(probe_request(cluster))
            assert result.reachable, (cluster.name, result.reason)
            assert result.pools["gpu-l4"].ready_nodes == 1
