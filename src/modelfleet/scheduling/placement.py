"""Placement: where a ModelDeployment's replicas run, as a pure function of the deployment, a
fleet snapshot and every replica in the fleet.

Layer rule: ``modelfleet.scheduling`` is pure. No I/O, no Temporal, no SDKs; the same call
gives the same answer, so a workflow can run it in an Update and ``modelfleet plan`` offline.

The phases follow Modelplane's scheduler: retain what still fits (``retain``), scale down,
charge the ledger with every replica that stays, then fill (``fill``). Where we differ:

* Bad input (a selector that does not compile, no cluster selected) freezes the deployment:
  every existing replica is kept, nothing is placed or removed, and the condition says why.
* Capacity is counted per device on each node, so pods needing part of a node share it.
* A shortfall is a False condition with a reason for every cluster, never a True one.
* New replicas never reuse the (cluster, index), and so the name, of a replica removed in the
  same pass, so a workflow never has to delete and create one name at once.
"""

from __future__ import annotations

from collections import ChainMap, Counter, defaultdict
from collections.abc import Collection, Mapping, Sequence

from pydantic import Field

from modelfleet.api.deployments import ModelDeployment, ModelReplica
from modelfleet.api.meta import Condition, Model
from modelfleet.api.naming import replica_name
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.scheduling.charging import LedgerCache, book_into_cache, build_ledger
from modelfleet.scheduling.explain import summarize
from modelfleet.scheduling.fill import NewReplica, fill
from modelfleet.scheduling.index import fleet_index
from modelfleet.scheduling.matching import Matcher, engine_plan, selector_problem
from modelfleet.scheduling.retain import (
    Retained,
    Victim,
    VictimReason,
    retain,
    scale_down,
)
from modelfleet.scheduling.snapshot import FleetSnapshot
from modelfleet.scheduling.stamp import stamp_replica
from modelfleet.scheduling.standing import Standing

__all__ = [
    "REPLICAS_SCHEDULED",
    "Placement",
    "Standing",
    "Victim",
    "VictimReason",
    "place",
]

REPLICAS_SCHEDULED = "ReplicasScheduled"
# A selected cluster the homeSelector leaves out, while a new replica is placed at home.
NOT_HOME = "not a home cluster (homeSelector)"


class Reason:
    """Reasons of the ``ReplicasScheduled`` condition."""

    CREATED = "ReplicasCreated"
    INSUFFICIENT_CAPACITY = "InsufficientCapacity"
    NO_CLUSTERS = "NoClusters"
    INVALID_NODE_SELECTOR = "InvalidNodeSelector"
    PAUSED = "PlacementPaused"


class Placement(Model):
    """What should run for one deployment, and why."""

    namespace: str
    deployment: str
    desired: int
    kept: list[ModelReplica] = Field(default_factory=list)  # re-stamped with the current spec
    placed: list[ModelReplica] = Field(default_factory=list)  # new replicas
    victims: list[Victim] = Field(default_factory=list)  # ours to remove
    conditions: list[Condition] = Field(default_factory=list)
    # Per cluster, why the replica that could not be placed did not fit there.
    rejections: dict[str, str] = Field(default_factory=dict)
    # "0/5 clusters fit: ..." when some replica could not be placed, else "".
    summary: str = ""
    # Kept and placed replicas outside the deployment's home clusters (``homeSelector``), by
    # name, each with why: a placed one, what was full at home when it was borrowed.
    borrowed: dict[str, str] = Field(default_factory=dict)

    @property
    def replicas(self) -> list[ModelReplica]:
        """Every replica that should run, sorted by (cluster, index)."""
        return sorted([*self.kept, *self.placed], key=lambda r: (r.spec.cluster_name, r.spec.index))

    @property
    def scheduled(self) -> int:
        return len(self.kept) + len(self.placed)

    def condition(self, type_: str = REPLICAS_SCHEDULED) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


