"""The controller at scale (issue 24, item 7): N modelfleet objects created at once on a
simulated management cluster, timed until every one has converged (Ready for its generation,
handed to its workflow exactly once), for a small and a large N in the same run, with the
ratio of their per-object times.

Set-up: ``modelfleet dev``'s environment (a real Temporal dev server, the quickstart's simulated
fleet, a worker in this process) with its management cluster (the CRDs installed, the
controller running). The objects are ModelEndpoints (records in the endpoint directory: what is
measured is the controller's list/watch/queue/apply/status path, not engine start-ups), created
by 8 client threads. ``--error-rate`` makes that share of the management API's requests answer
500 while the controller works. Every wait is bounded by ``--timeout``. The machine is shared:
read the figures with the load average beside them.

    .venv/bin/python bench/controller.py [--counts 100 1000] [--error-rate 0] [--timeout 900]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shlex
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from modelfleet.adapters.kube_errors import KubeUnavailableError
from modelfleet.adapters.management import ManagementCluster
from modelfleet.cli.devenv import DevEnvironment, dev_environment
from modelfleet.cli.resources import directory_endpoints

QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "quickstart"


def endpoint(namespace: str, i: int) -> dict[str, object]:
    return {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "ModelEndpoint",
        "metadata": {"name": f"ep-{i:05d}", "namespace": namespace},
        "spec": {"url": f"http://127.0.0.1:9/v{i}"},
    }


def create(api: ManagementCluster, manifest: dict[str, object]) -> None:
    """Create, asked again while the API answers 500 (``--error-rate``)."""
    for _ in range(50):
        try:
            api.create(manifest)
            return
        except KubeUnavailableError:
            time.sleep(0.05)
    raise RuntimeError("the management API kept answering 500")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} (1/5/15 min) on {os.cpu_count()} CPUs"


def converged(api: ManagementCluster, namespace: str) -> int:
    ready = 0
    for item in api.list_versioned("modelfleet.dev/v1alpha1", "ModelEndpoint").items:
        if item["metadata"].get("namespace") != namespace:
            continue
        status = item.get("status") or {}
        fresh = status.get("observedGeneration") == item["metadata"].get("generation")
        ok = any(
            c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", [])
        )
        ready += bool(fresh and ok)
    return ready


async def run(count: int, api: ManagementCluster, env: DevEnvironment, limit: float) -> float:
    namespace = f"bench-{count}"
    await asyncio.to_thread(
        create, api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    start = time.monotonic()
    # Not a ``with`` block: its exit joins the threads on this loop, which serves their requests.
    pool = ThreadPoolExecutor(8)
    try:
        await asyncio.gather(
            *(
                asyncio.get_running_loop().run_in_executor(
                    pool, create, api, endpoint(namespace, i)
                )
                for i in range(count)
            )
        )
    finally:
        pool.shutdown(wait=False)
    created = time.monotonic() - start
    deadline = start + limit
    done = 0
    while time.monotonic() < deadline:
        with contextlib.suppress(KubeUnavailableError):  # a 500 to the bench's own list
            done = await asyncio.to_thread(converged, api, namespace)
        if done >= count:
            break
        await asyncio.sleep(0.5)
    seconds = time.monotonic() - start
    records = [e.name for e in await directory_endpoints(env.client, namespace)]
    print(
        f"{count:>6} objects: created in {created:6.1f} s, converged {done}/{count} in "
        f"{seconds:6.1f} s ({seconds / count * 1000:6.1f} ms/object); directory holds "
        f"{len(records)} ({len(set(records))} distinct); {load()}"
    )
    return seconds / count


async def main(args: argparse.Namespace) -> None:
    print(f"command: {shlex.join([sys.executable, *sys.argv])}")
    with tempfile.TemporaryDirectory() as tmp:
        async with dev_environment(
            Path(tmp),
            [str(QUICKSTART / "classes.yaml"), str(QUICKSTART / "clusters.yaml")],
            ui=False,
            startup_seconds=0.3,
            management=True,
        ) as env:
            assert env.management_kubeconfig is not None
            api = ManagementCluster(env.management_kubeconfig)
            if args.error_rate:
                env.fleet.server.set_faults("management", {"error_rate_500": args.error_rate})
            per_object = [await run(n, api, env, args.timeout) for n in args.counts]
            if len(per_object) > 1:
                print(
                    f"per-object time, {args.counts[-1]} vs {args.counts[0]} objects: "
                    f"{per_object[-1] / per_object[0]:.2f}x (same run; {load()})"
                )
            else:
                print("one count given: no same-run ratio (pass two, e.g. --counts 100 1000)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--error-rate", type=float, default=0.0)
    parser.add_argument("--timeout", type=float, default=900.0)
    asyncio.run(main(parser.parse_args()))
