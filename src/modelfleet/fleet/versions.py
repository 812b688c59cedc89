"""The Fleet's change versions, what its ``placement_current`` query answers from: one counter
bumped on every change, and the version at which the class catalog, each cluster and each
deployment's replicas last changed. Memory only: a check older than the run's start (its
``horizon``) is answered "changed", so nothing needs carrying across continue-as-new but the
counter. Pure: no I/O, no Temporal calls.
"""

from __future__ import annotations

from collections.abc import Iterable

DeploymentKey = tuple[str, str]  # (namespace, name)


class Versions:
    def __init__(self, carried: int) -> None:
        self.version = carried + 1
        self.horizon = self.version
        self.catalog = self.version
        self.clusters: dict[str, int] = {}
        self.deployments: dict[DeploymentKey, int] = {}
        # Deployments whose last placement was short of capacity: any change might make room.
        self.short: set[DeploymentKey] = set()

    def bump(self) -> int:
        self.version += 1
        return self.version

    def cluster_changed(self, name: str) -> None:
        self.clusters[name] = self.bump()

    def catalog_changed(self) -> None:
        self.catalog = self.bump()

    def deployment_changed(self, owner: DeploymentKey) -> None:
        self.deployments[owner] = self.bump()

    def released(self, owner: DeploymentKey, cluster: str) -> None:
        """A replica of ``owner`` released from ``cluster``: freed capacity there may change
        where others' replicas go."""
        self.deployment_changed(owner)
        self.clusters[cluster] = self.version

    def placed(self, owner: DeploymentKey, *, short: bool) -> None:
        if short:
            self.short.add(owner)
        else:
            self.short.discard(owner)

    def current(self, owner: DeploymentKey, version: int, clusters: Iterable[str]) -> bool:
        """Whether nothing that could change ``owner``'s placement happened since ``version``:
        its replicas, the ``clusters`` they are on and the class catalog are unchanged, and it
        was not short of capacity."""
        if owner in self.short:
            return False
        if version == self.version:
            return True
        if version < self.horizon or version > self.version:
            return False
        if self.catalog > version or self.deployments.get(owner, 0) > version:
            return False
        return all(self.clusters.get(c, 0) <= version for c in clusters)
