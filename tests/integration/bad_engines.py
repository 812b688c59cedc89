"""What the bad-engine figures modules share (issue 27, item 5): the cases, how one is run
under load and measured (``run_change``, ``run_dark``), how its figures are checked
(``check_figures``) and the environment (``figures_env``). The modules:
``test_bad_engine_figures`` (the changes and the dark cluster, concurrently),
``test_bad_engine_sigkill`` (the changes again with one worker SIGKILL in the middle of every
roll), ``test_bad_engine_good_image`` (a good image on its own) and ``test_route_gate``. Each has
an environment of its own, so the xdist processes run them side by side.

How a bad engine is contained, measured (issue 27, item 5): the official ``openai`` client
sends chat completions at a steady rate through a ModelService over a Ready 2-replica deployment
while a change is applied to it, and the run counts what a caller and an operator see:

- requests sent and failed (target: at most 1% failed);
- serving replicas, counted by engines that pass health (every engine pod of the replica Ready
  as its cluster's kubelet has it, read from the cluster, not from modelfleet's status), sampled
  twice a second (target: never below ``replicas - maxUnavailable``);
- for a bad change, when its failure was first visible on the cluster (a restart, a back-off, an
  image that does not come up; for the 5xx image, its first engine Ready) and when the
  deployment said it rolled back (target: within 60 s).

The environment is ``crash_env``'s (its own dev server, the simulated quickstart fleet and a
worker process that can be SIGKILLed), with the front door on h100-east. The bad images are the
simulator's per-image faults (the never-ready image cannot be pulled: the registry says it is
not there).
Deployments keep the product's defaults (``maxSurge`` 1, ``maxUnavailable`` unset: 1 for two
replicas) except ``progressDeadlineSeconds``: 30 s here (see ``PROGRESS_DEADLINE``) for the
cases that do not need the default to make their point, and what ``Knobs`` sets: the test
modules run with ``TEST_KNOBS`` (``minReadySeconds`` 20 s, the slow crasher crashing 100 s after
each start: the same behaviour in less time), ``bench/bad_engine_figures.py`` with
``DEFAULT_KNOBS`` (the product's ``minReadySeconds`` 30 s, a crash 150 s after each start) and
prints the figures ``docs/operations.md`` quotes. Waits are on conditions, bounded; the load is
paced.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from crash_env import CrashEnv, all_ready, crash_env, tolerant
from integration_support import Load, cancel_and_wait, deployment, model_service, wait_for

from modelfleet.api.deployments import ClusterSelector, ModelDeployment, Strategy
from modelfleet.api.kinds import parse_resource
from modelfleet.api.naming import LABEL_SERVING, workload_namespace
from modelfleet.applying.serving import apply_serving, delete_serving
from modelfleet.cli.apply import apply_resource
from modelfleet.contracts.ids import deployment_id, service_id
from modelfleet.contracts.serving_payloads import ENDPOINTS_ID, ServiceStatus
from modelfleet.deployment.workflow import DeploymentWorkflow
from modelfleet.rendering.front_door import EndpointRecord
from modelfleet.service.workflow import ServiceWorkflow

MODEL = "qwen"
GATEWAY_CLUSTER = "h100-east"
DARK_CLUSTER = "l4-dev"
OLD_IMAGE = "vllm/vllm-openai:v0.23.0"
STARTUP_SECONDS = 2.0
# Per case: one chat completion every 200 ms (5 per second), each on its own (open loop).
PACE_SECONDS = 0.2
MAX_FAILED_SHARE = 0.01
MIN_REQUESTS = 150
ROLLBACK_WITHIN = 60.0
MOVED_WITHIN = 30.0
# The dark case goes on (bounded) until this many requests were sent, a third after dark.
DARK_REQUESTS = 200
# The product's default is 1800 s (Kubernetes' 600 s). A replacement that crash-loops before
# Ready (arguments the engine rejects) fails at its second restart (``crashLoopRestarts``), and
# one whose image cannot be pulled for good (not found, access refused) once the kubelet has
# retried the pull: both shown with the default deadline.
PROGRESS_DEADLINE = 30
ROLLED_BACK = "rolled back to the last good template"
BACK_OFF = {"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "Error"}


@dataclass(frozen=True)
class Case:
    name: str
    image: str
    fault: dict[str, Any] | None = None
    # What makes its failure visible: "restart" (a restart or back-off of a new pod), "pod" (a
    # new pod that does not come up), "ready" (its first new engine Ready: it fails requests
    # from then on); None for a good change.
    visible: str | None = "restart"
    kill_worker: bool = False
    # How long the case may run after the change (a slow crasher fails late).
    limit: float = 150.0
    # Words the rollback's reason must carry (which trigger caught it).
    because: str = ""
    # The change keeps the product's default progress deadline (1800 s), not PROGRESS_DEADLINE.
    default_deadline: bool = False
    # The change also sets the engine's ``--served-model-name`` (what ``/v1/models`` lists).
    served_model_name: str | None = None
    # > 0: the worker is SIGKILLed as soon as an old replica's endpoint leaves the endpoint
    # directory (right after its ``endpoints.withdraw``), and kept down this many seconds.
    kill_on_withdraw: float = 0.0
    # Faults of the front door's cluster for the case (``FaultConfig`` fields; undone after).
    front_door_faults: dict[str, Any] | None = None


@dataclass(frozen=True)
class Knobs:
    """What sets the pace of a run: the deployments' ``minReadySeconds`` and how long the slow
    crasher serves after each start (it must outlive ``minReadySeconds`` and the roll, so that
    only the rollback window can catch it)."""

    min_ready_seconds: int = Strategy().min_ready_seconds  # the product's default, 30
    slow_crash_after: float = 150.0

    @property
    def slow_crash_limit(self) -> float:
        # The slow crasher's crash, then its crash loop and the rollback (180 s, as with 150).
        return self.slow_crash_after + 180.0


DEFAULT_KNOBS = Knobs()
# The roll with minReadySeconds 20 s takes about 60 s on a loaded machine: 100 s of serving
# after each start outlives it and minReadySeconds, as 150 s outlives the default's 80 s.
# minReadySeconds is also the 5xx image's sample: at 5 requests/s over three endpoints, about
# 33 answers, well above the 20 the error check needs (``ERROR_SAMPLE``).
TEST_KNOBS = Knobs(min_ready_seconds=20, slow_crash_after=100.0)


def cases(knobs: Knobs) -> list[Case]:
    """``CASES`` with ``knobs``' slow crasher."""
    return [
        replace(
            c,
            fault={"crash_after_seconds": knobs.slow_crash_after},
            limit=knobs.slow_crash_limit,
        )
        if c.name == "slow-crash"
        else c
        for c in CASES
    ]


