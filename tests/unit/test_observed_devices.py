"""An adopted cluster is published from what it really reports (issue 10): the probe reads the
pool's ResourceSlices on its ready, schedulable nodes (a cordoned or NotReady node is neither
counted nor read), and placement matches CEL selectors against those devices, not the class's:
a selector only the real value satisfies places there, one on a declared-but-absent value does
not."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from placement_builders import DRIVER, deployment, gpu, mem_at_least, product_is, standalone

from modelfleet.activities.kube_ops import KubeActivities, KubeconfigStore
from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.contracts.fleet_state import cluster_entry, cluster_record
from modelfleet.contracts.kube_payloads import DeviceGroup, PoolObservation, ProbeRequest
from modelfleet.contracts.status import ClusterRecord
from modelfleet.scheduling.fleet_placement import place_in_fleet
from modelfleet.scheduling.observed_devices import device_differences, published_devices
from modelfleet.sim.apiserver.server import FleetApiServer, serve_in_thread
from modelfleet.sim.loop_thread import LoopThread
from modelfleet.sim.simulated_fleet import create_with_status

# What the class declares: 80Gi H100s with an architecture attribute.
CLASS = InferenceClass.model_validate(
    {
        "kind": "InferenceClass",
        "metadata": {"name": "h100"},
        "spec": {"devices": [gpu(8, "80Gi", "NVIDIA H100", architecture="Hopper")]},
    }
)
# What the hardware says: the exact memory and product name, no architecture attribute.
REAL_MEMORY = "81559Mi"
REAL_PRODUCT = "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module")
def srv() -> Iterator[LoopThread[FleetApiServer]]:
    with serve_in_thread() as server:
        yield server


def _node(name: str, *, ready: bool = True, cordoned: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"modelfleet.dev/pool": "gpu"}},
        "spec": {"unschedulable": True} if cordoned else {},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def _slice(node: str, memory: str, product: str, count: int = 8) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {
                        "productName": {"string": product},
                        "uuid": {"string": f"GPU-{node}-{i}"},
                    },
                    "capacity": {"memory": {"value": memory}},
                }
                for i in range(count)
            ],
        },
    }


def _spec(name: str, nodes: int) -> InferenceCluster:
    return InferenceCluster.model_validate(
        {
            "kind": "InferenceCluster",
            "metadata": {"name": name},
            "spec": {
                "cluster": {"source": "Existing"},
                "nodePools": [{"name": "gpu", "className": "h100", "nodeCount": nodes}],
            },
        }
    )


def test_the_probe_publishes_the_slices_of_counted_nodes_only(
    srv: LoopThread[FleetApiServer], tmp_path: Path
) -> None:
    name = f"c-{uuid.uuid4().hex[:8]}"
    srv.call(srv.target.add_cluster, name)
    srv.call(srv.target.write_kubeconfig, name, tmp_path / f"{name}.yaml")
    store = srv.call(srv.target.store, name)
    objects = [
        _node("n-ok"),
        _slice("n-ok", REAL_MEMORY, REAL_PRODUCT),
        # A cordoned node and a NotReady one, each with other hardware: not counted, not read.
        _node("n-cordoned", cordoned=True),
        _slice("n-cordoned", "40Gi", "NVIDIA A100", count=4),
        _node("n-down", ready=False),
        _slice("n-down", "40Gi", "NVIDIA A100", count=4),
    ]
    for manifest in objects:
        srv.run(create_with_status(store, manifest, "test"))
    activities = KubeActivities(KubeconfigStore(tmp_path))
    try:
        result = activities.probe(ProbeRequest(cluster=name))
    finally:
        activities.close()
    assert result.reachable
    seen = result.pools["gpu"]
    assert (seen.nodes, seen.ready_nodes) == (3, 1)
    assert seen.devices is not None
    (group,) = seen.devices
    assert (group.driver, group.count) == (DRIVER, 8)
    # Per-device values (the UUID) are not a property of the pool and are left out.
    assert {k: v.string for k, v in group.attributes.items()} == {"productName": REAL_PRODUCT}
    assert {k: v.value for k, v in group.capacity.items()} == {"memory": REAL_MEMORY}


def _observed(count: int = 8) -> DeviceGroup:
    return DeviceGroup.model_validate(
        {
            "driver": DRIVER,
            "count": count,
            "attributes": {"productName": {"string": REAL_PRODUCT}},
            "capacity": {"memory": {"value": REAL_MEMORY}},
        }
    )


def _record(devices: list[DeviceGroup] | None) -> ClusterRecord:
    return ClusterRecord(
        spec=_spec("adopted", 2),
        ready=True,
        gateway_address="10.0.0.1",
        observed_pools={"gpu": PoolObservation(nodes=2, ready_nodes=2, devices=devices)},
    )


def _placed(record: ClusterRecord, *selectors: str) -> bool:
    dep = deployment(standalone(1, *selectors))
    placement = place_in_fleet(
        dep,
        desired=1,
        classes={"h100": CLASS},
        clusters={"adopted": record.observed()},
        replicas=[],
    )
    return [r.spec.cluster_name for r in placement.placed] == ["adopted"]


def test_selectors_match_what_the_hardware_reports_not_what_the_class_declares() -> None:
    real = _record([_observed()])
    declared = _record(None)  # never observed (no resource.k8s.io on the cluster)
    # Only the real value satisfies it.
    assert _placed(real, product_is(REAL_PRODUCT))
    assert not _placed(declared, product_is(REAL_PRODUCT))
    # The class says 80Gi (81920Mi); the hardware has less.
    assert _placed(declared, mem_at_least("80Gi"))
    assert not _placed(real, mem_at_least("80Gi"))
    assert _placed(real, mem_at_least(REAL_MEMORY))
    # Declared but absent on the hardware: no match there.
    hopper = f'device.attributes["{DRIVER}"].architecture == "Hopper"'
    assert _placed(declared, hopper)
    assert not _placed(real, hopper)
    # A pool whose nodes publish no GPU at all has none to offer.
    assert not _placed(_record([]), mem_at_least("1Gi"))


def test_published_devices_keep_the_class_identity_and_take_the_count() -> None:
    (device,) = published_devices(CLASS.spec.devices, [_observed(count=4)])
    declared = CLASS.spec.devices[0]
    assert (device.name, device.claim, device.device_class_name) == (
        declared.name,
        declared.claim,
        declared.device_class_name,
    )
    assert device.count == 4
    assert device.capacity["memory"].value == REAL_MEMORY


def test_the_fleet_keeps_observed_devices_across_continue_as_new() -> None:
    record = _record([_observed()])
    entry, _, layout = cluster_entry(record)
    again = cluster_record(entry, {entry.layout: layout} if entry.layout else {})
    assert again.observed_pools == record.observed_pools
    assert again.observed() == record.observed()


def test_the_differences_from_the_class_are_spelled_out_for_describe() -> None:
    published = published_devices(CLASS.spec.devices, [_observed()])
    assert device_differences(CLASS.spec.devices, published) == [
        "gpu memory: class 80Gi, hardware 81559Mi",
        "gpu architecture: class Hopper, hardware (not reported)",
        f"gpu productName: class NVIDIA H100, hardware {REAL_PRODUCT}",
    ]
    assert device_differences(CLASS.spec.devices, CLASS.spec.devices) == []
    assert device_differences(CLASS.spec.devices, []) == ["gpu: class 8, hardware none published"]


def test_the_shipped_examples_show_no_hardware_difference_on_the_simulated_fleet() -> None:
    """Attributes the driver publishes beyond the class (``type``, ``uuid``) are no difference:
    the EKS example warned ``gpu type: class (not declared)`` (issue 23)."""
    import yaml

    from modelfleet.adapters.device_inventory import pool_devices
    from modelfleet.sim.infrastructure import cluster_layout, resource_slice_manifests

    examples = Path(__file__).resolve().parents[2] / "examples"
    for path in (examples / "provisioning" / "eks.yaml", examples / "provisioning" / "gke.yaml"):
        docs = list(yaml.safe_load_all(path.read_text()))
        classes = {
            d["metadata"]["name"]: InferenceClass.model_validate(d)
            for d in docs
            if d["kind"] == "InferenceClass"
        }
        (cluster,) = (
            InferenceCluster.model_validate(d) for d in docs if d["kind"] == "InferenceCluster"
        )
        for layout in cluster_layout(cluster, classes):
            assert layout.klass is not None
            slices = [
                s for node in layout.nodes for s in resource_slice_manifests("c", node, layout)
            ]
            (observed,) = pool_devices({"p": list(layout.nodes)}, slices).values()
            assert any("type" in group.attributes for group in observed)
            declared = layout.klass.spec.devices
            assert device_differences(declared, published_devices(declared, observed)) == [], path
