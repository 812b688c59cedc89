"""Benchmark of the simulated Kubernetes API server with the official ``kubernetes`` client.

Prints, for one cluster and for many clusters served by one process:

* server-side apply throughput: ConfigMap applies per second (each apply changes a value, so each
  is a real write with a watch event), issued by a pool of client threads through
  ``DynamicClient.server_side_apply``;
* watch-event latency (median and p95): from the moment a writer thread starts the apply call to
  the moment a ``kubernetes.watch.Watch`` stream on that cluster has decoded the event. One
  watcher per cluster.

Everything runs in this process (server on its own event-loop thread, clients on threads), on
127.0.0.1 with an OS-assigned port, and is bounded by ``--applies`` and ``--max-seconds`` per
scenario. Client and server share one interpreter (and GIL), so the figures are a floor for what
the emulator can serve, not a measurement of the server alone.

Usage: ``python bench/apiserver.py [--applies 1500] [--threads 8] [--clusters 1 100]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch
from kubernetes.dynamic import DynamicClient

from modelfleet.sim.apiserver.server import FleetApiServer, serve_in_thread
from modelfleet.sim.loop_thread import LoopThread

NAMESPACE = "default"
STAMP = "bench.modelfleet.dev/sent"


@dataclass
class ClusterClients:
    name: str
    api: client.ApiClient
    configmaps: Any  # DynamicClient Resource for v1 ConfigMap
    core: client.CoreV1Api


@dataclass
class Result:
    clusters: int
    applies: int
    seconds: float
    latencies_ms: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.applies / self.seconds if self.seconds else 0.0

    def percentile(self, q: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        ordered = sorted(self.latencies_ms)
        idx = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
        return ordered[idx]


def _clients(srv: LoopThread[FleetApiServer], name: str, tmp: Path, pool: int) -> ClusterClients:
    path = srv.call(srv.target.write_kubeconfig, name, tmp / f"kubeconfig-{name}")
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=cfg)
    cfg.connection_pool_maxsize = pool
    api = client.ApiClient(cfg)
    # Every simulated cluster serves the same discovery documents; share one cache file.
    dyn = DynamicClient(api, cache_file=str(tmp / "discovery-cache.json"))
    configmaps = dyn.resources.get(api_version="v1", kind="ConfigMap")
    return ClusterClients(name, api, configmaps, client.CoreV1Api(api))


@contextmanager
def _watchers(
    clusters: list[ClusterClients], expected: int, deadline: float
) -> Iterator[list[float]]:
    """One official-client watch per cluster, recording send-to-receive latency in ms."""
    latencies: list[float] = []
    lock = threading.Lock()
    received = {"n": 0}
    done = threading.Event()
    ready = threading.Barrier(len(clusters) + 1)
    threads: list[threading.Thread] = []

    def run(cc: ClusterClients) -> None:
        rv = cc.core.list_namespaced_config_map(NAMESPACE).metadata.resource_version
        w = watch.Watch()
        ready.wait()
        timeout = max(1, int(deadline - time.monotonic()) + 1)
        for event in w.stream(
            cc.core.list_namespaced_config_map,
            NAMESPACE,
            resource_version=rv,
            timeout_seconds=timeout,
            deserialize=False,
        ):
            now = time.perf_counter()
            obj = event["object"]
            sent = (obj.get("metadata", {}).get("annotations") or {}).get(STAMP)
            if event["type"] in ("ADDED", "MODIFIED") and sent is not None:
                with lock:
                    latencies.append((now - float(sent)) * 1000.0)
                    received["n"] += 1
                    if received["n"] >= expected:
                        done.set()
            if done.is_set() or time.monotonic() > deadline:
                w.stop()

    for cc in clusters:
        t = threading.Thread(target=run, args=(cc,), daemon=True)
        t.start()
        threads.append(t)
    ready.wait()
    try:
        yield latencies
    finally:
        done.wait(max(0.0, deadline - time.monotonic()))
        done.set()
        # Nudge every stream once so that blocked watchers see the stop flag.
        for cc in clusters:
            cc.configmaps.server_side_apply(
                body=_configmap(cc.name, "bench-stop", 0, stamp=False),
                field_manager="bench",
                force_conflicts=True,
            )
        for t in threads:
            t.join(5)


def _configmap(cluster: str, name: str, value: int, *, stamp: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NAMESPACE}
    if stamp:
        meta["annotations"] = {STAMP: repr(time.perf_counter())}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta,
        "data": {"value": str(value), "cluster": cluster},
    }


def run_scenario(
    srv: LoopThread[FleetApiServer],
    n_clusters: int,
    applies: int,
    threads: int,
    max_seconds: float,
    tmp: Path,
) -> Result:
    names = [f"bench{n_clusters}-{i:03d}" for i in range(n_clusters)]
    for name in names:
        srv.call(srv.target.add_cluster, name)
    clusters = [_clients(srv, name, tmp, threads) for name in names]
    objects_per_cluster = 10
    deadline = time.monotonic() + max_seconds
    counter = {"next": 0}
    lock = threading.Lock()

    def worker() -> int:
        done = 0
        while time.monotonic() < deadline:
            with lock:
                i = counter["next"]
                if i >= applies:
                    return done
                counter["next"] = i + 1
            cc = clusters[i % n_clusters]
            name = f"cm-{(i // n_clusters) % objects_per_cluster}"
            cc.configmaps.server_side_apply(
                body=_configmap(cc.name, name, i), field_manager="bench", force_conflicts=True
            )
            done += 1
        return done

    with _watchers(clusters, applies, deadline + 5.0) as latencies:
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=threads) as pool:
            completed = sum(f.result() for f in [pool.submit(worker) for _ in range(threads)])
        elapsed = time.perf_counter() - started
    return Result(n_clusters, completed, elapsed, list(latencies))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--applies", type=int, default=1500, help="applies per scenario")
    parser.add_argument("--threads", type=int, default=8, help="client threads")
    parser.add_argument("--clusters", type=int, nargs="+", default=[1, 100])
    parser.add_argument("--max-seconds", type=float, default=20.0, help="cap per scenario")
    args = parser.parse_args()

    header = (
        f"{'clusters':>8} {'applies':>8} {'seconds':>8} {'applies/s':>10} "
        f"{'events':>7} {'p50 ms':>8} {'p95 ms':>8}"
    )
    print("modelfleet.sim.apiserver: official kubernetes client, SSA of ConfigMaps")
    print(header)
    with tempfile.TemporaryDirectory() as tmpdir, serve_in_thread() as srv:
        for n in args.clusters:
            res = run_scenario(srv, n, args.applies, args.threads, args.max_seconds, Path(tmpdir))
            p50 = statistics.median(res.latencies_ms) if res.latencies_ms else float("nan")
            print(
                f"{res.clusters:>8} {res.applies:>8} {res.seconds:>8.2f} {res.rate:>10.0f} "
                f"{len(res.latencies_ms):>7} {p50:>8.2f} {res.percentile(0.95):>8.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