def image_faults(knobs: Knobs) -> dict[str, dict[str, Any]]:
    return {c.image: c.fault for c in cases(knobs) if c.fault}


CASES = [
    # Ready, then crashes 5 s later, again after each restart: inside its minReadySeconds.
    Case("crash-loop", "vllm/vllm-openai:v0.23.0-crashloop", {"crash_after_seconds": 5}),
    Case(
        "rejected-args",
        "vllm/vllm-openai:v0.23.0-badargs",
        {"reject_args": ["*"]},
        because="crash-looping before Ready (2 restarts)",
        default_deadline=True,
    ),
    # Cannot be pulled: the registry answers "not found" (ErrImagePull, then ImagePullBackOff,
    # again and again); its first sign is the first of those.
    Case(
        "never-ready",
        "vllm/vllm-openai:v0.23.0-neverready",
        {"pull_error": "not-found"},
        because="image cannot be pulled",
        default_deadline=True,
    ),
    # Answers 20% of its completions 500 from its first Ready: its engines' error rate over
    # minReadySeconds (above maxErrorPercent, 5% by default) fails it.
    Case(
        "errors-20pct",
        "vllm/vllm-openai:v0.23.0-errors",
        {"error_rate_5xx": 0.2},
        visible="ready",
        because="requests with 5xx",
    ),
    # Serves 150 s after each start (``Knobs.slow_crash_after``): it outlives minReadySeconds
    # and the roll (about 80 s with the default 30 s), then crash-loops; the rollback window
    # (600 s after the roll) catches it.
    Case(
        "slow-crash",
        "vllm/vllm-openai:v0.23.0-slowcrash",
        {"crash_after_seconds": DEFAULT_KNOBS.slow_crash_after},
        limit=DEFAULT_KNOBS.slow_crash_limit,
        because="within its rollback window",
    ),
]
# A good image rolled under load: every request answered (each replaced replica drains, its
# endpoint withdrawn and the routes rewritten without it, before its objects go).
GOOD_CASE = Case("good-image", "vllm/vllm-openai:v0.23.1", visible=None)
# The same changes with the worker SIGKILLed in the middle of each (the slow crasher's roll is
# over long before it fails: nothing of it is mid-roll but the roll itself, which the good image
# shows). Five cases at 3 GPUs each fit h100-east's 16, as the concurrent batch does.
KILLED_CASES = [
    replace(c, name=f"{c.name}-kill", kill_worker=True)
    for c in [*CASES, GOOD_CASE]
    if c.name in ("crash-loop", "rejected-args", "never-ready", "errors-20pct", "good-image")
]


