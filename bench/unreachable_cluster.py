"""An unreachable cluster with the product's DEFAULT knobs (issue 29 item 2): the figures
``docs/operations.md`` ("An unreachable cluster, and its bounds") quotes. The scenario is the
integration test's (``tests/integration/unreachable.py``; ``test_unreachable_cluster`` runs it
with short knobs in a third of the time): the real dev server, a simulated fleet of two H100
clusters, an in-process worker, a 2-replica deployment with a replica on each; one cluster's API
hangs. Printed: when its replica turned Unknown, when the cluster went NotReady and when the
replacement was Ready on the other cluster, each from the silence, beside the bounds (noticed
within 60 s, failover started within 180 s, plus one rollout). Exits 1 when a bound is missed.
About 3.5 minutes; loopback only.

    .venv/bin/python bench/unreachable_cluster.py [--probe-seconds N] [--failure-threshold N]
        [--grace-seconds N]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from unreachable import bounds, hang_and_fail_over, two_clusters  # noqa: E402

from modelfleet.worker.tuning import Tuning  # noqa: E402


async def main(tuning: Tuning) -> int:
    b = bounds(tuning)
    with tempfile.TemporaryDirectory(prefix="bench-unreachable-") as tmp:
        async with two_clusters(Path(tmp), tuning) as stack:
            figures = await hang_and_fail_over(stack, b)
    print(figures.line(b))
    missed = figures.missed(b)
    for m in missed:
        print(f"MISSED: {m}")
    return 1 if missed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--probe-seconds", type=int, default=None, help="default: 15")
    parser.add_argument("--failure-threshold", type=int, default=None, help="default: 3")
    parser.add_argument("--grace-seconds", type=int, default=None, help="default: 120")
    args = parser.parse_args()
    knobs = Tuning(
        probe_interval_seconds=args.probe_seconds,
        failure_threshold=args.failure_threshold,
        not_ready_grace_seconds=args.grace_seconds,
    )
    sys.exit(asyncio.run(main(knobs)))
