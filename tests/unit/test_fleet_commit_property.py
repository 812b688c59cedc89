"""Placement that scales out (issue 22): many workers compute proposals on their own copies of
the fleet, some stale, and send them to one ledger in any order. Whatever the interleaving, the
ledger never books a pool past its devices and never books one replica twice; every refused
proposal, recomputed on a current copy, is booked. Through the pure parts the Fleet workflow and
the ``fleet.place`` activity run (``fleet.commit``, ``fleet.changes``, ``fleet.mirror``)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelDeployment
from modelfleet.contracts.fleet_copy import (
    ChangesRequest,
    Proposal,
    SnapshotPage,
    proposal_of,
)
from modelfleet.contracts.fleet_payloads import (
    PlaceRequest,
)
from modelfleet.contracts.fleet_state import cluster_entry, shape_key
from modelfleet.contracts.status import ClusterRecord
from modelfleet.contracts.workflow_inputs import FleetLimits
from modelfleet.fleet.book import FleetBook, replica_key
from modelfleet.fleet.changes import ChangeLog
from modelfleet.fleet.commit import CommitView, book_proposal, conflict
from modelfleet.fleet.mirror import FleetMirror
from modelfleet.fleet.placing import EVALUATOR
from modelfleet.fleet.reading import changes_since, compact_clusters
from modelfleet.fleet.versions import Versions
from modelfleet.scheduling.fleet_placement import live_snapshot
from modelfleet.scheduling.index import fleet_index

API = "modelfleet.dev/v1alpha1"
GPU = "gpu.nvidia.com"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
EPOCH = "run-1"
CLUSTERS = ("a", "b", "c")
# Per cluster: two pools of 2 nodes, 4 and 8 GPUs a node (24 GPUs a cluster).
POOLS = {"small": ("x4", 4), "large": ("x8", 8)}
NODES = 2


def _class(name: str, gpus: int) -> InferenceClass:
    return InferenceClass.model_validate(
        {
            "apiVersion": API,
            "kind": "InferenceClass",
            "metadata": {"name": name},
            "spec": {
                "devices": [{"name": "gpu", "driver": GPU, "deviceClassName": GPU, "count": gpus}]
            },
        }
    )


CLASSES = {cls: _class(cls, gpus) for cls, gpus in POOLS.values()}


def _cluster(name: str) -> ClusterRecord:
    spec = InferenceCluster.model_validate(
        {
            "apiVersion": API,
            "kind": "InferenceCluster",
            "metadata": {"name": name},
            "spec": {
                "cluster": {"source": "Existing"},
                "nodePools": [
                    {"name": pool, "className": cls, "nodeCount": NODES}
                    for pool, (cls, _) in POOLS.items()
                ],
            },
        }
    )
    return ClusterRecord(spec=spec, ready=True, reason="probed", gateway_address=f"gw.{name}")


def _deployment(name: str, gpus: int) -> ModelDeployment:
    member: dict[str, Any] = {
        "role": "Standalone",
        "nodeSelector": {
            "devices": [{"name": "gpu", "count": gpus, "selectors": [{"cel": "true"}]}]
        },
        "template": {"spec": {"containers": [{"name": "engine", "image": "vllm"}]}},
    }
    return ModelDeployment.model_validate(
        {
            "apiVersion": API,
            "kind": "ModelDeployment",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {
                "replicas": 1,
                "template": {"spec": {"engines": [{"name": "e", "members": [member]}]}},
            },
        }
    )


# Deployments by name: GPUs per replica.
DEPLOYMENTS = {"one": 1, "two": 2, "three": 3, "four": 4, "six": 6}


class Ledger:
    """The Fleet's side, as its workflow holds it."""

    def __init__(self) -> None:
        self.book = FleetBook()
        self.versions = Versions(0)
        self.log = ChangeLog(start=0, cap=8)  # small: stale copies also read it whole
        self.clusters = {name: _cluster(name) for name in CLUSTERS}
        self.indexes: dict[str, Any] = {}
        # Booked and not released since: none may be booked again.
        self.live: set[str] = set()

    def index_of(self, name: str) -> Any:
        if name not in self.indexes:
            snapshot = live_snapshot(CLASSES, {name: self.clusters[name].observed()})
            self.indexes[name] = (snapshot, fleet_index(snapshot))
        return self.indexes[name][1]

    def commit(self, proposal: Proposal) -> str | None:
        view = CommitView(
            epoch=EPOCH,
            book=self.book,
            clusters=self.clusters,
            versions=self.versions,
            log=self.log,
            max_replicas=FleetLimits().max_replicas,
            grace=timedelta(minutes=5),
            now=NOW,
            index_of=self.index_of,
            evaluator=EVALUATOR,
        )
        why = conflict(view, proposal)
        if why is None:
            for name in proposal.placed_names():
                key = replica_key("ns", name)
                assert key not in self.live, f"{key} placed twice"
                self.live.add(key)
            book_proposal(self.book, self.versions, self.log, proposal, NOW)
            # Victims leave as the deployment releases them.
            self.release([name for name, _ in proposal.victims])
        return why

    def release(self, names: list[str]) -> None:
        for name in names:
            removed = self.book.remove(replica_key("ns", name))
            if removed is not None:
                self.live.discard(replica_key("ns", name))
                self.versions.released(removed[0], removed[1])
                self.log.replicas(self.versions.version, [replica_key("ns", name)])

    def sync(self, copy: FleetMirror) -> None:
        """What ``fleet.place`` does before computing: changes since, or a whole read."""
        limits = FleetLimits()
        changes = changes_since(
            ChangesRequest(epoch=copy.epoch, since=copy.version),
            epoch=EPOCH,
            now=NOW,
            limits=limits,
            version=self.versions.version,
            log=self.log,
            classes=CLASSES,
            clusters=self.clusters,
            entry_of=lambda name: cluster_entry(self.clusters[name]),
            book=self.book,
        )
        if not changes.too_old:
            copy.apply(changes)
            return
        page = SnapshotPage(
            epoch=EPOCH,
            version=self.versions.version,
            now=NOW,
            grace_seconds=limits.not_ready_grace_seconds,
            max_replicas=limits.max_replicas,
            classes=list(CLASSES.values()),
            clusters=compact_clusters(
                sorted(self.clusters), lambda name: cluster_entry(self.clusters[name])
            ),
            replicas=self.book.compact(),
        )
        copy.start_reading(page)

    def check(self) -> None:
        """No pool holds more GPUs than it has; no (deployment, cluster, index) twice."""
        used: Counter[tuple[str, str]] = Counter()
        slots: Counter[tuple[str, str, int]] = Counter()
        for key in self.book.sorted_keys():
            replica = self.book.replica(key)
            slots[(replica.spec.deployment, replica.spec.cluster_name, replica.spec.index)] += 1
            for engine in replica.spec.engines:
                for member in engine.members:
                    gpus = sum(d.count for d in member.device_requests or []) * member.pods
                    used[(replica.spec.cluster_name, member.node_pool_name)] += gpus
        for (cluster, pool), gpus in used.items():
            assert gpus <= NODES * POOLS[pool][1], f"{cluster}/{pool} overcommitted: {gpus}"
        assert max(slots.values(), default=1) == 1