@dataclass
class Figures:
    case: str
    requests: int = 0
    failed: list[str] = field(default_factory=list)
    floor: int = 1
    min_serving: int | None = None
    visible_at: float | None = None
    rolled_back_at: float | None = None
    done_at: float | None = None
    served: collections.Counter[str] = field(default_factory=collections.Counter)
    summary: str = ""
    rollback_reason: str = ""
    note: str = ""
    # ``rollout history``: each kept revision's outcome, read after the case.
    history: list[str] = field(default_factory=list)
    # When the batch's worker SIGKILL came, after the change (seconds).
    killed_at: float | None = None

    @property
    def failed_share(self) -> float:
        return len(self.failed) / self.requests if self.requests else 1.0

    @property
    def rollback_seconds(self) -> float | None:
        if self.rolled_back_at is None or self.visible_at is None:
            return None
        return max(0.0, self.rolled_back_at - self.visible_at)

    def row(self) -> str:
        back = self.rollback_seconds
        return (
            f"| {self.case} | {self.requests} | {len(self.failed)} | "
            f"{100 * self.failed_share:.2f}% | {self.min_serving} (floor {self.floor}) | "
            f"{'-' if back is None else f'{back:.1f} s'} | {self.note} |"
        )


def _deployment(
    name: str, ns: str, image: str, region: str, replicas: int, knobs: Knobs
) -> ModelDeployment:
    md = deployment(name, ns, replicas=replicas, image=image)
    md.spec.template.spec.cluster_selector = ClusterSelector(match_labels={"region": region})
    md.spec.strategy.min_ready_seconds = knobs.min_ready_seconds  # (the helper shortens it)
    md.spec.strategy.progress_deadline_seconds = PROGRESS_DEADLINE
    return md


def _with_image(
    md: ModelDeployment, image: str, served_model_name: str | None = None
) -> ModelDeployment:
    changed = md.model_copy(deep=True)
    container = changed.spec.template.spec.engines[0].members[0].template.spec.containers[0]
    container.image = image
    if served_model_name is not None:
        container.args = [
            a for a in container.args or [] if not a.startswith("--served-model-name")
        ] + [f"--served-model-name={served_model_name}"]
    return changed


async def _endpoint_names(env: CrashEnv, ns: str) -> set[str] | None:
    handle = env.temporal.get_workflow_handle(ENDPOINTS_ID)
    records = await tolerant(
        lambda: handle.query("list_endpoints", ns, result_type=list[EndpointRecord])
    )
    return None if records is None else {r.name for r in records}


