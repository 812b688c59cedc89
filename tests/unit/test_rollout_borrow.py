"""Capacity borrowing in the rollout decisions (issue 25), driven against a toy Fleet with home
clusters: a roll whose surge finds home full borrows another cluster only with ``strategy.borrow:
Fleet`` (the decision log says where and why), then the borrowed replica returns home by a surge
of its own when room appears, never dropping below ``replicas - maxUnavailable`` serving."""

from __future__ import annotations

from dataclasses import dataclass, field

from rollout_builders import Driver, ToyFleet, replica, serving, spec, state_with, status

from modelfleet.api.deployments import BorrowPolicy, ModelDeployment
from modelfleet.api.meta import Condition
from modelfleet.contracts.fleet_payloads import PlaceRequest, PlaceResponse
from modelfleet.contracts.status import ReplicaPhase, ReplicaStep
from modelfleet.deployment import decisions as rollout

FULL = "pool 'gpu-l4' has 0 free nodes, needs 1 on l4-dev"


@dataclass
class HomeFleet(ToyFleet):
    """``home`` clusters get new replicas; with ``borrow`` a surge that finds them full takes
    the first other cluster with room. Replicas off home are named borrowed in every answer."""

    home: set[str] = field(default_factory=set)

    def place(self, request: PlaceRequest) -> PlaceResponse:
        self.requests.append(request)
        md = request.deployment
        assert md is not None
        mine = sorted(self.ledger)
        placed = []
        borrowed: dict[str, str] = {}
        for _ in range(request.desired - len(mine)):
            home = [c for c in sorted(self.slots) if c in self.home and self.free(c) > 0]
            away = [c for c in sorted(self.slots) if c not in self.home and self.free(c) > 0]
            cluster = home[0] if home else (away[0] if away and request.borrow else None)
            if cluster is None:
                break
            self.made += 1
            name = f"r{self.made:02d}-{cluster}"
            self.ledger[name] = cluster
            placed.append(replica(md, name, cluster, self.made))
            if cluster not in self.home:
                borrowed[name] = FULL
        kept = [replica(md, n, self.ledger[n]) for n in mine]
        borrowed |= {
            n: f"{self.ledger[n]}: not home" for n in mine if self.ledger[n] not in self.home
        }
        short = len(placed) + len(mine) < request.desired
        summary = "0/2 clusters fit: full" if short else ""
        scheduled = Condition(
            type="ReplicasScheduled",
            status="False" if short else "True",
            reason="InsufficientCapacity" if short else "ReplicasCreated",
            message=f"Scheduled {len(placed) + len(mine)} of {request.desired} replicas",
        )
        return PlaceResponse(
            kept=kept, placed=placed, summary=summary, borrowed=borrowed, conditions=[scheduled]
        )


def borrowing(md: ModelDeployment, policy: BorrowPolicy = BorrowPolicy.FLEET) -> ModelDeployment:
    out = md.model_copy(deep=True)
    out.spec.strategy.borrow = policy
    return out


OLD = spec(2, image="vllm:1", unavailable=0)
NEW = spec(2, image="vllm:2", unavailable=0)


def rolling(policy: BorrowPolicy) -> Counting:
    old, new = borrowing(OLD, policy), borrowing(NEW, policy)
    state = state_with(old, status(old, "a-old", "l4-dev"), status(old, "b-old", "l4-dev"))
    state = state.model_copy(update={"dirty": False})
    fleet = HomeFleet(
        slots={"l4-dev": 2, "us-east-h100": 1},
        ledger={"a-old": "l4-dev", "b-old": "l4-dev"},
        home={"l4-dev"},
    )
    return Counting(rollout.applied(state, new), fleet)


@dataclass
class Counting(Driver):
    """A driver that remembers the fewest replicas serving after any report."""

    fewest: int = 2

    def report(self, name: str, phase: ReplicaPhase, step: ReplicaStep, reason: str = "") -> None:
        super().report(name, phase, step, reason)
        self.fewest = min(self.fewest, len(serving(self.state)))


def test_without_borrow_the_roll_waits_with_both_old_replicas_serving() -> None:
    driver = rolling(BorrowPolicy.NONE)
    assert driver.run() == "rest"
    assert set(serving(driver.state)) == {"a-old", "b-old"}
    assert "blocked" in rollout.report(driver.state).summary
    assert [r.borrow for r in driver.fleet.requests if r.desired == 3] == [False]


def test_a_roll_completes_by_borrowing_and_the_borrowed_replica_returns_home() -> None:
    driver = rolling(BorrowPolicy.FLEET)
    assert driver.run() == "rest"
    assert driver.log[:12] == [
        "dry 2: 2",
        "place 2",
        "place 3",  # home full: borrowed
        "start r01-us-east-h100",
        "errors r01-us-east-h100: 0/0",
        "teardown a-old",
        "release a-old",
        "place 3",  # room at home again (a-old left): no borrowing
        "start r02-l4-dev",
        "errors r02-l4-dev: 0/0",
        "teardown b-old",
        "release b-old",
    ]
    assert driver.log[12:17] == [
        "place 3",  # the return surge: home has room (b-old left)
        "start r03-l4-dev",
        "teardown r01-us-east-h100",
        "release r01-us-east-h100",
        "end",
    ]
    messages = [e.message for e in driver.state.log]
    assert f"surged r01-us-east-h100 on us-east-h100: {FULL}" in messages
    assert any("back home: replaced by r03-l4-dev on l4-dev" in m for m in messages)
    assert set(driver.state.replicas) == {"r02-l4-dev", "r03-l4-dev"}
    assert not any(r.borrowed for r in driver.state.replicas.values())
    assert set(serving(driver.state).values()) == {rollout.template_hash(NEW)}
    # The roll's surges asked to borrow; the return surge did not.
    surges = [r.borrow for r in driver.fleet.requests if r.desired == 3]
    assert surges == [True, True, False]
    assert driver.fewest == 2  # replicas - maxUnavailable, throughout


def test_a_borrowed_replica_stays_while_home_is_full_and_returns_when_room_appears() -> None:
    md = borrowing(spec(1, image="vllm:1", unavailable=0))
    away = status(md, "x-away", "us-east-h100").model_copy(update={"borrowed": FULL})
    state = state_with(md, away, last_good=md).model_copy(update={"dirty": True})
    fleet = HomeFleet(
        slots={"l4-dev": 1, "us-east-h100": 1},
        ledger={"x-away": "us-east-h100", "other": "l4-dev"},  # someone else fills home
        home={"l4-dev"},
    )
    driver = Driver(state, fleet)
    assert driver.run() == "rest"
    assert set(serving(driver.state)) == {"x-away"}
    summary = rollout.report(driver.state).summary
    assert "x-away stays on us-east-h100 (borrowed): no room at home" in summary
    assert driver.state.replicas["x-away"].borrowed == FULL  # the first reason is kept
    # The deployment's own verdict stands: its one replica is scheduled.
    assert [c.status for c in driver.state.conditions] == ["True"]
    # The other deployment leaves: the next pass (a resync) brings it home.
    fleet.release("other")
    driver.state = rollout.resync(driver.state)
    driver.log.clear()
    assert driver.run() == "rest"
    assert "start r01-l4-dev" in driver.log
    assert driver.log.index("start r01-l4-dev") < driver.log.index("teardown x-away")
    assert set(driver.state.replicas) == {"r01-l4-dev"}
    assert driver.state.replicas["r01-l4-dev"].phase is ReplicaPhase.READY