step = st.one_of(
    st.tuples(st.just("propose"), st.integers(0, 3), st.sampled_from(sorted(DEPLOYMENTS))),
    st.tuples(st.just("commit"), st.integers(0, 20), st.integers(0, 6)),
    st.tuples(st.just("sync"), st.integers(0, 3), st.just(0)),
    st.tuples(st.just("release"), st.sampled_from(sorted(DEPLOYMENTS)), st.integers(0, 3)),
)


@settings(max_examples=60, deadline=None)
@example(
    steps=[
        ("propose", 0, "four"),
        ("propose", 1, "six"),
        ("propose", 2, "two"),
        ("commit", 0, 0),
        ("commit", 0, 1),
        ("commit", 0, 2),
    ]
)
@given(steps=st.lists(step, min_size=5, max_size=60))
def test_concurrent_proposals_never_overcommit_or_place_twice(steps: list[Any]) -> None:
    ledger = Ledger()
    copies = [FleetMirror() for _ in range(4)]
    for copy in copies:
        ledger.sync(copy)
    pending: list[Proposal] = []
    booked = refused = 0
    for n, (kind, a, b) in enumerate(steps):
        if kind == "propose":
            copy = copies[a]
            deployment = _deployment(b, DEPLOYMENTS[b])
            have = len(copy.book.replicas_of(("ns", b)))
            request = PlaceRequest(request_id=f"r{n}", deployment=deployment, desired=have + 2)
            pending.append(
                proposal_of(
                    copy.propose(request, deployment),
                    request_id=request.request_id,
                    epoch=copy.epoch,
                    base=copy.version,
                    namespace="ns",
                    deployment=b,
                    desired=request.desired,
                )
            )
        elif kind == "commit" and pending:
            proposal = pending.pop(a % len(pending))
            why = ledger.commit(proposal)
            if why is None:
                booked += 1
            else:
                refused += 1
                # Recomputed on a current copy, as the activity does: it is booked.
                copy = copies[b % len(copies)]
                ledger.sync(copy)
                deployment = _deployment(proposal.deployment, DEPLOYMENTS[proposal.deployment])
                request = PlaceRequest(
                    request_id=proposal.request_id, deployment=deployment, desired=proposal.desired
                )
                again = proposal_of(
                    copy.propose(request, deployment),
                    request_id=proposal.request_id,
                    epoch=copy.epoch,
                    base=copy.version,
                    namespace="ns",
                    deployment=proposal.deployment,
                    desired=proposal.desired,
                )
                assert ledger.commit(again) is None
        elif kind == "sync":
            ledger.sync(copies[a])
        elif kind == "release":
            names = sorted(r.name for r in ledger.book.replicas_of(("ns", a)))
            ledger.release(names[:b])
        ledger.check()
    # Every copy, brought up to date, holds exactly the ledger.
    for copy in copies:
        ledger.sync(copy)
        assert copy.book.sorted_keys() == ledger.book.sorted_keys()
        assert copy.version == ledger.versions.version


