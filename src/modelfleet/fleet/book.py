"""The Fleet's allocation ledger in memory: every placed replica as its compact row
(:mod:`modelfleet.contracts.fleet_state`), indexed by deployment and by cluster, so that
continue-as-new only copies rows and never re-serialises 10,000 replicas, and a new run starts
without rebuilding them: a ModelReplica object is built from its row the first time a placement
(or the ``view`` query) reads it, then kept.

Deterministic and pure (no I/O, no Temporal calls): the Fleet workflow carries it out.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any

from modelfleet.api.deployments import ModelReplica
from modelfleet.api.naming import replica_name
from modelfleet.contracts.fleet_payloads import ReplicaPage, ReplicaPageRequest
from modelfleet.contracts.fleet_state import (
    CompactLedger,
    DeploymentRows,
    ReplicaRow,
    replica_from_row,
    replica_row,
    replica_shape,
    shape_key,
    shape_replica,
)

DeploymentKey = tuple[str, str]  # (namespace, name)


def replica_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


class _Replicas(Collection[ModelReplica]):
    """Some of the book's replicas, built on first read."""

    def __init__(self, book: FleetBook, keys: Collection[str]) -> None:
        self._book = book
        self._keys = keys

    def __iter__(self) -> Iterator[ModelReplica]:
        return (self._book.replica(k) for k in self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, item: object) -> bool:
        return any(r is item for r in self)


class _ByCluster(Mapping[str, Collection[ModelReplica]]):
    """The book's replicas per cluster, read-only, as the scheduler takes them."""

    def __init__(self, book: FleetBook) -> None:
        self._book = book

    def __getitem__(self, cluster: str) -> Collection[ModelReplica]:
        keys = self._book.keys_on(cluster)
        if not keys:
            raise KeyError(cluster)
        return _Replicas(self._book, keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._book._by_cluster)

    def __len__(self) -> int:
        return len(self._book._by_cluster)


