"""The InferenceCluster's orphan sweep on the time-skipping server, with activity doubles for
the cluster and the Fleet: back from NotReady it deletes what replicas the ledger no longer
holds there left behind, keeps every replica the ledger holds (also one booked while the sweep
was listing), does nothing without a dark spell until its resync, tries a failed sweep again,
follows up (bounded) on replicas it kept while the ledger may still be releasing them, and
sweeps on a slow resync what was left while the cluster stayed Ready."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from carry_support import carried_input, continued
from temporalio import activity, workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.loading import load_paths
from modelfleet.cluster.orphans import REPLICA_KINDS
from modelfleet.cluster.state import ClusterInput, ClusterState
from modelfleet.cluster.sweep_schedule import FOLLOW_UPS
from modelfleet.cluster.workflow import ClusterWorkflow
from modelfleet.contracts.activity_names import (
    FLEET_PUBLISH_CLUSTER,
    FLEET_REPLICAS_BY_POOL,
    FLEET_REPLICAS_ON,
    KUBE_PROBE,
    KUBE_REPLICAS_FOUND,
    KUBE_SCAN_REPLICAS,
    KUBE_SWEEP_REPLICAS,
)
from modelfleet.contracts.cloud_payloads import FLEET_CLASSES
from modelfleet.contracts.fleet_payloads import PublishRequest
from modelfleet.contracts.kube_payloads import (
    PoolObservation,
    ProbeRequest,
    ProbeResult,
    ReplicaSweepRequest,
)
from modelfleet.contracts.stack_payloads import (
    KUBE_CHECK_ACCESS,
    KUBE_VERIFY_STACK,
    AccessReport,
    AccessRequest,
    StackReport,
    StackRequest,
)
from modelfleet.contracts.status import ClusterStatus
from modelfleet.contracts.watch_payloads import (
    REPLICA_HEALTH,
    WATCH_REPLICA,
    HealthNews,
    NewsKind,
    ScanRequest,
    ScanResult,
    WatchedReplica,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
_LOADED = load_paths([str(EXAMPLES)]).resources
CLASSES = {r.name: r for r in _LOADED if isinstance(r, InferenceClass)}
SPEC = next(r for r in _LOADED if isinstance(r, InferenceCluster))


@dataclass
class FakeCluster:
    """One cluster's replica objects (by their namespace and replica labels) and the Fleet's
    ledger for it; the probe answers only while ``up``."""

    objects: set[tuple[str, str]] = field(default_factory=set)
    ledger: set[str] = field(default_factory=set)
    up: bool = True
    # Booked in the ledger the moment the cluster is listed (a placement racing the sweep).
    booked_while_listing: str | None = None
    # Released from the ledger just after the sweep asked it (a teardown that gave up on the
    # dark cluster, its capacity released in the Fleet as the cluster came back).
    released_after_asked: str | None = None
    sweep_failures: int = 0
    calls: list[str] = field(default_factory=list)
    probes: int = 0

    @activity.defn(name=KUBE_PROBE)
    async def probe(self, request: ProbeRequest) -> ProbeResult:
        self.probes += 1
        if not self.up:
            return ProbeResult(reachable=False, reason="connection refused")
        pools = {p.name: PoolObservation(nodes=1, ready_nodes=1) for p in SPEC.spec.node_pools}
        return ProbeResult(reachable=True, gateway_address="10.0.0.1", pools=pools)

    @activity.defn(name=FLEET_PUBLISH_CLUSTER)
    async def publish(self, request: PublishRequest) -> None:
        return None

    @activity.defn(name=FLEET_CLASSES)
    async def classes(self, names: list[str]) -> list[InferenceClass]:
        return [CLASSES[n] for n in names if n in CLASSES]

    @activity.defn(name=KUBE_CHECK_ACCESS)
    async def check_access(self, request: AccessRequest) -> AccessReport:
        return AccessReport(denied=[])

    @activity.defn(name=KUBE_VERIFY_STACK)
    async def verify_stack(self, request: StackRequest) -> StackReport:
        return StackReport(missing=[])

    @activity.defn(name=FLEET_REPLICAS_BY_POOL)
    async def replicas_by_pool(self, cluster: str) -> dict[str, list[str]]:
        return {}

    @activity.defn(name=FLEET_REPLICAS_ON)
    async def replicas_on(self, cluster: str) -> list[str]:
        # A sweep lists the cluster, then asks the ledger; asked without a listing, it is a
        # run started afresh asking which replicas to watch again (``cluster_watch``).
        sweeping = self.calls[-1:] == ["list"]
        self.calls.append("ledger" if sweeping else "rewatch")
        held = sorted(self.ledger)
        if sweeping and self.released_after_asked is not None:
            self.ledger.discard(self.released_after_asked)
            self.released_after_asked = None
        return held

    @activity.defn(name=KUBE_REPLICAS_FOUND)
    async def replicas_found(self, request: ReplicaSweepRequest) -> list[tuple[str, str]]:
        assert request.cluster == SPEC.name
        assert [tuple(k) for k in request.kinds] == list(REPLICA_KINDS)
        self.calls.append("list")
        found = sorted(self.objects)
        if self.booked_while_listing is not None:
            self.ledger.add(self.booked_while_listing)
        return found

    @activity.defn(name=KUBE_SWEEP_REPLICAS)
    async def sweep(self, request: ReplicaSweepRequest) -> int:
        self.calls.append("sweep " + ",".join(f"{ns}/{n}" for ns, n in request.replicas))
        if self.sweep_failures > 0:
            self.sweep_failures -= 1
            raise ApplicationError("the cluster fell over again", non_retryable=True)
        gone = {tuple(r) for r in request.replicas} & self.objects
        self.objects -= gone
        return len(gone)

    def activities(self) -> list[Callable[..., object]]:
        return [
            self.probe,
            self.publish,
            self.classes,
            self.check_access,
            self.verify_stack,
            self.replicas_by_pool,
            self.replicas_on,
            self.replicas_found,
            self.sweep,
        ]


async def _until(
    env: WorkflowEnvironment,
    handle: WorkflowHandle[ClusterWorkflow, ClusterStatus],
    want: Callable[[ClusterStatus], bool],
) -> ClusterStatus:
    for _ in range(100):
        status = await handle.query(ClusterWorkflow.status)
        if want(status):
            return status
        await env.sleep(timedelta(seconds=5))
    raise AssertionError(f"never reached: last status {status}")


async def _dark_then_back(
    env: WorkflowEnvironment, fake: FakeCluster, *, probes_after: int = 3
) -> list[str]:
    """Run the cluster Ready, dark until NotReady, then Ready again for ``probes_after`` more
    probes; then delete it. Returns the sweep's calls (before the delete, whose drain asks the
    ledger too)."""
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(
        env.client, task_queue=queue, workflows=[ClusterWorkflow], activities=fake.activities()
    ):
        handle = await env.client.start_workflow(
            ClusterWorkflow.run,
            ClusterInput.of(SPEC),
            id=f"cluster/{SPEC.name}-{uuid.uuid4()}",
            task_queue=queue,
            result_type=ClusterStatus,
        )
        await _until(env, handle, lambda s: s.ready)
        # A run started afresh asks once which replicas to watch again; no sweep on the first
        # Ready, the cluster was never dark.
        assert fake.calls == ["rewatch"]
        fake.calls.clear()
        fake.up = False
        await _until(env, handle, lambda s: not s.ready)
        assert fake.calls == [], "nothing is swept while the cluster is dark"
        fake.up = True
        await _until(env, handle, lambda s: s.ready)
        probes = fake.probes
        # A few more probes, so a retried or repeated sweep has the chance to show. Steps of a
        # third of the probe interval: a skip as long as the interval lands on the next probe's
        # timer, and the delete sent then would cancel a timer that just fired, which the
        # time-skipping server refuses and never recovers from (sdk-java #2606, #3088).
        while fake.probes < probes + probes_after:
            await env.sleep(timedelta(seconds=5))
        calls = list(fake.calls)
        fake.ledger.clear()  # drained: the delete need not wait
        await handle.execute_update(ClusterWorkflow.delete)
        await handle.result()
    return calls


async def test_back_from_dark_removes_only_what_replicas_the_ledger_does_not_hold_left(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    fake = FakeCluster(
        objects={("ns", "moved-1"), ("ns", "kept-1"), ("other", "kept-1"), ("ns", "new-1")},
        ledger={"ns/kept-1"},
        booked_while_listing="ns/new-1",
    )
    calls = await _dark_then_back(time_skipping_env, fake)
    # Listed first, ledger asked second: the replica booked meanwhile is kept.
    assert calls[:3] == ["list", "ledger", "sweep ns/moved-1,other/kept-1"]
    # The follow-ups find the kept replicas still held: they list and ask, and delete nothing.
    assert set(calls[3:]) <= {"list", "ledger"}
    assert fake.objects == {("ns", "kept-1"), ("ns", "new-1")}


async def test_nothing_to_sweep_when_every_replica_found_is_in_the_ledger(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    """Serving replicas the ledger holds are never deleted, and the follow-ups that look again
    (they might have been on their way out) stop after their bound."""
    fake = FakeCluster(objects={("ns", "a"), ("ns", "b")}, ledger={"ns/a", "ns/b"})
    calls = await _dark_then_back(time_skipping_env, fake, probes_after=FOLLOW_UPS + 3)
    assert calls == ["list", "ledger"] * (1 + FOLLOW_UPS)
    assert fake.objects == {("ns", "a"), ("ns", "b")}


async def test_a_failed_sweep_is_tried_again_at_the_next_ready_probe(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    fake = FakeCluster(objects={("ns", "moved")}, sweep_failures=1)
    calls = await _dark_then_back(time_skipping_env, fake)
    assert calls == ["list", "ledger", "sweep ns/moved", "list", "ledger", "sweep ns/moved"]
    assert fake.objects == set()


async def test_a_run_continued_while_dark_still_sweeps_on_return(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    """The dark flag rides continue-as-new (``ClusterState.sweep_pending``): a run that starts
    NotReady with it sweeps at its first Ready probe, and says so in its status until then."""
    env = time_skipping_env
    fake = FakeCluster(objects={("ns", "moved-1")}, up=False)
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(
        env.client, task_queue=queue, workflows=[ClusterWorkflow], activities=fake.activities()
    ):
        handle = await env.client.start_workflow(
            ClusterWorkflow.run,
            ClusterInput(
                state=ClusterState(spec=SPEC, ready=False, failed_probes=3, sweep_pending=True)
            ),
            id=f"cluster/{SPEC.name}-{uuid.uuid4()}",
            task_queue=queue,
            result_type=ClusterStatus,
        )
        status = await _until(env, handle, lambda s: s.last_probe is not None)
        assert status.sweep_pending
        assert not status.ready
        assert fake.calls == []
        fake.up = True
        status = await _until(env, handle, lambda s: s.ready and not s.sweep_pending)
        # Started afresh (the test gives it no earlier run): it asks what to watch again too.
        assert fake.calls == ["list", "ledger", "sweep ns/moved-1", "rewatch"]
        assert fake.objects == set()
        await handle.execute_update(ClusterWorkflow.delete)
        await handle.result()


async def _until_fake(env: WorkflowEnvironment, want: Callable[[], bool], what: str) -> None:
    for _ in range(200):
        if want():
            return
        await env.sleep(timedelta(seconds=5))
    raise AssertionError(f"never reached: {what}")


async def test_a_replica_released_just_after_the_return_sweep_is_removed_by_a_follow_up(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    """The race: a teardown gave up on the dark cluster, and its replica is released in the
    Fleet only after the cluster came back and its sweep asked the ledger. The return sweep
    keeps it (held); a follow-up at a next probe finds it released and removes it."""
    fake = FakeCluster(
        objects={("ns", "gave-up"), ("ns", "serving")},
        ledger={"ns/gave-up", "ns/serving"},
        released_after_asked="ns/gave-up",
    )
    calls = await _dark_then_back(time_skipping_env, fake)
    assert calls[:2] == ["list", "ledger"], "the return sweep kept what the ledger held"
    assert calls[2:5] == ["list", "ledger", "sweep ns/gave-up"]
    assert set(calls[5:]) <= {"list", "ledger"}
    assert fake.objects == {("ns", "serving")}


async def test_the_slow_resync_sweeps_what_was_left_while_the_cluster_stayed_ready(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    """No dark spell at all: what a crashed teardown or a terminated replica workflow left is
    removed at the next resync (``sweep_resync_seconds``), not before, and again at the one
    after for something left later; replicas the ledger holds stay."""
    env = time_skipping_env
    fake = FakeCluster(objects={("ns", "crashed"), ("ns", "serving")}, ledger={"ns/serving"})
    resync = timedelta(seconds=120)
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(
        env.client, task_queue=queue, workflows=[ClusterWorkflow], activities=fake.activities()
    ):
        handle = await env.client.start_workflow(
            ClusterWorkflow.run,
            ClusterInput.of(SPEC, sweep_resync_seconds=int(resync.total_seconds())),
            id=f"cluster/{SPEC.name}-{uuid.uuid4()}",
            task_queue=queue,
            result_type=ClusterStatus,
        )
        await _until(env, handle, lambda s: s.ready)
        assert fake.calls == ["rewatch"]  # started afresh
        fake.calls.clear()
        started = await env.get_current_time()
        await _until_fake(env, lambda: ("ns", "crashed") not in fake.objects, "first resync")
        waited = await env.get_current_time() - started
        assert resync - timedelta(seconds=20) <= waited <= resync + timedelta(seconds=40), waited
        assert fake.calls == ["list", "ledger", "sweep ns/crashed"]
        fake.objects.add(("ns", "terminated"))
        await _until_fake(env, lambda: ("ns", "terminated") not in fake.objects, "next resync")
        assert fake.calls[3:] == ["list", "ledger", "sweep ns/terminated"]
        assert fake.objects == {("ns", "serving")}
        status = await handle.query(ClusterWorkflow.status)
        assert status.ready
        assert not status.sweep_pending
        fake.ledger.clear()
        await handle.execute_update(ClusterWorkflow.delete)
        await handle.result()


async def _until_real(
    handle: WorkflowHandle[Any, Any], want: Callable[[ClusterStatus], bool], what: str
) -> ClusterStatus:
    """On the real dev server: poll the status until ``want`` (bounded)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while True:
        status: ClusterStatus = await handle.query(ClusterWorkflow.status)
        if want(status):
            return status
        assert loop.time() < deadline, f"never: {what}; last status {status}"
        await asyncio.sleep(0.1)


