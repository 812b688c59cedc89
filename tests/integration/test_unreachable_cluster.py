"""An unreachable cluster (issue 29 item 2; the scenario: ``unreachable``): a cluster whose API
hangs is noticed within one probe interval plus the probe's budget, its replicas turn Unknown at
once (the deployment's READY drops, `get replicas` says Unknown with the probe's reason), the
cluster goes NotReady after its failure threshold, and failover starts within the grace: the
replica is re-placed on the other cluster and Ready there. The figures are printed.

Its own environment (the real dev server, a simulated fleet of two H100 clusters, an in-process
worker) with short knobs (``TUNING``), the bounds derived from them as the documented bounds are
from the defaults (``unreachable.bounds``). The figures with the product's defaults (noticed
within 60 s, failover within 180 s: ``docs/operations.md``, "An unreachable cluster, and its
bounds") are ``bench/unreachable_cluster.py``'s.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio
from integration_support import Stack
from unreachable import bounds, hang_and_fail_over, two_clusters

from modelfleet.worker.tuning import Tuning

# Probe every 5 s (not 15), NotReady at the first failed probe (not the third: a hanging probe
# takes its whole 35 s budget, each one more costs 40 s here; ``test_dark_cluster`` shows a
# threshold of 2), re-placement 30 s after the first failed probe (not 120), long enough to read
# the Unknown replica with ``get replicas`` first: the defaults' path in about half the time.
TUNING = Tuning(probe_interval_seconds=5, failure_threshold=1, not_ready_grace_seconds=30)
BOUNDS = bounds(TUNING)


@pytest_asyncio.fixture
async def two(tmp_path: Path) -> AsyncIterator[Stack]:
    async with two_clusters(tmp_path, TUNING) as s:
        yield s


async def test_a_hanging_cluster_is_unknown_within_a_probe_and_fails_over_within_the_grace(
    two: Stack,
) -> None:
    figures = await hang_and_fail_over(two, BOUNDS)
    print("\n" + figures.line(BOUNDS))
    assert figures.missed(BOUNDS) == []