class FleetBook:
    def __init__(self) -> None:
        self._rows: dict[str, ReplicaRow] = {}
        self._owner: dict[str, DeploymentKey] = {}
        self._built: dict[str, ModelReplica] = {}
        self._by_deployment: defaultdict[DeploymentKey, dict[str, None]] = defaultdict(dict)
        self._by_cluster: defaultdict[str, dict[str, None]] = defaultdict(dict)
        self._shapes: dict[str, dict[str, Any]] = {}
        self._shape_replicas: dict[str, ModelReplica] = {}
        self._shape_users: defaultdict[str, int] = defaultdict(int)
        self.by_cluster = _ByCluster(self)

    # --- loading and saving ------------------------------------------------------------------

    @classmethod
    def from_compact(cls, ledger: CompactLedger) -> FleetBook:
        book = cls()
        book._shapes = dict(ledger.shapes)
        for group in ledger.deployments:
            owner = (group.namespace, group.name)
            for row in group.rows:
                name = row[4] or _derived(owner, row)
                book._index(replica_key(owner[0], name), row, owner)
        return book

    @classmethod
    def from_replicas(cls, replicas: Iterable[ModelReplica]) -> FleetBook:
        book = cls()
        for replica in replicas:
            book.add(replica)
        return book

    def compact(self, keys: Iterable[str] | None = None) -> CompactLedger:
        """The book in compact form; only ``keys`` (those in the book) when given."""
        chosen = sorted(self._rows) if keys is None else sorted(k for k in keys if k in self._rows)
        groups: defaultdict[DeploymentKey, list[ReplicaRow]] = defaultdict(list)
        for key in chosen:
            groups[self._owner[key]].append(self._rows[key])
        used = {self._rows[k][2] for k in chosen}
        return CompactLedger(
            shapes={k: self._shapes[k] for k in sorted(used)},
            deployments=[
                DeploymentRows(namespace=ns, name=name, rows=rows)
                for (ns, name), rows in sorted(groups.items())
            ],
        )

    def rows_page(self, after: str, limit: int) -> tuple[CompactLedger, str]:
        """Up to ``limit`` rows by key after ``after``, compact, and the key to continue after
        ("" at the end): what a worker's copy reads the book in, no replica built."""
        keys = self.sorted_keys()
        start = bisect.bisect_right(keys, after) if after else 0
        chosen = keys[start : start + limit]
        more = start + limit < len(keys)
        return self.compact(chosen), chosen[-1] if more and chosen else ""

    def merge(self, ledger: CompactLedger) -> list[tuple[str, str | None, str]]:
        """Add (or replace) the rows of ``ledger``; per row its key, the cluster it was on
        before (None if new) and the cluster it is on now."""
        changed = []
        for skey, shape in ledger.shapes.items():
            self._shapes.setdefault(skey, shape)
        for group in ledger.deployments:
            owner = (group.namespace, group.name)
            for row in group.rows:
                name = row[4] or _derived(owner, row)
                key = replica_key(owner[0], name)
                before = self.remove(key)
                self._shapes.setdefault(row[2], ledger.shapes[row[2]])
                self._index(key, row, owner)
                changed.append((key, None if before is None else before[1], row[0]))
        return changed

    # --- reading -------------------------------------------------------------------------------

    def replica(self, key: str) -> ModelReplica:
        built = self._built.get(key)
        if built is None:
            row = self._rows[key]
            owner = self._owner[key]
            shape = self._shape_replicas.get(row[2])
            if shape is None:
                shape = self._shape_replicas[row[2]] = shape_replica(self._shapes[row[2]])
            built = self._built[key] = replica_from_row(owner[0], owner[1], row, shape)
        return built

    def charged_form(self, key: str) -> tuple[ModelReplica, tuple[str, ...]]:
        """What the replica charges, without building it: its template's shape (one object per
        shape) and its pool per member (see ``scheduling.charging.shape_groups``)."""
        row = self._rows[key]
        shape = self._shape_replicas.get(row[2])
        if shape is None:
            shape = self._shape_replicas[row[2]] = shape_replica(self._shapes[row[2]])
        return shape, tuple(row[3])

    def row(self, key: str) -> ReplicaRow:
        return self._rows[key]

    def shape(self, skey: str) -> dict[str, Any] | None:
        """The shape stored under ``skey``, if a booked replica uses it."""
        return self._shapes.get(skey)

    def shape_form(self, skey: str, shape: dict[str, Any]) -> ModelReplica:
        """The replica standing for shape ``skey`` (``charged_form``'s), built from ``shape``
        when no booked replica uses it yet; kept once one does."""
        built = self._shape_replicas.get(skey)
        if built is None:
            built = shape_replica(self._shapes.get(skey, shape))
            if skey in self._shapes:
                self._shape_replicas[skey] = built
        return built

    def count_of(self, owner: DeploymentKey) -> int:
        return len(self._by_deployment.get(owner, {}))

    def sorted_keys(self) -> list[str]:
        return sorted(self._rows)

    def keys_on(self, cluster: str) -> Collection[str]:
        return self._by_cluster.get(cluster, {}).keys()

    def pools_on(self, cluster: str) -> dict[str, list[str]]:
        """Per node pool of ``cluster``, the replicas with a member on it."""
        out: dict[str, list[str]] = {}
        for key in sorted(self.keys_on(cluster)):
            for pool in sorted(set(self._rows[key][3])):
                out.setdefault(pool, []).append(key)
        return out

    def page(self, request: ReplicaPageRequest) -> ReplicaPage:
        """Placed replicas in key order, a bounded page at a time (``ReplicaPageRequest``)."""
        keys = sorted(self.keys_on(request.cluster)) if request.cluster else self.sorted_keys()
        start = bisect.bisect_right(keys, request.after) if request.after else 0
        page: list[ModelReplica] = []
        for i in range(start, len(keys)):
            replica = self.replica(keys[i])
            if request.namespace and replica.namespace != request.namespace:
                continue
            if len(page) == request.limit:
                return ReplicaPage(replicas=page, next_after=keys[i - 1])
            page.append(replica)
        return ReplicaPage(replicas=page)

    def replicas_of(self, owner: DeploymentKey) -> list[ModelReplica]:
        return [self.replica(k) for k in self._by_deployment.get(owner, {})]

    def clusters_of(self, owner: DeploymentKey) -> set[str]:
        return {self._rows[k][0] for k in self._by_deployment.get(owner, {})}

    def owners_on(self, cluster: str) -> set[DeploymentKey]:
        return {self._owner[k] for k in self.keys_on(cluster)}

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, key: object) -> bool:
        return key in self._rows

    def owner(self, key: str) -> DeploymentKey:
        return self._owner[key]

    def cluster_of(self, key: str) -> str | None:
        row = self._rows.get(key)
        return None if row is None else row[0]

    # --- changes -------------------------------------------------------------------------------

    def add(self, replica: ModelReplica) -> None:
        owner = (replica.namespace or "", replica.spec.deployment)
        key = replica_key(owner[0], replica.name)
        if key in self._rows:
            self.remove(key)
        shape = replica_shape(replica)
        skey = shape_key(shape)
        self._shapes.setdefault(skey, shape)
        self._index(key, replica_row(replica, skey), owner)
        self._built[key] = replica

    def add_rows(
        self, owner: DeploymentKey, rows: Iterable[ReplicaRow], shapes: Mapping[str, dict[str, Any]]
    ) -> list[str]:
        """Book ``owner``'s replicas as rows (``shapes`` holds those the book does not); their
        keys. No replica is built: the rows are what the book keeps."""
        keys = []
        for row in rows:
            key = replica_key(owner[0], row[4] or _derived(owner, row))
            if key in self._rows:
                self.remove(key)
            self._shapes.setdefault(row[2], shapes[row[2]])
            self._index(key, row, owner)
            keys.append(key)
        return keys

    def remove(self, key: str) -> tuple[DeploymentKey, str] | None:
        """Forget a replica; returns its (owner, cluster) when it was in the book."""
        row = self._rows.pop(key, None)
        if row is None:
            return None
        self._built.pop(key, None)
        owner = self._owner.pop(key)
        mine = self._by_deployment[owner]
        mine.pop(key, None)
        if not mine:
            del self._by_deployment[owner]
        on = self._by_cluster[row[0]]
        on.pop(key, None)
        if not on:
            del self._by_cluster[row[0]]
        self._shape_users[row[2]] -= 1
        if self._shape_users[row[2]] <= 0:
            del self._shape_users[row[2]]
            self._shapes.pop(row[2], None)
            self._shape_replicas.pop(row[2], None)
        return owner, row[0]

    def _index(self, key: str, row: ReplicaRow, owner: DeploymentKey) -> None:
        self._rows[key] = row
        self._owner[key] = owner
        self._by_deployment[owner][key] = None
        self._by_cluster[row[0]][key] = None
        self._shape_users[row[2]] += 1


def _derived(owner: DeploymentKey, row: ReplicaRow) -> str:
    return replica_name(owner[0], owner[1], row[0], row[1])