async def _kill_on_withdraw(env: CrashEnv, ns: str, old: set[str], down: float) -> str:
    """SIGKILL the worker the moment one of ``old``'s endpoints leaves the directory (its
    replica's ``endpoints.withdraw`` done, the services told, nothing yet confirmed); start it
    again ``down`` seconds later (longer than the 5 s drain timer it replaced)."""

    async def withdrawn() -> str | None:
        names = await _endpoint_names(env, ns)
        gone = sorted(old - names) if names is not None else []
        return gone[0] if gone else None

    start = time.monotonic()
    name = await wait_for(withdrawn, 240, f"{ns}: an old replica's endpoint withdrawn")
    await env.kill_worker()
    killed = time.monotonic() - start
    # The length of the outage is the fault itself, not a synchronisation.
    await asyncio.sleep(down)
    await env.start_worker()
    return f"worker SIGKILLed {killed:.1f} s after the change ({name} withdrawn), down {down:g} s"


async def _service_status(env: CrashEnv, ns: str) -> ServiceStatus:
    status: ServiceStatus = await env.temporal.get_workflow_handle(service_id(ns, "svc")).query(
        ServiceWorkflow.status
    )
    return status


async def _serve(env: CrashEnv, ns: str, deployments: list[str], endpoints: int) -> str:
    """A ModelService over ``deployments``; its address once ``endpoints`` are in rotation."""
    await apply_serving(env.temporal, model_service(ns, deployments))

    seen: list[ServiceStatus] = []

    async def in_rotation() -> str | None:
        status = await tolerant(lambda: _service_status(env, ns))
        if status is None:
            return None
        seen[:] = [status]
        live = [e for e in status.endpoints if e.weight > 0]
        return status.address if status.address and len(live) == endpoints else None

    try:
        return await wait_for(in_rotation, 120, f"{ns}: {endpoints} endpoints in rotation")
    except AssertionError as exc:
        last = seen[0].model_dump_json() if seen else "no status answered"
        raise AssertionError(f"{exc}; last status: {last}") from None


@dataclass
class Engines:
    """A deployment's engines on one cluster, read from the cluster: per replica, whether
    every engine pod is Ready, and the new image's troubles."""

    serving: dict[str, str]  # replica -> image, of replicas whose engine pods are all Ready
    replicas: dict[str, str]  # replica -> image, of every replica with an engine pod
    troubled: bool  # a pod of the new image restarted, backs off or terminated
    new_ready: bool  # a replica of the new image passes health
    # When the kubelet first reported a container crash in the namespace (its BackOff Event,
    # epoch seconds): kept after the crashed pod is deleted, which a sample may never see.
    crashed_at: float | None = None


async def _engines(env: CrashEnv, cluster: str, ns: str, new_image: str) -> Engines:
    pods = await env.fleet.store(cluster).list("v1", "Pod", namespace=workload_namespace(ns))
    ready: dict[str, bool] = {}
    images: dict[str, str] = {}
    troubled = False
    for pod in pods:
        replica = (pod["metadata"].get("labels") or {}).get(LABEL_SERVING)
        if not replica:
            continue
        image = pod["spec"]["containers"][0]["image"]
        images[replica] = image
        status = pod.get("status") or {}
        pod_ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        ready[replica] = ready.get(replica, True) and pod_ready
        if image == new_image:
            for s in status.get("containerStatuses") or []:
                state = s.get("state") or {}
                waiting = (state.get("waiting") or {}).get("reason")
                if (
                    int(s.get("restartCount") or 0) > 0
                    or waiting in BACK_OFF
                    or "terminated" in state
                ):
                    troubled = True
    serving = {r: images[r] for r, ok in ready.items() if ok}
    events = await env.fleet.store(cluster).list("v1", "Event", namespace=workload_namespace(ns))
    crashes = [
        datetime.fromisoformat(str(e["firstTimestamp"]).replace("Z", "+00:00")).timestamp()
        for e in events
        if e.get("reason") == "BackOff"
        and str(e.get("message", "")).startswith("Back-off restarting failed container")
    ]
    return Engines(
        serving=serving,
        replicas=images,
        troubled=troubled,
        new_ready=new_image in serving.values(),
        crashed_at=min(crashes) if crashes else None,
    )