def _proposal(copy: FleetMirror, name: str, gpus: int, desired: int) -> Proposal:
    deployment = _deployment(name, gpus)
    request = PlaceRequest(request_id=name, deployment=deployment, desired=desired)
    return proposal_of(
        copy.propose(request, deployment),
        request_id=name,
        epoch=copy.epoch,
        base=copy.version,
        namespace="ns",
        deployment=name,
        desired=desired,
    )


def test_a_proposal_whose_pools_were_taken_since_its_version_is_refused() -> None:
    ledger = Ledger()
    first, second = FleetMirror(), FleetMirror()
    ledger.sync(first)
    ledger.sync(second)
    # Six GPUs a replica: only the 8-GPU nodes take one, two per cluster.
    everything = _proposal(first, "big", 6, desired=6)
    one_more = _proposal(second, "other", 6, desired=1)
    assert [row[0] for row in one_more.placed] == ["a"]
    assert ledger.commit(everything) is None
    name = one_more.placed_names()[0]
    assert ledger.commit(one_more) == f"pool a/large has no room left for {name}"
    ledger.check()
    # Recomputed on a current copy, it says why it cannot be placed, and books nothing.
    ledger.sync(second)
    again = _proposal(second, "other", 6, desired=1)
    assert again.placed == []
    assert again.summary.startswith("0/3 clusters fit")
    assert ledger.commit(again) is None


