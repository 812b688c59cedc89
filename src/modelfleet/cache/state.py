"""The ModelCache workflow's whole state, carried whole across continue-as-new, and its input:
settings beside the state.

Pure: pydantic models only. Bounded: one small record per cluster the cache is on.
"""

from __future__ import annotations

from pydantic import Field

from modelfleet.api.caches import ModelCache
from modelfleet.contracts.cache_payloads import ClusterCache
from modelfleet.contracts.wire import WireModel


class CacheState(WireModel):
    """Everything the cache workflow knows that outlives a run."""

    spec: ModelCache
    # By cluster name: where the cache is staged, or being staged or removed.
    clusters: dict[str, ClusterCache] = Field(default_factory=dict)
    deleting: bool = False
    # Delete the volumes even where a workload still mounts them.
    force: bool = False


class CacheInput(WireModel):
    state: CacheState
    # Settings, passed on unchanged to the next run:
    # seconds between two looks while something hydrates, and while all is settled;
    busy_poll_seconds: float = 3.0
    idle_poll_seconds: float = 60.0
    # the first retry delay after a failed download; doubles per failure up to the maximum.
    retry_seconds: float = 5.0
    max_retry_seconds: float = 600.0

    @classmethod
    def of(cls, spec: ModelCache, **settings: float) -> CacheInput:
        """A first run's input."""
        return cls(state=CacheState(spec=spec), **settings)
