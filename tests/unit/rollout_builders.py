"""Builders for the rollout decision tests: deployments, replica states, a toy Fleet and a driver
that carries the pure module's actions out the way the workflow does, with replicas that report
back at once. Not a test module (no ``test_`` prefix)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from placement_builders import deployment, existing

from modelfleet.api.deployments import ModelDeployment, ModelReplica, Strategy
from modelfleet.contracts.canary_payloads import EngineCounts, FiguresReading, window_figures
from modelfleet.contracts.fleet_payloads import (
    DryPlaceRequest,
    PlaceRequest,
    PlaceResponse,
    ReplicaRemoval,
)
from modelfleet.contracts.status import ReplicaPhase, ReplicaProgress, ReplicaStatus, ReplicaStep
from modelfleet.deployment import decisions as rollout
from modelfleet.deployment.decisions import DeploymentState, template_hash

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def spec(
    replicas: int = 2,
    *,
    image: str = "vllm:1",
    surge: int = 1,
    unavailable: int = 1,
    max_error_percent: int = 5,
) -> ModelDeployment:
    md = deployment(replicas=replicas)
    md.spec.strategy = Strategy(
        max_surge=surge, max_unavailable=unavailable, max_error_percent=max_error_percent
    )
    md.spec.template.spec.engines[0].members[0].template.spec.containers[0].image = image
    return md


def replica(md: ModelDeployment, name: str, cluster: str, index: int = 0) -> ModelReplica:
    return existing(md, cluster, index, name=name)


def status(
    md: ModelDeployment,
    name: str,
    cluster: str,
    phase: ReplicaPhase = ReplicaPhase.READY,
    step: ReplicaStep = ReplicaStep.SERVING,
    *,
    reason: str = "",
) -> ReplicaStatus:
    return ReplicaStatus(
        name=name,
        cluster=cluster,
        index=0,
        phase=phase,
        step=step,
        reason=reason,
        template_hash=template_hash(md),
    )


def state_with(md: ModelDeployment, *replicas: ReplicaStatus, **fields: object) -> DeploymentState:
    return DeploymentState.model_validate(
        {"spec": md, "replicas": {r.name: r for r in replicas}, **fields}
    )


def reported(
    state: DeploymentState, name: str, phase: ReplicaPhase, step: ReplicaStep
) -> DeploymentState:
    """The state after replica ``name`` reported ``phase`` at ``step``."""
    return rollout.progressed(state, ReplicaProgress(name=name, phase=phase, step=step))


Behaviour = Literal["ready", "fail", "hang"]


@dataclass
class ToyFleet:
    """Slots per cluster; places new replicas on the first cluster (by name) with a free slot
    that is not avoided, and names victims from the highest name down on scale-down."""

    slots: dict[str, int]
    ledger: dict[str, str] = field(default_factory=dict)  # replica -> cluster
    made: int = 0
    requests: list[PlaceRequest] = field(default_factory=list)

    def free(self, cluster: str) -> int:
        return self.slots[cluster] - sum(1 for c in self.ledger.values() if c == cluster)

    def place(self, request: PlaceRequest) -> PlaceResponse:
        self.requests.append(request)
        md = request.deployment
        mine = sorted(self.ledger)
        victims = [
            ReplicaRemoval(replica=replica(md, n, self.ledger[n]), reason="scaled down")
            for n in mine[request.desired :][::-1]
        ]
        placed = []
        for _ in range(request.desired - len(mine)):
            cluster = next(
                (
                    c
                    for c in sorted(self.slots)
                    if self.free(c) > 0 and c not in request.avoid_clusters
                ),
                None,
            )
            if cluster is None:
                break
            self.made += 1
            name = f"r{self.made:02d}-{cluster}"
            self.ledger[name] = cluster
            placed.append(replica(md, name, cluster, self.made))
        kept = [replica(md, n, self.ledger[n]) for n in mine[: request.desired]]
        summary = "" if len(placed) + len(mine) >= request.desired else "no room"
        return PlaceResponse(kept=kept, placed=placed, victims=victims, summary=summary)

    def dry_place(self, request: DryPlaceRequest) -> PlaceResponse:
        """Where ``desired`` replicas would go with ``without`` not counted; books nothing."""
        saved, made = dict(self.ledger), self.made
        for name in request.without:
            self.ledger.pop(name, None)
        try:
            return self.place(request)
        finally:
            self.ledger, self.made = saved, made
            self.requests.pop()

    def release(self, name: str) -> None:
        self.ledger.pop(name, None)


@dataclass
class Driver:
    """Carries actions out like the workflow does. Replicas report at once: a started one is
    Ready, or fails (compensated, done), or hangs, per ``behaviour``; a torn-down one is done."""

    state: DeploymentState
    fleet: ToyFleet
    now: datetime = T0
    behaviour: dict[str, Behaviour] = field(default_factory=dict)  # cluster -> behaviour
    log: list[str] = field(default_factory=list)
    failing_images: set[str] = field(default_factory=set)  # replicas running these fail
    # What a proven replacement's engines answered (requests, of which 5xx), by image.
    answers: dict[str, tuple[int, int]] = field(default_factory=dict)
    images: dict[str, str] = field(default_factory=dict)  # replica -> image, as started
    # What each replica's engines count over a canary window, by image (the baseline reads
    # zero): ``canary_counts`` builds them.
    window: dict[str, EngineCounts] = field(default_factory=dict)

    def report(self, name: str, phase: ReplicaPhase, step: ReplicaStep, reason: str = "") -> None:
        progress = ReplicaProgress(name=name, phase=phase, step=step, reason=reason, at=self.now)
        self.state = rollout.progressed(self.state, progress)

    def run(self, max_steps: int = 500) -> str:
        """Run until the deployment rests with nothing to do, is stuck waiting, or finishes;
        returns which ('rest', 'wait <name>', 'finish')."""
        for _ in range(max_steps):
            self.state, action = rollout.next_action(self.state, self.now)
            if isinstance(action, rollout.Rest):
                if not rollout.rest_over(self.state):
                    return "rest"
                self.state = rollout.woke(self.state, self.now)
            elif isinstance(action, rollout.Place):
                request_id = f"r/{action.sequence}"
                request = rollout.place_request(self.state, action, request_id, self.now)
                self.log.append(f"place {action.desired}")
                self.state = rollout.placed(self.state, self.fleet.place(request))
            elif isinstance(action, rollout.DryPlace):
                request = rollout.dry_place_request(self.state, action, "dry", self.now)
                answer = self.fleet.dry_place(request)
                self.log.append(f"dry {action.desired}: {len(answer.placed)}")
                self.state = rollout.dry_placed(self.state, answer)
            elif isinstance(action, rollout.StartReplica):
                self._start(action.replica)
            elif isinstance(action, rollout.SignalTeardown):
                self.log.append(f"teardown {action.name}")
                self.report(action.name, ReplicaPhase.TERMINATED, ReplicaStep.DONE)
            elif isinstance(action, rollout.Forget):
                self.log.append(f"release {action.name}")
                self.fleet.release(action.name)
                self.state = rollout.forgotten(self.state, action.name, self.now)
            elif isinstance(action, rollout.Wait):
                if not rollout.wait_over(self.state, action):
                    if action.deadline is None:
                        return f"wait {action.name}"
                    # A durable timer: nothing happened meanwhile, so it fires.
                    self.now = max(self.now, action.deadline)
                    continue
            elif isinstance(action, rollout.CheckErrors):
                requests, errors = self.answers.get(self.images.get(action.name, ""), (0, 0))
                self.log.append(f"errors {action.name}: {errors}/{requests}")
                self.state = rollout.errors_counted(
                    self.state, action.name, requests, errors, at=self.now
                )
            elif isinstance(action, rollout.ReadFigures):
                self._read(action)
            elif isinstance(action, rollout.EndPass):
                self.log.append("end")
            else:
                return "finish"
            self.now += timedelta(seconds=1)
        raise AssertionError(f"no rest after {max_steps} steps: {self.log[-20:]}")

    def _read(self, action: rollout.ReadFigures) -> None:
        names = sorted(action.replicas)
        if action.baseline is None:
            self.log.append(f"baseline {','.join(names)}")
            reading = FiguresReading(counts={n: EngineCounts() for n in names})
        else:
            now = {n: self.window.get(self.images.get(n, ""), EngineCounts()) for n in names}
            figures = window_figures(action.baseline, now, action.canary, action.stable)
            self.log.append(f"figures {','.join(action.canary)}")
            reading = FiguresReading(counts=now, figures=figures)
        self.state = rollout.figures_read(self.state, reading, at=self.now)

    def _start(self, r: ModelReplica) -> None:
        name = r.name
        self.log.append(f"start {name}")
        behaviour = self.behaviour.get(r.spec.cluster_name, "ready")
        image = r.spec.engines[0].members[0].template.spec.containers[0].image
        self.images[name] = image
        if image in self.failing_images:
            behaviour = "fail"
        if behaviour == "ready":
            self.report(name, ReplicaPhase.READY, ReplicaStep.SERVING)
        elif behaviour == "fail":
            self.report(name, ReplicaPhase.FAILED, ReplicaStep.DONE, "ImagePullBackOff")


def serving(state: DeploymentState) -> dict[str, str]:
    """Ready replicas and the template they run: name -> template hash."""
    ready = ReplicaPhase.READY
    return {n: s.template_hash for n, s in sorted(state.replicas.items()) if s.phase is ready}


def fleet_with(state: DeploymentState, **slots: int) -> ToyFleet:
    """A toy fleet whose ledger already holds the state's replicas."""
    return ToyFleet(slots=slots, ledger={n: s.cluster for n, s in state.replicas.items()})


BUCKETS = ("0.001", "0.005", "0.01", "0.02", "0.04", "0.1", "0.25", "0.5", "1.0", "+Inf")


def canary_counts(
    requests: int, errors: int = 0, ttft: float = 0.003, itl: float = 0.001
) -> EngineCounts:
    """A window's counts: ``requests`` answered, ``errors`` of them 5xx, every other one with a
    time to first token of ``ttft`` seconds and 7 more tokens each ``itl`` seconds apart."""
    observed = requests - errors

    def histogram(seconds: float, count: int) -> dict[str, float]:
        return {le: float(count if le == "+Inf" or seconds <= float(le) else 0) for le in BUCKETS}

    return EngineCounts(
        ttft_buckets=histogram(ttft, observed),
        itl_buckets=histogram(itl, 7 * observed),
        requests=requests,
        errors=errors,
    )