async def _delete(env: CrashEnv, ns: str, names: list[str]) -> None:
    """Best effort, also after a failure (the failure is what the run reports)."""
    with contextlib.suppress(Exception):
        await delete_serving(env.temporal, "ModelService", ns, "svc", wait=True)
    for name in names:
        with contextlib.suppress(Exception):
            handle = env.temporal.get_workflow_handle(deployment_id(ns, name))
            await handle.execute_update(DeploymentWorkflow.delete)
            await asyncio.wait_for(handle.result(), 90)


class OneKill:
    """One worker SIGKILL for a batch of cases run together: each case waits at ``start`` until
    every case is ready to apply its change, so the changes go in together; the worker is
    killed (and restarted at once) when the last of them reports its roll under way (its
    failure visible on the cluster, or the good image's first replacement Ready), so every
    deployment is in the middle of deciding and none is done."""

    def __init__(self, env: CrashEnv, cases: int) -> None:
        self.env = env
        self.barrier = asyncio.Barrier(cases)
        self.cases = cases
        self.rolling: set[str] = set()
        self.killed_at: float | None = None  # time.monotonic()

    async def start(self) -> None:
        # Bounded: a case that failed its set-up must not hold the others forever.
        await asyncio.wait_for(self.barrier.wait(), 300)

    async def roll_seen(self, case: str) -> None:
        self.rolling.add(case)
        if len(self.rolling) == self.cases and self.killed_at is None:
            self.killed_at = time.monotonic()
            await self.env.kill_worker()
            await self.env.start_worker()