def place(
    deployment: ModelDeployment,
    fleet: FleetSnapshot,
    existing: Sequence[ModelReplica],
    *,
    evaluator: SelectorEvaluator | None = None,
    desired: int | None = None,
    fill_missing: bool = True,
    avoid: Mapping[str, str] | None = None,
    indexed: tuple[Sequence[ModelReplica], Mapping[str, Collection[ModelReplica]]] | None = None,
    ledger_cache: LedgerCache | None = None,
    skip_full: bool = True,
    retired: Collection[str] = (),
    standing: Mapping[str, Standing] | None = None,
    borrow: bool = False,
) -> Placement:
    """Decide where ``deployment``'s replicas run.

    ``existing`` is every ModelReplica in the fleet, of every deployment: those of this
    deployment (same namespace and name) are retained or removed, the others only use capacity.
    ``desired`` overrides ``spec.replicas`` (a rollout asks for one more to surge).
    ``avoid`` names clusters that get no new replica of this deployment for now (a replica
    failed there), each with the reason reported for it; replicas already there stay.
    ``fill_missing=False`` keeps and scales down but places nothing new (e.g. while the model
    cache is unresolved). Pass one ``evaluator`` across calls to reuse its CEL memo.

    ``indexed`` replaces ``existing`` for a caller that keeps the fleet's replicas indexed (the
    Fleet workflow): (this deployment's replicas, every replica by cluster). It saves the pass
    over every replica in the fleet that ``existing`` costs. ``ledger_cache`` keeps charged
    pools between calls (see ``charging.build_ledger``) and is left describing the fleet with the
    placed replicas booked (``charging.book_into_cache``): the caller books every one of them, or
    drops their clusters' entries; with it, clusters whose cached pools have
    no room are stepped over cheaply (``skip_full``, see ``fill.fill``; same answer either way).
    ``retired`` names replicas of this deployment that left lately: no new replica gets one.
    ``standing`` ranks this deployment's replicas for scale-down (see ``retain.scale_down``).

    New replicas go to the home clusters (those the ``homeSelector`` also matches; every
    selected one without it); replicas already on other selected clusters are kept (a borrowed
    one stays until a surge brings it home). ``borrow`` (a roll's surge, ``strategy.borrow:
    Fleet``): what does not fit at home is placed on any selected cluster that fits, and named
    in ``borrowed`` with what was full at home.
    """
    evaluator = evaluator or SelectorEvaluator()
    want = deployment.spec.replicas if desired is None else max(desired, 0)
    others_by_cluster: Mapping[str, Collection[ModelReplica]]
    if indexed is None:
        ours, others_by_cluster = _partition(deployment, existing)
    else:
        ours = sorted(indexed[0], key=lambda r: r.name)
        others_by_cluster = indexed[1]
    result = Placement(namespace=deployment.namespace, deployment=deployment.name, desired=want)

    problem = _selector_problem(deployment)
    if problem is not None:
        return _frozen(result, ours, Reason.INVALID_NODE_SELECTOR, problem)
    index = fleet_index(fleet)
    match_labels = _match_labels(deployment).items()
    selected = {
        c.name
        for c in index.clusters
        if not match_labels or all(c.snapshot.labels.get(k) == v for k, v in match_labels)
    }
    if not selected:
        wanted = ", ".join(f"{k}={v}" for k, v in sorted(match_labels))
        message = (
            f"no cluster matches clusterSelector {wanted} ({len(index.clusters)} in the fleet)"
            if wanted
            else "the fleet has no clusters"
        )
        return _frozen(result, ours, Reason.NO_CLUSTERS, message)

    home_labels = _home_labels(deployment).items()
    home = {
        c.name
        for c in index.clusters
        if c.name in selected and all(c.snapshot.labels.get(k) == v for k, v in home_labels)
    }

    matcher = Matcher(evaluator)
    plans = [engine_plan(e) for e in deployment.spec.template.spec.engines]
    kept, victims = retain(deployment, plans, ours, index, selected, matcher)
    victims += scale_down(kept, want, standing)
    result.victims = victims
    result.kept = [
        stamp_replica(deployment, r.cluster_name, r.index, r.choices, name=r.replica.name)
        for r in sorted(kept, key=lambda r: (r.cluster_name, r.index))
    ]
    missing = want - len(kept)
    if missing > 0 and fill_missing:
        # Our removed replicas free their capacity; kept ones are charged as stamped.
        charged = _charged(deployment, others_by_cluster, ours, kept)
        mine = {r.spec.cluster_name for r in ours} | {r.cluster_name for r in kept}
        taken = [(r.cluster_name, r.index) for r in kept] + [
            (v.replica.spec.cluster_name, v.replica.spec.index) for v in victims
        ]
        load = Counter(r.cluster_name for r in kept)
        ledger = build_ledger(index, charged, evaluator, cache=ledger_cache, uncacheable=mine)
        placed: list[NewReplica] = []

        def fill_on(clusters: Collection[str], count: int) -> dict[str, str]:
            outcome = fill(
                deployment,
                plans=plans,
                missing=count,
                fleet=index,
                selected=clusters,
                avoid=avoid or {},
                taken=taken + [(n.cluster, n.index) for n in placed],
                load=load,
                ledger=ledger,
                matcher=matcher,
                skip_full=skip_full,
                retired=retired,
            )
            placed.extend(outcome.placed)
            return outcome.rejections

        rejections = {
            c: NOT_HOME if c in selected and c not in home else why
            for c, why in fill_on(home, missing).items()
        }
        if borrow and rejections and home != selected:
            # The home clusters are full: borrow any other selected cluster that fits.
            full_at_home = borrowed_because(rejections, home)
            before = len(placed)
            elsewhere = fill_on(selected - home, missing - before)
            for n in placed[before:]:
                result.borrowed[replica_name_of(deployment, n.cluster, n.index)] = full_at_home
            rejections = {c: rejections[c] if c in home else why for c, why in elsewhere.items()}
        result.placed = [stamp_replica(deployment, n.cluster, n.index, n.choices) for n in placed]
        if ledger_cache is not None and result.placed:
            book_into_cache(ledger_cache, index, result.placed, evaluator, uncacheable=mine)
        result.rejections = rejections
        if rejections:
            result.summary = summarize(len(index.clusters), 0, rejections)
    for r in result.kept:
        if r.spec.cluster_name not in home:
            result.borrowed[r.name] = f"{r.spec.cluster_name}: {NOT_HOME}"
    result.conditions = [_scheduled_condition(result, fill_missing)]
    return result


