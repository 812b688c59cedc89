"""The worked topologies of Modelplane's design ("schedules as" rows): each shape's node cost in
Modelplane's terms (pods that claim devices), and the smallest pool it fits in under our
per-device ledger, which is never larger and is smaller when pods need part of a node."""

from __future__ import annotations

from typing import Any

import pytest
from placement_builders import cluster, deployment, engine, fits, fleet, gang, gpu, pool, standalone

from modelfleet.api.deployments import ModelDeployment
from modelfleet.scheduling.placement import place


def _prefill_decode(prefill: dict[str, Any], decode: dict[str, Any]) -> ModelDeployment:
    prefill = {**prefill, "name": "prefill", "phase": "Prefill"}
    decode = {**decode, "name": "decode", "phase": "Decode"}
    return deployment(prefill, decode, mode="PrefillDecode")


TOPOLOGIES = [
    # (id, deployment, devices per node, Modelplane node cost, smallest pool that fits)
    ("single-gpu", deployment(standalone(1)), 1, 1, 1),
    ("tp4", deployment(standalone(4)), 4, 1, 1),
    ("throughput-copies-4", deployment(standalone(8, copies=4)), 8, 4, 4),
    ("throughput-copies-4-sub-node", deployment(standalone(1, copies=4)), 8, 4, 1),
    ("multi-node-tp-pp", deployment(gang(8, 8, nodes=1)), 8, 2, 2),
    ("replicated-gang-copies-3", deployment(gang(8, 8, nodes=1, copies=3)), 8, 6, 6),
    ("dp-ep-2x8", deployment(gang(8, 8, nodes=1)), 8, 2, 2),
    ("api-server-only-leader", deployment(gang(None, 8, nodes=1)), 8, 1, 1),
    (
        "disaggregated-on-2-gpu-nodes",
        _prefill_decode(standalone(1, copies=3), standalone(2, copies=2)),
        2,
        5,
        4,
    ),
    (
        "disaggregated-on-8-gpu-nodes",
        _prefill_decode(standalone(1, copies=3), standalone(2, copies=2)),
        8,
        5,
        1,
    ),
    (
        "disaggregated-multi-node-decode",
        _prefill_decode(standalone(8), engine(*gang(8, 8, nodes=1)["members"])),
        8,
        3,
        3,
    ),
]


def _node_cost(dep: ModelDeployment, devices_per_node: int) -> int:
    (replica,) = place(dep, fleet(cluster("a", pool("p", 64, gpu(devices_per_node)))), []).placed
    return sum(
        m.pods * e.copies for e in replica.spec.engines for m in e.members if m.device_requests
    )


@pytest.mark.parametrize(
    ("dep", "per_node", "node_cost", "min_nodes"),
    [pytest.param(*row[1:], id=row[0]) for row in TOPOLOGIES],
)
def test_schedules_as(dep: ModelDeployment, per_node: int, node_cost: int, min_nodes: int) -> None:
    assert _node_cost(dep, per_node) == node_cost
    assert fits(dep, fleet(cluster("a", pool("p", min_nodes, gpu(per_node)))))
    assert not fits(dep, fleet(cluster("a", pool("p", min_nodes - 1, gpu(per_node)))))
