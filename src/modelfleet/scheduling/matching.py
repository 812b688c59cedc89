"""Which pools can host which members: DRA-style device matching of a deployment's node
selectors against a pool's per-node devices, memoised per pool shape (see ``index``), so a
member is matched once per distinct kind of pool rather than once per pool.

Matching one member against one pool follows Modelplane: each request, in order, takes the
first device (in pool order) that still has ``count`` left on the node and satisfies every
selector. This greedy choice can reject a member that a smarter assignment would fit, but it
never overcommits. Matched DRA devices become device requests; Synthetic ones only gate.

Layer rule: pure (no I/O, no Temporal, no SDKs).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from modelfleet.api.deployments import DeviceRequest, Engine, Member, Role
from modelfleet.cel.compiler import CelCompileError, check_selector
from modelfleet.cel.device import DeviceFacts
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.scheduling.index import IndexedCluster, PoolShape
from modelfleet.scheduling.ledger import Demand, PodGroup

# --- what a deployment asks for -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestSpec:
    name: str
    count: int
    selectors: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MemberPlan:
    role: Role
    pods: int  # pods of this member across every copy of the engine
    requests: tuple[RequestSpec, ...]

    @property
    def whole_node(self) -> bool:
        # Gang pods assume they own their node's interconnect, so they never share a node.
        return self.role is not Role.STANDALONE


@dataclass(frozen=True, slots=True)
class EnginePlan:
    name: str
    members: tuple[MemberPlan, ...]


def member_plan(member: Member, copies: int) -> MemberPlan:
    devices = member.node_selector.devices if member.node_selector else []
    requests = tuple(
        RequestSpec(d.name, d.count, tuple(s.cel for s in d.selectors)) for d in devices
    )
    return MemberPlan(member.role, member.pods * copies, requests)


def engine_plan(engine: Engine) -> EnginePlan:
    return EnginePlan(engine.name, tuple(member_plan(m, engine.copies) for m in engine.members))


@lru_cache(maxsize=1024)
def selector_problem(expression: str) -> str | None:
    """Why ``expression`` cannot be compiled, or None. Memoised: compiling is the slow part."""
    try:
        check_selector(expression)
    except CelCompileError as err:
        return str(err)
    return None


# --- matching -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemberMatch:
    """One member against one pool shape."""

    failed_request: str | None  # the request no device satisfied
    resolved: tuple[tuple[RequestSpec, int], ...] = ()  # (request, device slot)
    demand: Demand = ()  # claimable devices one pod takes

    @property
    def ok(self) -> bool:
        return self.failed_request is None

    @property
    def claims(self) -> bool:
        return any(self.demand)

    def device_requests(self, shape: PoolShape) -> list[DeviceRequest] | None:
        """The DRA requests to stamp on the replica; None (never empty) when claimless."""
        out = [
            DeviceRequest.model_validate(
                {
                    "name": req.name,
                    "deviceClassName": shape.devices[slot].device_class_name,
                    "count": req.count,
                    "selectors": [{"cel": s} for s in req.selectors],
                }
            )
            for req, slot in self.resolved
            if shape.devices[slot].claimable
        ]
        return out or None


def match_member(
    requests: Sequence[RequestSpec], shape: PoolShape, evaluator: SelectorEvaluator
) -> MemberMatch:
    remaining = [d.count for d in shape.devices]
    resolved: list[tuple[RequestSpec, int]] = []
    for req in requests:
        for slot, device in enumerate(shape.devices):
            if remaining[slot] >= req.count and evaluator.matches_all(req.selectors, device.facts):
                remaining[slot] -= req.count
                resolved.append((req, slot))
                break
        else:
            return MemberMatch(req.name)
    demand = [0] * len(shape.devices)
    for req, slot in resolved:
        if shape.devices[slot].claimable:
            demand[slot] += req.count
    return MemberMatch(None, tuple(resolved), tuple(demand))


def stamped_demand(
    requests: Sequence[DeviceRequest], shape: PoolShape, evaluator: SelectorEvaluator
) -> Demand:
    """Devices per pod of a replica that is already placed, from its stamped requests.

    A request names a DeviceClass, not a pool device, so it is charged to the pool's device of
    that class; when several qualify, to the first its selectors still match."""
    demand = [0] * len(shape.devices)
    for req in requests:
        slots = [
            s
            for s, d in enumerate(shape.devices)
            if d.claimable and d.device_class_name == req.device_class_name
        ]
        if not slots:
            continue  # the pool no longer has such a device: nothing of it can be in use
        if len(slots) > 1:
            selectors = [s.cel for s in req.selectors]
            fitting = [
                s
                for s in slots
                if shape.capacity[s] - demand[s] >= req.count
                and _matches_quietly(evaluator, selectors, shape.devices[s].facts)
            ]
            slots = fitting or slots
        demand[slots[0]] += req.count
    return tuple(demand)


def _matches_quietly(
    evaluator: SelectorEvaluator, selectors: Sequence[str], facts: DeviceFacts
) -> bool:
    try:
        return evaluator.matches_all(selectors, facts)
    except CelCompileError:
        return False  # a stamped selector that no longer compiles still used the device


# --- one engine against one cluster's pools -------------------------------------------------


@dataclass(frozen=True, slots=True)
class PoolOption:
    """A pool on which every member of an engine matches."""

    position: int
    matches: tuple[MemberMatch, ...]
    groups: tuple[PodGroup, ...]  # what the engine's pods take from the pool's ledger


@dataclass(frozen=True, slots=True)
class EngineOptions:
    options: tuple[PoolOption, ...]  # in declared pool order
    reason: str | None  # why there is no option


class Matcher:
    """Member and engine matching for one scheduling pass, memoised by pool shape."""

    def __init__(self, evaluator: SelectorEvaluator) -> None:
        self.evaluator = evaluator
        self._members: dict[tuple[tuple[RequestSpec, ...], int], MemberMatch] = {}
        self._engines: dict[tuple[int, tuple[int, ...]], EngineOptions] = {}

    def member(self, requests: tuple[RequestSpec, ...], shape: PoolShape) -> MemberMatch:
        key = (requests, shape.key)
        match = self._members.get(key)
        if match is None:
            match = self._members[key] = match_member(requests, shape, self.evaluator)
        return match

    def engine(self, number: int, engine: EnginePlan, cluster: IndexedCluster) -> EngineOptions:
        """Where engine ``number`` could go on ``cluster``, ignoring capacity."""
        key = (number, cluster.shape_key)
        options = self._engines.get(key)
        if options is None:
            options = self._engines[key] = self._engine_options(engine, cluster)
        return options

    def _engine_options(self, engine: EnginePlan, cluster: IndexedCluster) -> EngineOptions:
        if not cluster.pools:
            return EngineOptions((), "no node pools")
        per_pool = [
            tuple(self.member(m.requests, pool.shape) for m in engine.members)
            for pool in cluster.pools
        ]
        # A member that can claim a device somewhere on this cluster must claim one wherever
        # it goes: placing it on a pool where it matches only Synthetic devices would strand
        # a pod that wants a GPU on a node it cannot claim one from.
        claimable = [
            any(matches[i].ok and matches[i].claims for matches in per_pool)
            for i in range(len(engine.members))
        ]
        options = []
        stranding = False
        for pool, matches in zip(cluster.pools, per_pool, strict=True):
            if not all(m.ok for m in matches):
                continue
            if any(c and not m.claims for c, m in zip(claimable, matches, strict=True)):
                stranding = True
                continue
            groups = tuple(
                PodGroup(match.demand, plan.pods, plan.whole_node)
                for plan, match in zip(engine.members, matches, strict=True)
            )
            options.append(PoolOption(pool.position, matches, groups))
        if not any(claimable):
            if options:
                return EngineOptions((), f"engine {engine.name!r} would claim no device here")
            return EngineOptions((), _device_reason(engine, per_pool))
        if options:
            return EngineOptions(tuple(options), None)
        if stranding:
            return EngineOptions(
                (),
                f"every pool that satisfies engine {engine.name!r} leaves a device-wanting "
                "member on synthetic devices only",
            )
        if all(any(matches[i].ok for matches in per_pool) for i in range(len(engine.members))):
            return EngineOptions(
                (), f"no single pool satisfies every member of engine {engine.name!r}"
            )
        return EngineOptions((), _device_reason(engine, per_pool))


def _device_reason(engine: EnginePlan, per_pool: Sequence[tuple[MemberMatch, ...]]) -> str:
    # Name the request that fails on most pools (ties: the earliest one asked for), which is
    # usually the one the user has to change.
    failures: Counter[str] = Counter()
    order: dict[str, int] = {}
    for i in range(len(engine.members)):
        for matches in per_pool:
            failed = matches[i].failed_request
            if failed is not None:
                failures[failed] += 1
                order.setdefault(failed, len(order))
    if not failures:
        return f"no pool satisfies engine {engine.name!r}"
    device = min(failures, key=lambda d: (-failures[d], order[d]))
    return f"no pool satisfies device {device!r} of engine {engine.name!r}"