def borrowed_because(rejections: Mapping[str, str], home: Collection[str]) -> str:
    """Why a replica was borrowed: what each home cluster said when it did not fit there."""
    return "; ".join(f"{why} on {c}" for c, why in sorted(rejections.items()) if c in home)


def replica_name_of(deployment: ModelDeployment, cluster: str, index: int) -> str:
    return replica_name(deployment.namespace, deployment.name, cluster, index)


def _partition(
    deployment: ModelDeployment, existing: Sequence[ModelReplica]
) -> tuple[list[ModelReplica], defaultdict[str, list[ModelReplica]]]:
    """Our replicas sorted by name (the first name wins a collision), and everyone else's by
    cluster. One pass: at fleet scale this loop is a large part of a placement."""
    name, namespace = deployment.name, deployment.namespace
    ours: list[ModelReplica] = []
    others: defaultdict[str, list[ModelReplica]] = defaultdict(list)
    for replica in existing:
        spec = replica.spec
        if spec.deployment == name and replica.namespace == namespace:
            ours.append(replica)
        else:
            others[spec.cluster_name].append(replica)
    ours.sort(key=lambda r: r.name)
    return ours, others


def _charged(
    deployment: ModelDeployment,
    by_cluster: Mapping[str, Collection[ModelReplica]],
    ours: Sequence[ModelReplica],
    kept: Sequence[Retained],
) -> Mapping[str, Collection[ModelReplica]]:
    """What runs per cluster once this pass is done: everyone else's replicas and our kept ones.
    Only the clusters holding one of ours are copied; the rest is read through."""
    name, namespace = deployment.name, deployment.namespace
    override: dict[str, list[ModelReplica]] = {}
    for cluster in {r.spec.cluster_name for r in ours} | {r.cluster_name for r in kept}:
        override[cluster] = [
            r
            for r in by_cluster.get(cluster, ())
            if not (r.spec.deployment == name and r.namespace == namespace)
        ]
    for r in kept:
        override[r.cluster_name].append(r.replica)
    return ChainMap(override, by_cluster)  # type: ignore[arg-type]


def _match_labels(deployment: ModelDeployment) -> dict[str, str]:
    selector = deployment.spec.template.spec.cluster_selector
    return dict(selector.match_labels) if selector else {}


def _home_labels(deployment: ModelDeployment) -> dict[str, str]:
    selector = deployment.spec.template.spec.home_selector
    return dict(selector.match_labels) if selector else {}


def _selector_problem(deployment: ModelDeployment) -> str | None:
    for engine in deployment.spec.template.spec.engines:
        for member in engine.members:
            for device in member.node_selector.devices if member.node_selector else []:
                for selector in device.selectors:
                    problem = selector_problem(selector.cel)
                    if problem is not None:
                        return (
                            f"engine {engine.name!r}, member {member.role.value}, device "
                            f"{device.name!r}: invalid CEL selector: {problem}"
                        )
    return None


def _frozen(
    result: Placement, ours: Sequence[ModelReplica], reason: str, message: str
) -> Placement:
    """Bad input: keep every replica as it is and say why nothing else happened."""
    result.kept = [r.model_copy(deep=True) for r in ours]
    kept = f"; keeping the {len(ours)} existing replica(s) unchanged" if ours else ""
    result.conditions = [
        Condition(type=REPLICAS_SCHEDULED, status="False", reason=reason, message=message + kept)
    ]
    return result


def _scheduled_condition(result: Placement, filled: bool) -> Condition:
    counts = f"Scheduled {result.scheduled} of {result.desired} replicas"
    if result.scheduled >= result.desired:
        return Condition(
            type=REPLICAS_SCHEDULED, status="True", reason=Reason.CREATED, message=counts
        )
    if not filled:
        return Condition(
            type=REPLICAS_SCHEDULED,
            status="False",
            reason=Reason.PAUSED,
            message=f"{counts}; new placements are paused",
        )
    return Condition(
        type=REPLICAS_SCHEDULED,
        status="False",
        reason=Reason.INSUFFICIENT_CAPACITY,
        message=f"{counts}; {result.summary}",
    )
