"""Placement at fleet scale: 1,000 clusters x 8 pools (mixed classes), 5,000 replicas already
running, then 200 new replicas of mixed shapes (single GPU, 8 GPUs, a 2-node gang,
prefill/decode) placed one deployment at a time, each seeing the ones before it.

Prints milliseconds per placement (median, p95), CEL evaluations, and the same run with the
selector evaluator's result cache disabled. Deterministic (seeded).

    .venv/bin/python bench/scheduling.py [--clusters 1000] [--existing 5000] [--new 200]
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from modelfleet.api.classes import ClassDevice
from modelfleet.api.deployments import ModelDeployment, ModelReplica
from modelfleet.api.naming import replica_name
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.scheduling.index import fleet_index
from modelfleet.scheduling.placement import place
from modelfleet.scheduling.snapshot import ClusterSnapshot, FleetSnapshot, PoolSnapshot

SEED = 20260814
GPU = "gpu.nvidia.com"
EFA = "efa.amazonaws.com"
REGIONS = ("us-east", "us-west", "eu-central", "ap-south")


def _gpu(count: int, product: str, memory: str, cc: str) -> dict[str, Any]:
    return {
        "name": "gpu",
        "driver": GPU,
        "deviceClassName": GPU,
        "count": count,
        "attributes": {
            "productName": {"string": product},
            "cudaComputeCapability": {"version": cc},
            "driverVersion": {"version": "580.65.6"},
        },
        "capacity": {"memory": {"value": memory}},
    }


CLASSES: dict[str, list[ClassDevice]] = {
    name: [ClassDevice.model_validate(d) for d in devices]
    for name, devices in {
        "l4": [_gpu(1, "NVIDIA L4", "23034Mi", "8.9.0")],
        "l40s-x4": [_gpu(4, "NVIDIA L40S", "46068Mi", "8.9.0")],
        "a100-x8": [_gpu(8, "NVIDIA A100-SXM4-80GB", "81920Mi", "8.0.0")],
        "h100-x8": [_gpu(8, "NVIDIA H100 80GB HBM3", "81559Mi", "9.0.0")],
        "h100-x8-ib": [
            _gpu(8, "NVIDIA H100 80GB HBM3", "81559Mi", "9.0.0"),
            {
                "name": "nic",
                "claim": "Synthetic",
                "driver": "nic.nvidia.com",
                "count": 8,
                "attributes": {"linkType": {"string": "infiniband"}},
            },
        ],
        "h200-x8-efa": [
            _gpu(8, "NVIDIA H200", "140Gi", "9.0.0"),
            {"name": "efa", "driver": EFA, "deviceClassName": EFA, "count": 16},
        ],
    }.items()
}
EIGHT_GPU_CLASSES = ("a100-x8", "h100-x8", "h100-x8-ib", "h200-x8-efa")


def mem(q: str) -> str:
    return f'device.capacity["{GPU}"].memory.compareTo(quantity("{q}")) >= 0'


def _device(name: str, count: int, *cel: str) -> dict[str, Any]:
    return {"name": name, "count": count, "selectors": [{"cel": c} for c in cel]}


def _member(role: str, *devices: dict[str, Any], nodes: int | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "role": role,
        "template": {"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai"}]}},
    }
    if devices:
        doc["nodeSelector"] = {"devices": list(devices)}
    if nodes:
        doc["worker"] = {"nodes": nodes}
    return doc


SHAPES: dict[str, dict[str, Any]] = {
    "single-gpu": {"engines": [{"name": "vllm", "members": [
        _member("Standalone", _device("gpu", 1, mem("20Gi")))]}]},
    "8-gpu": {"engines": [{"name": "vllm", "members": [
        _member("Standalone", _device("gpu", 8, mem("80Gi"), 'device.attributes["gpu.nvidia.com"].cudaComputeCapability.isGreaterThan(semver("8.5.0"))'))]}]},  # noqa: E501
    "2-node-gang": {"engines": [{"name": "vllm", "members": [
        _member("Leader", _device("gpu", 8, mem("120Gi")), _device("efa", 16, f'device.driver == "{EFA}"')),  # noqa: E501
        _member("Worker", _device("gpu", 8, mem("120Gi")), _device("efa", 16, f'device.driver == "{EFA}"'), nodes=1)]}]},  # noqa: E501
    "prefill-decode": {"serving": {"mode": "PrefillDecode"}, "engines": [
        {"name": "prefill", "phase": "Prefill", "copies": 2, "members": [
            _member("Standalone", _device("gpu", 2, mem("40Gi")))]},
        {"name": "decode", "phase": "Decode", "members": [
            _member("Standalone", _device("gpu", 4, mem("40Gi")))]}]},
}  # fmt: skip


def deployment(name: str, shape: str, rng: random.Random) -> ModelDeployment:
    spec = dict(SHAPES[shape])
    if rng.random() < 0.25:
        spec["clusterSelector"] = {"matchLabels": {"region": rng.choice(REGIONS)}}
    if rng.random() < 0.5:
        spec["tolerations"] = [{"key": "spot", "operator": "Exists"}]
    return ModelDeployment.model_validate(
        {
            "kind": "ModelDeployment",
            "metadata": {"name": name, "namespace": f"team-{rng.randrange(20)}"},
            "spec": {"replicas": 1, "template": {"spec": spec}},
        }
    )


def unschedulable(gpus: int, copies: int) -> ModelDeployment:
    """A deployment that fits nowhere, so every cluster is tried and explained."""
    engine = {
        "name": "vllm",
        "copies": copies,
        "members": [_member("Standalone", _device("gpu", gpus, mem("20Gi")))],
    }
    return ModelDeployment.model_validate(
        {"kind": "ModelDeployment", "metadata": {"name": f"too-big-{gpus}x{copies}"},
         "spec": {"replicas": 1, "template": {"spec": {"engines": [engine]}}}}
    )  # fmt: skip


def build_fleet(clusters: int, rng: random.Random) -> FleetSnapshot:
    snapshot = FleetSnapshot()
    for i in range(clusters):
        pools = []
        for j in range(8):
            cls = rng.choice(sorted(CLASSES))
            pools.append(
                PoolSnapshot(
                    name=f"{cls}-{j}", class_name=cls, nodes=rng.randint(2, 16),
                    devices=CLASSES[cls],
                )
            )  # fmt: skip
        roll = rng.random()
        snapshot.clusters.append(
            ClusterSnapshot.model_validate(
                {
                    "name": f"cluster-{i:04d}",
                    "labels": {"region": rng.choice(REGIONS)},
                    "taints": [{"key": "spot", "effect": "NoSchedule"}] if roll < 0.1 else [],
                    "ready": roll > 0.02,
                    "gatewayAddress": f"10.{i // 250}.{i % 250}.1",
                    "pools": pools,
                }
            )
        )
    return snapshot


def running_replicas(snapshot: FleetSnapshot, count: int, rng: random.Random) -> list[ModelReplica]:
    """``count`` replicas placed directly (not through the scheduler), whole-node accounting so
    that no pool is overfull."""
    used: dict[tuple[str, str], int] = {}
    out: list[ModelReplica] = []
    shapes = list(SHAPES)
    owners = [deployment(f"running-{i}", shapes[i % len(shapes)], rng) for i in range(count // 5)]
    while len(out) < count:
        dep = owners[len(out) % len(owners)]
        c = rng.choice(snapshot.clusters)
        engines = []
        ok = True
        for e in dep.spec.template.spec.engines:
            candidates = [
                p for p in c.pools
                if (p.class_name in EIGHT_GPU_CLASSES or e.members[0].node_selector is None
                    or all(d.count <= p.devices[0].count
                           for d in e.members[0].node_selector.devices if d.name == "gpu"))
                and (p.class_name == "h200-x8-efa" or e.members[0].role.value == "Standalone")
            ]  # fmt: skip
            pods = sum(m.pods for m in e.members) * e.copies
            free = [p for p in candidates if used.get((c.name, p.name), 0) + pods <= p.nodes]
            if not free:
                ok = False
                break
            p = free[0]
            used[(c.name, p.name)] = used.get((c.name, p.name), 0) + pods
            engines.append(_placed(e, p.name))
        if not ok:
            continue
        index = sum(
            1 for r in out if r.spec.cluster_name == c.name and r.spec.deployment == dep.name
        )
        out.append(
            ModelReplica.model_validate(
                {
                    "metadata": {
                        "name": replica_name(dep.namespace, dep.name, c.name, index),
                        "namespace": dep.namespace,
                    },
                    "spec": {"clusterName": c.name, "deployment": dep.name, "index": index,
                             "serving": dep.spec.template.spec.serving.to_wire(),
                             "engines": engines},
                }
            )
        )  # fmt: skip
    return out


def _placed(engine: Any, pool: str) -> dict[str, Any]:
    members = []
    for m in engine.members:
        doc: dict[str, Any] = {
            "role": m.role.value,
            "nodePoolName": pool,
            "template": m.template.to_wire(),
        }
        if m.worker:
            doc["worker"] = {"nodes": m.worker.nodes}
        if m.node_selector:
            doc["deviceRequests"] = [
                {
                    "name": d.name,
                    "deviceClassName": EFA if d.name == "efa" else GPU,
                    "count": d.count,
                    "selectors": [s.to_wire() for s in d.selectors],
                }
                for d in m.node_selector.devices
            ]
        members.append(doc)
    out = {"name": engine.name, "copies": engine.copies, "members": members}
    if engine.phase:
        out["phase"] = engine.phase.value
    return out


def run(
    snapshot: FleetSnapshot,
    running: Sequence[ModelReplica],
    new: Sequence[ModelDeployment],
    evaluators: Sequence[SelectorEvaluator],
) -> tuple[list[list[float]], int]:
    """Place ``new`` one by one; each placement is timed once per evaluator, on the same
    fleet state, so the figures of the evaluators are paired."""
    existing = list(running)
    timings: list[list[float]] = [[] for _ in evaluators]
    placed = 0
    for i, dep in enumerate(new):
        answers = []
        # Alternate which evaluator goes first, so neither always runs on a warmer cache.
        order = list(zip(evaluators, timings, strict=True))
        for evaluator, series in order[i % 2 :] + order[: i % 2]:
            start = time.perf_counter()
            result = place(dep, snapshot, existing, evaluator=evaluator)
            series.append((time.perf_counter() - start) * 1000)
            answers.append([r.name for r in result.placed])
        if any(sorted(a) != sorted(answers[0]) for a in answers):
            raise SystemExit(f"evaluators disagree on {dep.ref}: {answers}")
        existing.extend(result.placed)
        placed += len(result.placed)
    return timings, placed


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[18]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--existing", type=int, default=5000)
    parser.add_argument("--new", type=int, default=200)
    args = parser.parse_args(argv)

    rng = random.Random(SEED)
    snapshot = build_fleet(args.clusters, rng)
    running = running_replicas(snapshot, args.existing, rng)
    shapes = list(SHAPES)
    new = [deployment(f"new-{i}", shapes[i % len(shapes)], rng) for i in range(args.new)]

    # A long-running worker holds its fleet state for its whole life; freezing it keeps the
    # cyclic GC from re-scanning 5,000 replicas inside a timed placement (a ~300 ms pause).
    gc.collect()
    gc.freeze()

    start = time.perf_counter()
    fleet_index(snapshot)
    index_ms = (time.perf_counter() - start) * 1000
    print(
        f"fleet: {args.clusters} clusters x 8 pools ({len(CLASSES)} classes), "
        f"{len(running)} running replicas; placing {len(new)} new replicas "
        f"({', '.join(shapes)}), one deployment per call"
    )
    print(f"snapshot index (built once per snapshot): {index_ms:.1f} ms")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs, load average {load} (timings are wall clock)")
    # The first CEL compile builds celpy's parser (a one-off per process): keep it out of the
    # per-placement figures, and say what it costs.
    start = time.perf_counter()
    place(new[0], snapshot, running, evaluator=SelectorEvaluator())
    print(f"first placement in the process (builds the CEL parser): "
          f"{(time.perf_counter() - start) * 1000:.0f} ms")  # fmt: skip

    cached, uncached = SelectorEvaluator(cache=True), SelectorEvaluator(cache=False)
    (cached_t, uncached_t), placed = run(snapshot, running, new, [cached, uncached])
    for label, timings, evaluator in (
        ("cached", cached_t, cached),
        ("uncached", uncached_t, uncached),
    ):
        print(
            f"{label:>9}: median {statistics.median(timings):6.2f} ms, "
            f"p95 {_p95(timings):6.2f} ms, max {max(timings):6.2f} ms per placement; "
            f"CEL evaluations {evaluator.evaluations}, compilations {evaluator.compilations}"
        )
    for label, shape in (
        ("no pool matches", {"gpus": 16, "copies": 1}),
        ("no pool has room", {"gpus": 8, "copies": 20}),
    ):
        dep = unschedulable(shape["gpus"], shape["copies"])
        start = time.perf_counter()
        result = place(dep, snapshot, running, evaluator=cached)
        elapsed = (time.perf_counter() - start) * 1000
        print(
            f"  nothing fits ({label}): {elapsed:6.1f} ms to explain "
            f"{len(result.rejections)} clusters: {result.summary[:90]}..."
        )
    print(
        f"   placed: {placed}/{len(new)}; uncached/cached: median time "
        f"{statistics.median(uncached_t) / statistics.median(cached_t):.2f}x, "
        f"CEL evaluations {uncached.evaluations / max(cached.evaluations, 1):.1f}x"
    )


if __name__ == "__main__":
    sys.exit(main())
