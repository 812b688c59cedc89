"""The Fleet's compact state is lossless, and its kept ledger cache changes no placement."""

from __future__ import annotations

from datetime import UTC, datetime

from placement_builders import (
    cluster,
    deployment,
    fleet,
    gang,
    gpu,
    pool,
    standalone,
)

from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelReplica
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.contracts.fleet_payloads import PlaceResponse, ReplicaRemoval
from modelfleet.contracts.fleet_state import (
    answer_from_compact,
    cluster_entry,
    cluster_record,
    compact_answer,
    replica_from_row,
    replica_row,
    replica_shape,
    shape_key,
    shape_replica,
)
from modelfleet.contracts.kube_payloads import PoolObservation
from modelfleet.contracts.status import ClusterRecord
from modelfleet.fleet.book import FleetBook
from modelfleet.scheduling.charging import LedgerCache
from modelfleet.scheduling.placement import place


def roundtrip(replica: ModelReplica) -> ModelReplica:
    shape = replica_shape(replica)
    row = replica_row(replica, shape_key(shape))
    return replica_from_row(
        replica.namespace or "", replica.spec.deployment, row, shape_replica(shape)
    )


def placed_replicas() -> list[ModelReplica]:
    snapshot = fleet(
        cluster("east", pool("a", 4, gpu(8)), pool("b", 4, gpu(8))),
        cluster("west", pool("a", 4, gpu(8))),
    )
    dep = deployment(
        standalone(2, name="prefill"),
        gang(8, 8, name="decode"),
        replicas=3,
        labels={"team": "ml"},
        mode="PrefillDecode",
    )
    result = place(dep, snapshot, [])
    assert len(result.placed) == 3
    return result.placed


def test_replicas_round_trip_through_rows_and_shapes() -> None:
    replicas = placed_replicas()
    renamed = replicas[0].model_copy(
        update={"metadata": replicas[0].metadata.model_copy(update={"name": "kept-name"})}
    )
    for replica in [*replicas, renamed]:
        assert roundtrip(replica) == replica
    # One shape for every replica of one template.
    assert len({shape_key(replica_shape(r)) for r in replicas}) == 1


def test_book_survives_compaction_and_forgets_released_shapes() -> None:
    replicas = placed_replicas()
    # Replicas as the scheduler stamps them (the managed labels are derived again from rows).
    snapshot = fleet(cluster("east", pool("a", 4, gpu(8))))
    others = place(deployment(name="other", namespace="team-b", replicas=3), snapshot, []).placed
    book = FleetBook.from_replicas([*replicas, *others])
    again = FleetBook.from_compact(book.compact())
    assert [again.replica(k) for k in again.sorted_keys()] == [
        book.replica(k) for k in book.sorted_keys()
    ]
    assert again.keys_on("west") == book.keys_on("west")
    for r in others:
        assert again.remove(f"team-b/{r.name}") == (("team-b", "other"), "east")
    assert len(again.compact().shapes) == 1  # the released deployment's shape is gone
    assert len(again) == len(replicas)


def test_cluster_records_round_trip_with_shared_layouts() -> None:
    spec = InferenceCluster.model_validate(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "InferenceCluster",
            "metadata": {"name": "c1", "labels": {"region": "eu"}},
            "spec": {
                "cluster": {"source": "Existing"},
                "taints": [{"key": "spot", "effect": "NoSchedule"}],
                "nodePools": [
                    {"name": "a", "className": "h100", "nodeCount": 2},
                    {"name": "b", "className": "l4", "nodeCount": 1, "zones": ["eu-1"]},
                ],
            },
        }
    )
    record = ClusterRecord(
        spec=spec,
        ready=True,
        reason="probed",
        gateway_address="gw",
        observed_pools={"a": PoolObservation(nodes=2, ready_nodes=1)},
    )
    entry, key, layout = cluster_entry(record)
    assert cluster_record(entry, {key: layout}) == record
    other = spec.model_copy(update={"metadata": spec.metadata.model_copy(update={"name": "c2"})})
    assert cluster_entry(ClusterRecord(spec=other))[1] == key


def test_remembered_answers_round_trip() -> None:
    replicas = placed_replicas()
    response = PlaceResponse(
        kept=replicas[:1],
        placed=replicas[1:],
        victims=[ReplicaRemoval(replica=replicas[0], reason="scaled down")],
        rejections={f"c{i}": "full" for i in range(30)},
        summary="0/30 clusters fit",
        version=7,
    )
    at = datetime(2026, 1, 1, tzinfo=UTC)
    compact = compact_answer(response, at, rejections=20)
    back = answer_from_compact(compact)
    assert back.kept == response.kept
    assert back.placed == response.placed
    assert back.victims == response.victims
    assert back.version == 7
    assert len(back.rejections) == 20


def test_kept_ledger_cache_changes_no_placement() -> None:
    snapshot = fleet(
        *[cluster(f"c{i}", pool("a", 2, gpu(8)), pool("b", 1, gpu(4))) for i in range(6)]
    )
    evaluator = SelectorEvaluator()
    cache: LedgerCache = LedgerCache()
    with_cache: list[ModelReplica] = []
    without: list[ModelReplica] = []
    for k in range(12):
        dep = deployment(standalone(3 if k % 2 else 5), name=f"m{k}", replicas=4)
        a = place(dep, snapshot, with_cache, evaluator=evaluator, ledger_cache=cache)
        b = place(dep, snapshot, without, evaluator=evaluator)
        assert a.placed == b.placed
        assert a.rejections == b.rejections
        with_cache += a.placed
        without += b.placed
        for r in a.placed:  # as the Fleet does when it books a replica
            cache.pop(r.spec.cluster_name, None)
    assert cache, "the cache was never filled"
    assert a.summary, "the fleet should have filled up, exercising full clusters from the cache"
