"""Properties of placement over arbitrary fleets and sequences of deployments:

* the fleet is never overcommitted: on every pool, gang pods fit in whole nodes and the
  remaining pods can be packed onto the remaining nodes device by device (checked by an
  exhaustive search that shares no code with the ledger);
* placement is deterministic for a given input order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from functools import cache
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_builders import (
    cluster,
    deployment,
    device,
    engine,
    fleet,
    gpu,
    mem_at_least,
    member,
    nic,
    pool,
)

from modelfleet.api.classes import ClassDevice
from modelfleet.api.deployments import ModelDeployment, ModelReplica, Role
from modelfleet.cel.compiler import check_selector
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.scheduling.placement import place
from modelfleet.scheduling.snapshot import FleetSnapshot
from modelfleet.scheduling.stamp import owned_by

# celpy raises the recursion limit the first time it compiles; doing that here rather than
# inside a hypothesis run keeps hypothesis from warning that the limit changed under it.
check_selector(mem_at_least("1Gi"))


def _efa(count: int) -> ClassDevice:
    return ClassDevice.model_validate(
        {
            "name": "efa",
            "driver": "efa.amazonaws.com",
            "deviceClassName": "efa.amazonaws.com",
            "count": count,
        }
    )


CLASSES: dict[str, tuple[ClassDevice, ...]] = {
    "l4": (gpu(1, "24Gi", "NVIDIA L4"),),
    "a100x4-efa": (gpu(4, "40Gi", "NVIDIA A100"), _efa(2)),
    "h100x8": (gpu(8, "80Gi"),),
    "h200x8-ib": (gpu(8, "140Gi", "NVIDIA H200"), nic(8)),
}
EFA = 'device.driver == "efa.amazonaws.com"'

# Small pools, so that deployments contend for them.
pools_st = st.lists(
    st.tuples(st.sampled_from(sorted(CLASSES)), st.sampled_from([0, 1, 1, 2, 2, 3, 4])),
    min_size=1,
    max_size=3,
)
tainted_st = st.sampled_from([False, False, False, True])
clusters_st = st.lists(st.tuples(pools_st, tainted_st), min_size=1, max_size=4)


def _fleet(spec: Sequence[tuple[list[tuple[str, int]], bool]]) -> FleetSnapshot:
    return fleet(
        *(
            cluster(
                f"c{i}",
                *(pool(f"{cls}-{j}", nodes, *CLASSES[cls]) for j, (cls, nodes) in enumerate(pools)),
                taints=[("spot", "", "NoSchedule")] if tainted else [],
            )
            for i, (pools, tainted) in enumerate(spec)
        )
    )


gpus_st = st.sampled_from([1, 2, 3, 4, 8])
memory_st = st.sampled_from(["1Gi", "30Gi", "100Gi"])


@st.composite
def engines_st(draw: st.DrawFn, name: str) -> dict[str, Any]:
    copies = draw(st.integers(1, 3))
    if draw(st.booleans()):
        devices = [device("gpu", draw(gpus_st), mem_at_least(draw(memory_st)))]
        if draw(st.booleans()):
            devices.append(device("efa", draw(st.integers(1, 2)), EFA))
        return engine(member(*devices), name=name, copies=copies)
    leader_gpus = draw(st.sampled_from([0, 4, 8]))
    leader = (
        member(device("gpu", leader_gpus), role="Leader") if leader_gpus else member(role="Leader")
    )
    worker = member(
        device("gpu", draw(st.sampled_from([4, 8]))), role="Worker", nodes=draw(st.integers(1, 2))
    )
    return engine(leader, worker, name=name, copies=draw(st.integers(1, 2)))


@st.composite
def deployments_st(draw: st.DrawFn) -> list[tuple[ModelDeployment, int | None]]:
    steps: list[tuple[ModelDeployment, int | None]] = []
    for i in range(draw(st.integers(1, 6))):
        engines = [draw(engines_st(f"e{j}")) for j in range(draw(st.integers(1, 2)))]
        dep = deployment(
            *engines,
            name=f"d{i}",
            namespace=draw(st.sampled_from(["team-a", "team-b"])),
            replicas=draw(st.integers(0, 4)),
            tolerations=[{"key": "spot", "operator": "Exists"}] if draw(st.booleans()) else [],
        )
        steps.append((dep, None))
        if steps and draw(st.booleans()):
            # Re-plan an earlier deployment with another replica count (scale or surge).
            earlier, _ = steps[draw(st.integers(0, len(steps) - 1))]
            steps.append((earlier, draw(st.integers(0, 5))))
    return steps


def _run(
    snapshot: FleetSnapshot, steps: Sequence[tuple[ModelDeployment, int | None]]
) -> tuple[list[ModelReplica], list[dict[str, Any]]]:
    evaluator = SelectorEvaluator()
    replicas: list[ModelReplica] = []
    dumps = []
    for dep, desired in steps:
        result = place(dep, snapshot, replicas, evaluator=evaluator, desired=desired)
        dumps.append(result.model_dump())
        replicas = [
            *(r for r in replicas if not owned_by(r, dep)),
            *result.kept,
            *result.placed,
        ]
    return replicas, dumps


# --- an independent oracle: can these pods be packed onto these nodes? ----------------------


def _packable(capacity: tuple[int, ...], nodes: int, pods: list[tuple[int, ...]]) -> bool:
    ordered = tuple(sorted(pods, key=lambda p: (-sum(p), p)))

    @cache
    def search(i: int, bins: tuple[tuple[int, ...], ...]) -> bool:
        if i == len(ordered):
            return True
        pod = ordered[i]
        for b in set(bins):  # identical nodes are interchangeable
            if all(f >= d for f, d in zip(b, pod, strict=True)):
                rest = list(bins)
                rest.remove(b)
                rest.append(tuple(f - d for f, d in zip(b, pod, strict=True)))
                if search(i + 1, tuple(sorted(rest))):
                    return True
        return False

    return search(0, tuple([capacity] * nodes))


def _assert_not_overcommitted(snapshot: FleetSnapshot, replicas: list[ModelReplica]) -> None:
    whole: dict[tuple[str, str], int] = defaultdict(int)
    shared: dict[tuple[str, str], list[tuple[int, ...]]] = defaultdict(list)
    pools = {(c.name, p.name): p for c in snapshot.clusters for p in c.pools}
    for replica in replicas:
        for e in replica.spec.engines:
            for m in e.members:
                key = (replica.spec.cluster_name, m.node_pool_name)
                assert key in pools, f"{replica.name} is pinned to an unknown pool {key}"
                if not m.device_requests:
                    continue
                per_class: dict[str, int] = defaultdict(int)
                for r in m.device_requests:
                    per_class[r.device_class_name] += r.count
                pod = tuple(per_class.get(d.device_class_name or "", 0) for d in pools[key].devices)
                pods = m.pods * e.copies
                if m.role is Role.STANDALONE:
                    shared[key].extend([pod] * pods)
                else:
                    whole[key] += pods
    for key, p in pools.items():
        assert whole[key] <= p.nodes, f"{key}: {whole[key]} gang pods on {p.nodes} nodes"
        capacity = tuple(d.count if d.claim.value == "DRA" else 0 for d in p.devices)
        assert _packable(capacity, p.nodes - whole[key], shared[key]), (
            f"{key}: pods {shared[key]} do not fit {p.nodes - whole[key]} nodes of {capacity}"
        )


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters=clusters_st, steps=deployments_st())
def test_ledger_never_overcommits_a_node_or_a_pool(
    clusters: list[tuple[list[tuple[str, int]], bool]],
    steps: list[tuple[ModelDeployment, int | None]],
) -> None:
    snapshot = _fleet(clusters)
    replicas, _ = _run(snapshot, steps)
    _assert_not_overcommitted(snapshot, replicas)
    names = [(r.namespace, r.name) for r in replicas]
    assert len(names) == len(set(names))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters=clusters_st, steps=deployments_st())
def test_placement_is_deterministic_for_a_given_input_order(
    clusters: list[tuple[list[tuple[str, int]], bool]],
    steps: list[tuple[ModelDeployment, int | None]],
) -> None:
    first_replicas, first = _run(_fleet(clusters), steps)
    second_replicas, second = _run(_fleet(clusters), steps)
    assert first == second
    assert [r.model_dump() for r in first_replicas] == [r.model_dump() for r in second_replicas]


def test_oracle_rejects_an_overcommitted_packing() -> None:
    # The oracle must be able to fail: 3+3+3 GPUs do not fit two 4-GPU nodes.
    assert not _packable((4,), 2, [(3,), (3,), (3,)])
    assert _packable((4,), 3, [(3,), (3,), (3,)])
    assert not _packable((8, 2), 1, [(1, 1), (1, 1), (1, 1)])