@workflow.defn(name="WatchedReplicaStandIn", sandboxed=False)
class WatchedReplicaStandIn:
    """A watched replica's workflow: it only collects what its cluster tells it."""

    def __init__(self) -> None:
        self.news: list[str] = []

    @workflow.signal(name=REPLICA_HEALTH)
    def health(self, news: HealthNews) -> None:
        self.news.append(news.kind.value)

    @workflow.query
    def told(self) -> list[str]:
        return self.news

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)


async def test_the_state_rides_continue_as_new_whole(carrying_client: Client) -> None:
    """On a server that suggests continue-as-new after a few dozen events: a run that is dark,
    with a replica registered in an earlier run, hands on its settings and its whole state (the
    dark flag, the failed probes, the watched replica, the creation time), and the next run
    sweeps on return."""
    client = carrying_client
    fake = FakeCluster(objects={("ns", "moved-1")})

    @activity.defn(name=KUBE_SCAN_REPLICAS)
    async def scan(request: ScanRequest) -> ScanResult:
        return ScanResult()

    queue = f"tq-{uuid.uuid4()}"
    wid = f"cluster/{SPEC.name}-{uuid.uuid4()}"
    async with Worker(
        client,
        task_queue=queue,
        workflows=[ClusterWorkflow, WatchedReplicaStandIn],
        activities=[*fake.activities(), scan],
    ):
        replica = await client.start_workflow(
            WatchedReplicaStandIn.run, id="replica/ns/r-1", task_queue=queue
        )
        handle = await client.start_workflow(
            ClusterWorkflow.run,
            ClusterInput.of(SPEC, probe_interval_seconds=1, failure_threshold=1),
            id=wid,
            task_queue=queue,
        )
        watched = WatchedReplica(key="ns/r-1", workflow_id="replica/ns/r-1", objects=3)
        await handle.signal(WATCH_REPLICA, watched)
        # Runs continue-as-new every few probes here: follow whichever run is current.
        latest = client.get_workflow_handle(wid)
        await _until_real(latest, lambda s: s.ready, "Ready")
        fake.up = False
        asked = len(fake.calls)
        await _until_real(latest, lambda s: s.sweep_pending, "dark, a sweep pending")
        dark_run = (await latest.describe()).run_id
        assert dark_run is not None
        first = await continued(client, wid, dark_run)
        held: ClusterStatus = await first.query(ClusterWorkflow.status)
        carried = ClusterInput.model_validate(await carried_input(first))
        assert (carried.probe_interval_seconds, carried.failure_threshold) == (1, 1)
        state = carried.state
        assert state.spec == SPEC
        assert (state.ready, state.sweep_pending) == (False, True)
        assert state.failed_probes == held.failed_probes >= 1
        assert state.created == held.created
        assert list(state.watched) == ["ns/r-1"]
        assert state.watched["ns/r-1"].workflow_id == watched.workflow_id
        # Told once that its cluster went silent, and that is carried too (not told again).
        assert state.watched["ns/r-1"].unreachable
        assert await replica.query(WatchedReplicaStandIn.told) == [NewsKind.UNREACHABLE.value]
        # The next run knows all of it: dark, a sweep due on return, created when it was.
        now = await _until_real(latest, lambda s: s.last_probe is not None, "a probe")
        assert now.created == held.created
        assert now.sweep_pending
        fake.up = True
        await _until_real(latest, lambda s: s.ready and not s.sweep_pending, "swept on return")
        assert ("ns", "moved-1") not in fake.objects
        # Continued runs, not started afresh: only the first run asked what to watch again.
        assert fake.calls[:asked] == ["rewatch"]
        assert fake.calls[asked:] == ["list", "ledger", "sweep ns/moved-1"]
        await latest.terminate()
        await replica.terminate()