def test_other_deployments_booked_on_a_cluster_since_are_no_conflict_while_it_has_room() -> None:
    ledger = Ledger()
    first, second = FleetMirror(), FleetMirror()
    ledger.sync(first)
    ledger.sync(second)
    a = _proposal(first, "one", 1, desired=1)
    b = _proposal(second, "two", 2, desired=1)
    assert [row[0] for row in b.placed] == ["a"]
    assert ledger.commit(a) is None
    assert ledger.commit(b) is None
    ledger.check()


def test_stale_foreign_or_self_overtaken_proposals_are_refused() -> None:
    ledger = Ledger()
    first, second = FleetMirror(), FleetMirror()
    ledger.sync(first)
    ledger.sync(second)
    mine = _proposal(first, "one", 1, desired=1)
    again = _proposal(second, "one", 1, desired=2)
    assert ledger.commit(mine) is None
    # The same deployment's replicas changed since ``again``'s version: it would reuse index 0.
    assert ledger.commit(again) == "the replicas of ns/one changed"
    assert ledger.commit(again.model_copy(update={"base": -1})) is not None
    other = again.model_copy(update={"epoch": "another", "base": ledger.versions.version})
    assert ledger.commit(other) == "the proposal was made for another Fleet"


def test_a_compact_proposal_is_checked_as_a_whole_one_was() -> None:
    ledger = Ledger()
    copy = FleetMirror()
    ledger.sync(copy)
    good = _proposal(copy, "two", 2, desired=2)
    [skey] = good.shapes
    row = good.placed[0]
    # A shape missing, not its content's, or no replica: refused, nothing booked.
    assert ledger.commit(good.model_copy(update={"shapes": {}})) == (
        f"shape {skey} of a placed replica is not in the proposal"
    )
    other = {**good.shapes[skey], "spec": {**good.shapes[skey]["spec"], "x": 1}}
    assert ledger.commit(good.model_copy(update={"shapes": {skey: other}})) == (
        f"shape {skey} of the proposal is not its content's"
    )
    # A row naming fewer pools than its template has members would charge nothing.
    short = (row[0], row[1], row[2], (), row[4])
    why = ledger.commit(good.model_copy(update={"placed": [short]}))
    assert why is not None
    assert "names 0 pools" in why
    garbage = {"spec": {"engines": "none"}}
    bad = (row[0], row[1], shape_key(garbage), row[3], row[4])
    why = ledger.commit(good.model_copy(update={"placed": [bad], "shapes": {bad[2]: garbage}}))
    assert why is not None
    assert why.startswith(f"shape {bad[2]} of the proposal is not a valid replica")
    negative = (row[0], -1, row[2], row[3], "m-x")
    assert ledger.commit(good.model_copy(update={"placed": [negative]})) == (
        "replica ns/m-x has index -1"
    )
    # One replica named twice would be placed twice.
    twice = good.model_copy(update={"placed": [row, row]})
    assert ledger.commit(twice) == f"replica ns/{good.placed_names()[0]} is already placed"
    # Kept or removed replicas must be the deployment's booked ones.
    assert ledger.commit(good.model_copy(update={"kept": ["ghost"]})) == (
        "replica ns/ghost is not booked for ns/two"
    )
    assert len(ledger.book) == 0
    assert ledger.commit(good) is None
    ledger.check()
    # A proposal naming another deployment's replica as its own is refused.
    ledger.sync(copy)
    theirs = _proposal(copy, "one", 1, desired=1)
    stolen = theirs.model_copy(update={"victims": [(good.placed_names()[0], "stolen")]})
    assert ledger.commit(stolen) == f"replica ns/{good.placed_names()[0]} is not booked for ns/one"


def test_a_proposal_is_made_only_of_its_own_deployment() -> None:
    copy = FleetMirror()
    Ledger().sync(copy)
    deployment = _deployment("one", 1)
    response = copy.propose(
        PlaceRequest(request_id="r", deployment=deployment, desired=1), deployment
    )
    with pytest.raises(ValueError, match="is not of ns/two"):
        proposal_of(
            response,
            request_id="r",
            epoch=copy.epoch,
            base=copy.version,
            namespace="ns",
            deployment="two",
            desired=1,
        )