async def run_change(
    env: CrashEnv, case: Case, kill: OneKill | None = None, knobs: Knobs = TEST_KNOBS
) -> Figures:
    """Apply ``case``'s change to a Ready 2-replica deployment under load; its figures. With
    ``kill``, the change waits for the batch's other cases and the worker is SIGKILLed once
    every one of them is rolling."""
    ns = f"fig-{case.name}"
    figures = Figures(case.name)
    md = _deployment("m", ns, OLD_IMAGE, "us-east", 2, knobs)
    figures.floor = md.spec.replicas - md.spec.strategy.unavailable(md.spec.replicas)
    load: Load | None = None
    killer: asyncio.Task[str] | None = None
    try:
        await apply_resource(env.temporal, md)
        await env.wait_status(ns, "m", all_ready(2), 120, "Ready before the change")
        load = Load(await _serve(env, ns, ["m"], 2), model=MODEL, pace=PACE_SECONDS)
        load.start()
        await wait_for(
            lambda: _true(load is not None and sum(load.served.values()) >= 20),
            60,
            f"{ns}: load served",
        )
        if case.front_door_faults:
            env.fleet.update_faults(GATEWAY_CLUSTER, case.front_door_faults)
        if kill is not None:
            await kill.start()
        start, started_wall = time.monotonic(), time.time()
        changed = _with_image(md, case.image, case.served_model_name)
        if case.default_deadline:
            changed.spec.strategy.progress_deadline_seconds = Strategy().progress_deadline_seconds
        if case.kill_on_withdraw:
            old = await wait_for(
                lambda: _endpoint_names(env, ns), 30, f"{ns}: the old replicas' endpoints"
            )
            killer = asyncio.create_task(_kill_on_withdraw(env, ns, old, case.kill_on_withdraw))
        await apply_resource(env.temporal, changed)
        rolling = False
        deadline = start + case.limit
        lowest = 2
        while time.monotonic() < deadline:
            now = time.monotonic() - start
            engines = await _engines(env, GATEWAY_CLUSTER, ns, case.image)
            lowest = min(lowest, len(engines.serving))
            if (
                figures.visible_at is None
                and case.visible == "restart"
                and engines.crashed_at is not None
            ):
                # Events carry whole seconds: never before the change.
                figures.visible_at = max(0.0, engines.crashed_at - started_wall)
            if figures.visible_at is None and (
                (case.visible == "restart" and engines.troubled)
                or (
                    case.visible == "pod"
                    and case.image in engines.replicas.values()
                    and not engines.new_ready
                )
                or (case.visible == "ready" and engines.new_ready)
            ):
                figures.visible_at = now
            if (
                kill is not None
                and not rolling
                and (engines.new_ready if case.visible is None else figures.visible_at is not None)
            ):
                # Mid-roll: its failure shows (the good image: its first replacement is Ready),
                # so the deployment is deciding; the last case to get there kills.
                rolling = True
                await kill.roll_seen(case.name)
            if kill is not None and kill.killed_at is not None and figures.killed_at is None:
                figures.killed_at = kill.killed_at - start
                figures.note = f"worker SIGKILLed at {figures.killed_at:.1f} s, restarted"
            status = await tolerant(lambda: env.status(ns, "m"))
            if status is not None:
                figures.summary = status.summary
                if ROLLED_BACK in status.summary and figures.rolled_back_at is None:
                    figures.rolled_back_at = now
                    figures.rollback_reason = status.summary
                settled = (
                    status.phase == "Ready"
                    and status.ready == 2
                    and len(engines.replicas) == 2
                    and len(engines.serving) == 2
                )
                expected = OLD_IMAGE if case.visible else case.image
                if (
                    settled
                    and set(engines.replicas.values()) == {expected}
                    and (case.visible is None or figures.rolled_back_at is not None)
                ):
                    figures.done_at = now
                    break
            if (
                case.visible is not None
                and figures.visible_at is not None
                and figures.rolled_back_at is None
                and now > figures.visible_at + ROLLBACK_WITHIN + 10
            ):
                break  # not rolled back in time: that is the figure
            await asyncio.sleep(0.5)
        figures.min_serving = lowest
        if killer is not None:
            figures.note = await asyncio.wait_for(killer, 60)
        revisions = await tolerant(
            lambda: env.temporal.get_workflow_handle(deployment_id(ns, "m")).query(
                DeploymentWorkflow.revisions
            )
        )
        figures.history = [r.outcome for r in revisions or []]
        # Enough requests for 1% to mean something, whatever the case took.
        await wait_for(
            lambda: _true(load is not None and load.sent >= MIN_REQUESTS), 60, f"{ns}: the load"
        )
        await load.stop()
        figures.requests, figures.failed = load.sent, load.failed
        figures.served = load.served
        load = None
        return figures
    finally:
        if killer is not None and not killer.done():
            await cancel_and_wait(killer)
        if env.worker is None or env.worker.returncode is not None:
            await env.start_worker()
        if case.front_door_faults:
            env.fleet.update_faults(
                GATEWAY_CLUSTER, {"latency_seconds": 0.0, "verbs": [], "resources": []}
            )
        if load is not None:
            with contextlib.suppress(Exception):
                await load.stop()
        await _delete(env, ns, ["m"])


