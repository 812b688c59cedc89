"""The Fleet's change log: which keys (a replica, a cluster, the class catalog) changed at which
version, so a worker's copy of the fleet at version V is brought up to date with what changed
since V instead of reading the whole fleet (issue 22). Only keys are logged, each once at its
latest version (the answer reads their current state); the log keeps at most ``cap`` keys and
remembers the newest version it forgot (``floor``): a copy older than that reads the fleet
again in pages. Memory only: a new run's log starts empty at its start version.

It also keeps, per cluster, the version at which its record (spec, readiness, reported pools,
caches, draining) last changed: what a proposal's commit checks. Replicas placed on or released
from a cluster do not count there: the commit charges the cluster's pools again instead.
Bounded by the clusters.

Pure: no I/O, no Temporal calls.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

CATALOG = ("catalog", "")
MAX_LOGGED_KEYS = 4096

Key = tuple[str, str]  # ("replica", "ns/name") | ("cluster", name) | CATALOG


@dataclass(frozen=True, slots=True)
class Since:
    """What changed since a version: the keys, or ``too_old`` when the log cannot say."""

    too_old: bool
    catalog: bool = False
    clusters: tuple[str, ...] = ()
    replicas: tuple[str, ...] = ()


@dataclass(slots=True)
class ChangeLog:
    start: int
    cap: int = MAX_LOGGED_KEYS
    floor: int = field(init=False)
    # The version at which the class catalog last changed in this run (0: not since the start).
    catalog_at: int = field(init=False, default=0)
    _keys: dict[Key, int] = field(init=False, default_factory=dict)
    # Per cluster: the version at which its record last changed.
    touched: dict[str, int] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.floor = self.start

    def record(self, version: int, key: Key) -> None:
        self._keys.pop(key, None)
        self._keys[key] = version
        while len(self._keys) > self.cap:
            oldest = next(iter(self._keys))
            self.floor = max(self.floor, self._keys.pop(oldest))

    def cluster(self, version: int, name: str) -> None:
        self.record(version, ("cluster", name))
        self.touched[name] = version

    def replicas(self, version: int, keys: Iterable[str]) -> None:
        for key in keys:
            self.record(version, ("replica", key))

    def catalog(self, version: int) -> None:
        self.record(version, CATALOG)
        self.catalog_at = version

    def since(self, version: int, *, now: int, limit: int) -> Since:
        """The keys changed after ``version`` (the Fleet is at ``now``): ``too_old`` when the
        log no longer covers it, it is not a version of this run, or more than ``limit`` keys
        changed. Costs what changed, not what the fleet holds."""
        if version < self.floor or version > now:
            return Since(too_old=True)
        catalog = False
        clusters: list[str] = []
        replicas: list[str] = []
        for key in reversed(self._keys):
            if self._keys[key] <= version:
                break
            if len(clusters) + len(replicas) >= limit:
                return Since(too_old=True)
            kind, name = key
            if kind == "replica":
                replicas.append(name)
            elif kind == "cluster":
                clusters.append(name)
            else:
                catalog = True
        return Since(
            too_old=False,
            catalog=catalog,
            clusters=tuple(sorted(clusters)),
            replicas=tuple(sorted(replicas)),
        )

    def changed_since(self, version: int, clusters: Iterable[str]) -> list[str]:
        """Those of ``clusters`` whose record changed after ``version``; every one, when
        ``version`` is from before the run."""
        if version < self.start:
            return sorted(set(clusters))
        return sorted({c for c in clusters if self.touched.get(c, 0) > version})
