"""The Kubernetes side of the simulated clouds: every cluster a fake cloud creates becomes an
emulated API server on the shared simulated fleet server, and every node pool / node group it
creates becomes Nodes (with the labels and taints the cloud request asked for) and the DRA
ResourceSlices the class of its machine publishes.

Development/test emulator only: product code never imports ``modelfleet.sim``. It goes through
the public entry points of :mod:`modelfleet.sim.simulated_fleet` (a ``SimulatedFleet`` of its
own on the shared server, so the kubeconfigs the sim writes stay under the clouds' state
directory and never in a worker's credentials directory) and :mod:`modelfleet.sim.infrastructure`.

The machine -> class catalog is how a real cloud "knows" the hardware: a GKE machine type with
an accelerator, or an EC2 instance type, decides the devices of a node. Pools whose machine no
class describes get plain CPU nodes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import (
    ClusterAccess,
    ClusterSource,
    InferenceCluster,
    InferenceClusterSpec,
    NodePool,
)
from modelfleet.api.meta import ObjectMeta
from modelfleet.api.naming import LABEL_POOL
from modelfleet.sim.apiserver.status_errors import ApiError
from modelfleet.sim.infrastructure import (
    GPU_TAINT,
    PoolLayout,
    device_class_manifests,
    node_manifest,
    resource_slice_manifests,
)
from modelfleet.sim.simulated_fleet import SimulatedFleet, create_with_status

__all__ = ["CloudKube", "CloudNodePool", "MachineCatalog"]

# A placeholder pool of zero nodes: the simulated fleet builds a cluster from an
# InferenceCluster (which needs one pool); the cloud's own pools arrive later, node by node.
_EMPTY_POOL = "modelfleet-sim-empty"


@dataclass(frozen=True)
class CloudNodePool:
    """A node pool as the cloud was asked for it."""

    name: str
    machine: str
    accelerator: str | None
    node_count: int
    labels: Mapping[str, str]
    taints: list[dict[str, str]]
    zones: list[str]
    # The label the cloud itself puts on every node of the pool (e.g. the GKE node pool name).
    cloud_labels: Mapping[str, str]


class MachineCatalog:
    """Which class describes a machine: GKE (machine type, accelerator), EKS instance type or
    AKS VM size."""

    def __init__(self, classes: Mapping[str, InferenceClass]) -> None:
        self.classes = dict(classes)

    def lookup(self, machine: str, accelerator: str | None) -> InferenceClass | None:
        for klass in self.classes.values():
            prov = klass.spec.provisioning
            if prov is None:
                continue
            gke = prov.gke
            if (
                gke is not None
                and gke.machine_type == machine
                and accelerator in (None, gke.accelerator.type)
            ):
                return klass
            if prov.eks is not None and prov.eks.instance_type == machine:
                return klass
            if prov.aks is not None and prov.aks.vm_size == machine:
                return klass
        return None


class CloudKube:
    """Creates and removes emulated clusters and their nodes for the fake clouds."""

    def __init__(self, fleet: SimulatedFleet, catalog: MachineCatalog) -> None:
        self.fleet = fleet
        self.catalog = catalog
        # (cluster, pool) -> the pool as last asked for, so a resize keeps its nodes' shape.
        self.pools: dict[tuple[str, str], CloudNodePool] = {}

    def url(self, cluster: str) -> str:
        return self.fleet.server.cluster_url(cluster)

    def exists(self, cluster: str) -> bool:
        return cluster in self.fleet.clusters

    async def create_cluster(self, cluster: str) -> str:
        """An emulated API server with its system node and serving stack; returns its URL."""
        if cluster not in self.fleet.clusters:
            placeholder = InferenceCluster(
                metadata=ObjectMeta(name=cluster),
                spec=InferenceClusterSpec(
                    cluster=ClusterAccess(source=ClusterSource.EXISTING),
                    node_pools=[NodePool(name=_EMPTY_POOL, class_name=_EMPTY_POOL, node_count=0)],
                ),
            )
            await self.fleet.add_cluster(placeholder, {})
        return self.url(cluster)

    async def delete_cluster(self, cluster: str) -> None:
        handle = self.fleet.clusters.pop(cluster, None)
        if handle is None:
            return
        await handle.simulator.stop()
        await handle.serving.stop()
        self.fleet.server.remove_cluster(cluster)

    async def add_pool(self, cluster: str, pool: CloudNodePool) -> int:
        """Register the pool's nodes (and slices); returns the number of nodes added."""
        if cluster not in self.fleet.clusters:
            return 0
        self.pools[(cluster, pool.name)] = pool
        store = self.fleet.store(cluster)
        klass = self.catalog.lookup(pool.machine, pool.accelerator)
        pool_label = pool.labels.get(LABEL_POOL, pool.name)
        layout = PoolLayout(
            NodePool(name=pool_label, class_name=klass.name if klass else pool.machine),
            klass,
            tuple(f"{cluster}-{pool.name}-{i}" for i in range(pool.node_count)),
        )
        if klass is not None:
            for manifest in device_class_manifests({klass.name: klass}):
                if await _absent(store, manifest):
                    await store.create(manifest, field_manager=_MANAGER)
        zones = pool.zones or ["sim-a"]
        for i, node in enumerate(layout.nodes):
            manifest = _cloud_node(
                node_manifest(cluster, node, layout=layout, zone=zones[i % len(zones)]), pool
            )
            if await _absent(store, manifest):
                await create_with_status(store, manifest, _MANAGER)
            for piece in resource_slice_manifests(cluster, node, layout):
                if await _absent(store, piece):
                    await store.create(piece, field_manager=_MANAGER)
        return len(layout.nodes)

    def size(self, cluster: str, pool: str) -> int:
        found = self.pools.get((cluster, pool))
        return found.node_count if found is not None else 0

    async def resize_pool(self, cluster: str, pool: str, count: int) -> None:
        """Grow (new nodes with their slices) or shrink (the highest-numbered nodes go)."""
        found = self.pools.get((cluster, pool))
        if found is None or cluster not in self.fleet.clusters:
            return
        await self.add_pool(cluster, replace(found, node_count=count))
        store = self.fleet.store(cluster)
        gone = {f"{cluster}-{pool}-{i}" for i in range(count, found.node_count)}
        for item in await store.list("resource.k8s.io/v1", "ResourceSlice"):
            if item.get("spec", {}).get("nodeName") in gone:
                await store.delete("resource.k8s.io/v1", "ResourceSlice", item["metadata"]["name"])
        for node in sorted(gone):
            with contextlib.suppress(ApiError):
                await store.delete("v1", "Node", node)

    async def remove_pool(self, cluster: str, pool: str) -> None:
        self.pools.pop((cluster, pool), None)
        if cluster not in self.fleet.clusters:
            return
        store = self.fleet.store(cluster)
        prefix = f"{cluster}-{pool}-"
        for kind, api_version in (("ResourceSlice", "resource.k8s.io/v1"), ("Node", "v1")):
            for item in await store.list(api_version, kind):
                name = item["metadata"]["name"]
                if name.startswith(prefix):
                    await store.delete(api_version, kind, name)


_MANAGER = "modelfleet-sim-cloud"


def _cloud_node(manifest: dict[str, Any], pool: CloudNodePool) -> dict[str, Any]:
    """The node as the cloud makes it: the pool label and GPU taint only when the request asked
    for them (the simulated fleet's own convention adds both unconditionally)."""
    labels = manifest["metadata"]["labels"]
    labels.pop(LABEL_POOL, None)
    labels.update(pool.cloud_labels)
    labels.update(pool.labels)
    taints = [t for t in manifest["spec"].get("taints", []) if t != GPU_TAINT]
    taints.extend(pool.taints)
    if taints:
        manifest["spec"]["taints"] = taints
    else:
        manifest["spec"].pop("taints", None)
    return manifest


async def _absent(store: Any, manifest: Mapping[str, Any]) -> bool:
    meta = manifest["metadata"]
    try:
        await store.get(
            manifest["apiVersion"], manifest["kind"], meta["name"], meta.get("namespace")
        )
    except ApiError as exc:
        if exc.code == 404:
            return True
        raise
    return False