async def run_dark(env: CrashEnv, knobs: Knobs = TEST_KNOBS) -> Figures:
    """A service over one replica on h100-east and one on l4-dev; l4-dev goes dark (its API
    and its engines answer nothing: connections drop) under load."""
    ns = "fig-dark"
    figures = Figures("dark-cluster", floor=1)
    load: Load | None = None
    try:
        await asyncio.gather(
            apply_resource(env.temporal, _deployment("near", ns, OLD_IMAGE, "us-east", 1, knobs)),
            apply_resource(env.temporal, _deployment("far", ns, OLD_IMAGE, "us-central", 1, knobs)),
        )
        await asyncio.gather(
            env.wait_status(ns, "near", all_ready(1), 120, "Ready"),
            env.wait_status(ns, "far", all_ready(1), 120, "Ready"),
        )
        load = Load(await _serve(env, ns, ["near", "far"], 2), model=MODEL, pace=PACE_SECONDS)
        load.start()
        await wait_for(
            lambda: _true(
                load is not None
                and {k.split("-", 1)[0] for k, n in load.served.items() if n >= 5}
                == {"near", "far"}
            ),
            60,
            "both replicas serving",
        )
        env.fleet.update_faults(DARK_CLUSTER, {"dark": True, "dark_mode": "reset"})
        start = time.monotonic()
        served_far_before = sum(n for k, n in load.served.items() if k.startswith("far-"))
        lowest = 2
        try:
            while time.monotonic() < start + 60:
                near = await _engines(env, GATEWAY_CLUSTER, ns, "-")
                lowest = min(lowest, len(near.serving))  # the dark cluster's engines answer nothing
                status = await tolerant(lambda: _service_status(env, ns))
                if status is not None and figures.visible_at is None:
                    far_live = [
                        e for e in status.endpoints if e.name.startswith("far-") and e.weight > 0
                    ]
                    if not far_live:
                        # Out of rotation: the service's probes moved its traffic.
                        figures.visible_at = time.monotonic() - start
                if figures.visible_at is not None and load.sent >= DARK_REQUESTS:
                    break
                await asyncio.sleep(0.5)
        finally:
            env.fleet.update_faults(DARK_CLUSTER, {"dark": False})
        figures.min_serving = lowest
        served_far_after = sum(n for k, n in load.served.items() if k.startswith("far-"))
        await load.stop()
        figures.requests, figures.failed, figures.served = load.sent, load.failed, load.served
        load = None
        moved = figures.visible_at
        figures.note = (
            f"out of rotation {'never' if moved is None else f'{moved:.1f} s'} after dark; "
            f"{served_far_after - served_far_before} served by it while dark"
        )
        figures.done_at = moved
        return figures
    finally:
        if load is not None:
            with contextlib.suppress(Exception):
                await load.stop()
        await _delete(env, ns, ["near", "far"])


async def _true(value: bool) -> bool | None:
    return True if value else None


@contextlib.asynccontextmanager
async def figures_env(state_dir: Path, knobs: Knobs = TEST_KNOBS) -> AsyncIterator[CrashEnv]:
    """crash_env's stack with the bad images' faults (``knobs``' slow crasher) on every cluster
    and the front door on GATEWAY_CLUSTER: each figures module has one of its own, so they can
    run side by side."""
    async with crash_env(state_dir, startup_seconds=STARTUP_SECONDS) as e:
        for cluster in e.fleet.cluster_names:
            e.fleet.update_faults(cluster, {"image_faults": image_faults(knobs)})
        await apply_resource(
            e.temporal,
            parse_resource(
                {
                    "apiVersion": "modelfleet.dev/v1alpha1",
                    "kind": "InferenceGateway",
                    "metadata": {"name": "default"},
                    "spec": {"cluster": GATEWAY_CLUSTER},
                }
            ),
        )
        yield e


def check_figures(figures: Figures | BaseException, case: Case | None) -> Figures:
    if isinstance(figures, BaseException):
        raise figures
    print(f"\n{figures.row()}\nsummary: {figures.summary}\nfailures: {figures.failed[:5]}")
    assert figures.requests >= MIN_REQUESTS, figures
    assert figures.failed_share <= MAX_FAILED_SHARE, figures.failed[:10]
    assert figures.min_serving is not None
    assert figures.min_serving >= figures.floor
    if case is not None and case.visible is None:
        assert figures.failed == []
        assert figures.done_at is not None, (
            f"the good image never finished rolling: {figures.summary}"
        )
    elif case is not None:
        assert figures.visible_at is not None, f"the failure never showed: {figures.summary}"
        assert figures.rollback_seconds is not None, f"not rolled back: {figures.summary}"
        assert figures.rollback_seconds <= ROLLBACK_WITHIN
        assert figures.done_at is not None, f"not back to the old replicas: {figures.summary}"
        assert case.because in figures.rollback_reason, figures.rollback_reason
    return figures
