"""Where a deployment that mounts a ModelCache may get new replicas, from how the cache stands on
each cluster (the summary its workflow reports to the Fleet: ``Ready``, ``Hydrating 40%``,
``Pending: <why>``, ``Failed: <why>``, ``Deleting``; absent when its selector leaves the cluster
out).

The rule (issue 14): a cluster where the cache is staged or being staged is eligible, and Ready
ones are preferred. A replica placed on a cluster that is still hydrating waits in its step
``wait-model-cache`` before it creates gangs, so the capacity is held while the weights arrive.

* ``Ready``: eligible, tried first.
* ``Hydrating n%`` and ``Pending`` (the volume is being created or bound): eligible, tried after
  every Ready cluster.
* ``Pending`` because the volume cannot bind (its StorageClass does not exist): refused, staging
  cannot happen there until someone fixes the class.
* ``Failed``: refused. The cache workflow retries with back-off, but a failure is as often one a
  user must fix (a 401) as a transient one, and a replica there would hold GPUs for nothing. When
  the retry starts the state turns ``Hydrating`` again, the Fleet hears of the change and asks
  short deployments to place again, so the cluster becomes eligible then.
* ``Deleting`` or not reported: refused.

Layer rule: pure (no I/O, no Temporal, no SDKs).
"""

from __future__ import annotations

from enum import IntEnum

# How the staged state reads (``ClusterCache.summary`` in the cache payloads).
CACHE_READY = "Ready"
_STAGING_PREFIXES = ("Hydrating", "Pending")
# The words the cache activity uses when a claim can never bind (``activities.caches``).
_CANNOT_BIND = "cannot bind"


class CacheRank(IntEnum):
    """Order of preference among eligible clusters: lower goes first."""

    READY = 0
    STAGING = 1


def cache_rank(state: str | None) -> CacheRank | None:
    """``state`` (the cache's summary on one cluster, None when not staged there) as a rank,
    or None when no new replica may go there."""
    if state is None:
        return None
    if state == CACHE_READY:
        return CacheRank.READY
    if state.startswith(_STAGING_PREFIXES) and _CANNOT_BIND not in state:
        return CacheRank.STAGING
    return None
