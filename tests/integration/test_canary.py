"""SLO-gated canaries on the simulated fleet (issue 25, items 3 and 5): a 2-replica deployment
with ``strategy.canary`` (steps 50%, 100%; a 20 s window; the new replicas' TTFT p95 at most 5x
the stable ones') behind a ModelService, under steady load from the official ``openai`` client,
is given a new image:

- a slow image (the simulator's ``ttft_factor`` fault: every first token 100 times later) is
  rolled back automatically at its first step, with the measured figures in the status, the
  decision log and ``rollout history``; no more than its step's share of requests fails;
- a slow-decoding image (``tpot_factor``: every gap between output tokens 50 times longer, its
  first tokens as quick as ever) is rolled back on the inter-token latency p95 (``itlP95Ratio``);
- a good image passes its step's analysis and is promoted to every replica.

The figures (requests, failures, requests the new image served and their latency as the client
saw it, the analysis' own line) are printed. Waits are on conditions, bounded; the load is paced.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from integration_support import Load, Stack, cli, deployment, model_service, wait_for

from modelfleet.api.deployments import CanaryAnalysis, CanaryStrategy, ModelDeployment
from modelfleet.api.kinds import parse_resource
from modelfleet.api.naming import workload_namespace
from modelfleet.applying.serving import apply_serving, delete_serving
from modelfleet.cli.apply import apply_resource
from modelfleet.contracts.ids import deployment_id
from modelfleet.contracts.status import DeploymentStatus
from modelfleet.deployment.decisions import template_hash
from modelfleet.deployment.workflow import DeploymentWorkflow

pytestmark = pytest.mark.timeout(420)

GATEWAY_CLUSTER = "l4-dev"
OLD_IMAGE = "vllm/vllm-openai:v0.23.0"
GOOD_IMAGE = "vllm/vllm-openai:v0.23.1"
SLOW_IMAGE = "vllm/vllm-openai:v0.23.1-slowprefill"
SLOWER = 100.0
SLOW_DECODE_IMAGE = "vllm/vllm-openai:v0.23.1-slowdecode"
SLOWER_DECODE = 50.0
ERRORING_IMAGE = "vllm/vllm-openai:v0.23.1-errors"
ERROR_RATE = 0.3
MAX_ERRORS = 5.0
STEP = 50
WINDOW_SECONDS = 20
RATIO = 5.0
PACE_SECONDS = 0.1
ROLLED_BACK = "rolled back to the last good template"
# Set to a directory: each case also draws its requests and the canary's moments there.
PLOT_DIR = "MODELFLEET_CANARY_PLOT_DIR"


def _canaried(ns: str, itl_ratio: float | None = None) -> ModelDeployment:
    md = deployment("m", ns, replicas=2, image=OLD_IMAGE)
    md.spec.strategy.canary = CanaryStrategy(
        steps=[STEP, 100],
        analysis=CanaryAnalysis(
            window_seconds=WINDOW_SECONDS,
            ttft_p95_ratio=RATIO,
            max_error_percent=MAX_ERRORS,
            itl_p95_ratio=itl_ratio,
        ),
    )
    # The canary judges the error rate here, not the replacement's own check while it proves
    # itself (issue 27's, which would roll a 5xx image back before its step is analysed).
    md.spec.strategy.max_error_percent = 100
    return md


def _with_image(md: ModelDeployment, image: str) -> ModelDeployment:
    changed = md.model_copy(deep=True)
    changed.spec.template.spec.engines[0].members[0].template.spec.containers[0].image = image
    return changed


@dataclass
class Figures:
    case: str
    requests: int = 0
    failed: list[str] = field(default_factory=list)
    # Requests answered by engines of the new image, and the client's latency (seconds) of
    # those and of the others.
    served_new: int = 0
    served: int = 0
    latency_new: list[float] = field(default_factory=list)
    latency_old: list[float] = field(default_factory=list)
    analysing_after: float | None = None
    verdict_after: float | None = None
    done_after: float | None = None
    summary: str = ""
    analyses: list[str] = field(default_factory=list)
    outcome: str = ""
    log: list[str] = field(default_factory=list)
    history: str = ""
    described: str = ""

    @staticmethod
    def _p95(values: list[float]) -> str:
        if len(values) < 2:
            return "-"
        return f"{statistics.quantiles(values, n=20)[-1] * 1000:.0f} ms"

    def row(self) -> str:
        share = 100 * len(self.failed) / self.requests if self.requests else 0.0
        new = 100 * self.served_new / self.served if self.served else 0.0
        return (
            f"| {self.case} | {self.requests} | {len(self.failed)} ({share:.1f}%) | "
            f"{self.served_new} ({new:.0f}%) | {self._p95(self.latency_new)} | "
            f"{self._p95(self.latency_old)} | {self.analysing_after or 0:.0f} s | "
            f"{self.verdict_after or 0:.0f} s | {self.done_after or 0:.0f} s |"
        )


async def _gateway(stack: Stack) -> None:
    gateway = parse_resource(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "InferenceGateway",
            "metadata": {"name": "default"},
            "spec": {"cluster": GATEWAY_CLUSTER},
        }
    )
    await apply_resource(stack.client, gateway)


async def _serve(stack: Stack, ns: str) -> str:
    await apply_serving(stack.client, model_service(ns, ["m"]))

    async def in_rotation() -> str | None:
        status = await stack.service_status(ns, "svc")
        live = [e for e in status.endpoints if e.weight > 0]
        return status.address if status.address and len(live) == 2 else None

    return await wait_for(in_rotation, 120, f"{ns}: 2 endpoints in rotation")


async def _images(stack: Stack, ns: str, seen: dict[str, str]) -> None:
    """Engine pod -> image, read from the clusters (kept after a pod is gone)."""
    for cluster in stack.fleet.cluster_names:
        pods = await stack.fleet.store(cluster).list("v1", "Pod", namespace=workload_namespace(ns))
        for pod in pods:
            seen[pod["metadata"]["name"]] = pod["spec"]["containers"][0]["image"]


async def _run(
    stack: Stack, case: str, image: str, itl_ratio: float | None = None
) -> tuple[Figures, DeploymentStatus]:
    ns = f"canary-{case}"
    figures = Figures(case)
    md = _canaried(ns, itl_ratio)
    load: Load | None = None
    try:
        await apply_resource(stack.client, md)
        await stack.wait_status(ns, "m", lambda s: s.ready == 2 and s.phase == "Ready", 120)
        load = Load(await _serve(stack, ns), pace=PACE_SECONDS)
        load.start()
        await wait_for(
            lambda: _true(load is not None and sum(load.served.values()) >= 20),
            60,
            f"{ns}: load served",
        )
        changed = _with_image(md, image)
        old, new = template_hash(md), template_hash(changed)
        pods: dict[str, str] = {}
        start = time.monotonic()
        await apply_resource(stack.client, changed)
        status: DeploymentStatus | None = None
        while time.monotonic() < start + 240:
            await _images(stack, ns, pods)
            status = await stack.status(ns, "m")
            figures.summary = status.summary
            now = time.monotonic() - start
            if figures.analysing_after is None and status.summary.startswith("canary at"):
                figures.analysing_after = now
            if (
                figures.verdict_after is None
                and figures.analysing_after is not None
                and not status.summary.startswith("canary at")
            ):
                # The window's verdict: the summary leaves "canary at ...: analysing".
                figures.verdict_after = now
            bad = image != GOOD_IMAGE
            wanted = old if bad else new
            if (
                status.ready == 2
                and len(status.replicas) == 2
                and all(r.template_hash == wanted for r in status.replicas)
                and (not bad or ROLLED_BACK in status.summary)
            ):
                figures.done_after = now
                break
            await asyncio.sleep(0.5)
        assert status is not None
        await load.stop()
        figures.requests, figures.failed = load.sent, load.failed
        for pod, n in load.served.items():
            figures.served += n
            if pods.get(pod) == image:
                figures.served_new += n
                figures.latency_new += load.seconds[pod]
            else:
                figures.latency_old += load.seconds[pod]
        answers = load.answers
        load = None
        handle = stack.client.get_workflow_handle(deployment_id(ns, "m"))
        revisions = await handle.query(DeploymentWorkflow.revisions)
        figures.analyses, figures.outcome = revisions[-1].analyses, revisions[-1].outcome
        figures.log = [e.message for e in await handle.query(DeploymentWorkflow.decisions)]
        plot = os.environ.get(PLOT_DIR)
        if plot:
            _plot(figures, answers, pods, image, start, Path(plot) / f"canary-{case}.png")
        print(
            "\n| case | requests | failed | served by the new image | client p95 (new) | "
            f"client p95 (old) | window from | verdict after | settled after |\n"
            f"{figures.row()}\n"
            f"summary: {figures.summary}\nanalyses: {figures.analyses}\n"
            f"outcome: {figures.outcome}\nfailures: {figures.failed[:5]}"
        )
        # What a user reads, and nothing in progress any more: a person's promote is refused
        # with the reason.
        address = stack.client.service_client.config.target_host
        figures.history = await cli(address, "rollout", "history", "deployment/m", "-n", ns)
        figures.described = await cli(address, "describe", "deployment", "m", "-n", ns)
        refused = await cli(address, "rollout", "promote", "m", "-n", ns, expect=1)
        assert "no canary in progress" in refused, refused
        return figures, status
    finally:
        if load is not None:
            with contextlib.suppress(Exception):
                await load.stop()
        with contextlib.suppress(Exception):
            await delete_serving(stack.client, "ModelService", ns, "svc", wait=True)
        with contextlib.suppress(Exception):
            handle = stack.client.get_workflow_handle(deployment_id(ns, "m"))
            await handle.execute_update(DeploymentWorkflow.delete)
            await asyncio.wait_for(handle.result(), 90)


def _plot(
    figures: Figures,
    answers: list[tuple[float, float, str]],
    pods: dict[str, str],
    image: str,
    start: float,
    path: Path,
) -> None:
    """Each answered request's latency as the client saw it, by the image that served it, with
    the canary's moments (``MODELFLEET_CANARY_PLOT_DIR`` set: the figure in ``docs/``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    for new, colour, label in ((False, "tab:blue", "old image"), (True, "tab:red", "new image")):
        points = [(t - start, took * 1000) for t, took, pod in answers
                  if (pods.get(pod) == image) is new]  # fmt: skip
        if points:
            xs, ys = zip(*points, strict=True)
            ax.scatter(xs, ys, s=6, color=colour, label=label)
    moments = [
        (0.0, "change applied"),
        (figures.analysing_after, "analysis window starts"),
        (figures.verdict_after, "verdict"),
        (figures.done_after, "settled"),
    ]
    for x, what in moments:
        if x is not None:
            ax.axvline(x, color="grey", linestyle="--", linewidth=0.8)
            ax.text(x, ax.get_ylim()[1] * 0.95, f" {what}", rotation=90, va="top", fontsize=8)
    ax.set_yscale("log")
    ax.set_xlabel("seconds since the change")
    ax.set_ylabel("request latency (ms, openai client)")
    ax.set_title(f"canary {figures.case}: {figures.analyses[-1][:90] if figures.analyses else ''}")
    ax.title.set_fontsize(8)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


async def _true(value: bool) -> bool | None:
    return True if value else None


async def test_a_slow_image_is_rolled_back_at_its_first_canary_step(stack: Stack) -> None:
    for cluster in stack.fleet.cluster_names:
        stack.fleet.update_faults(cluster, {"image_faults": {SLOW_IMAGE: {"ttft_factor": SLOWER}}})
    await _gateway(stack)
    figures, status = await _run(stack, "slow", SLOW_IMAGE)
    assert figures.done_after is not None, f"not rolled back: {figures.summary}"
    assert ROLLED_BACK in status.summary
    assert f"canary step {STEP}% (1 of 2 replicas) failed" in status.summary
    assert "x the stable replicas'" in status.summary, status.summary
    assert figures.outcome.startswith(f"rolled back: canary step {STEP}%"), figures.outcome
    assert any("failed" in line for line in figures.analyses), figures.analyses
    print(figures.history)
    assert "revision 2 canary analyses:" in figures.history
    assert "x the stable replicas'" in figures.history
    assert f"canary step {STEP}% (1 of 2 replicas) failed" in figures.described
    # No more than the step's share of requests failed (the slow image answers, slowly), and
    # the slow image never served more than its step's share.
    assert len(figures.failed) <= figures.requests * STEP / 100
    assert figures.served_new > 0, "the slow image never served: nothing was measured"
    assert figures.served_new <= figures.served * STEP / 100 + 5
    # The client saw it too: the slow image's answers took longer than the others'.
    assert min(figures.latency_new) >= SLOWER * 0.002


async def test_a_slow_decoding_image_is_rolled_back_on_its_inter_token_latency(
    stack: Stack,
) -> None:
    for cluster in stack.fleet.cluster_names:
        stack.fleet.update_faults(
            cluster, {"image_faults": {SLOW_DECODE_IMAGE: {"tpot_factor": SLOWER_DECODE}}}
        )
    await _gateway(stack)
    figures, status = await _run(stack, "slowdecode", SLOW_DECODE_IMAGE, itl_ratio=RATIO)
    assert figures.done_after is not None, f"not rolled back: {figures.summary}"
    assert f"canary step {STEP}% (1 of 2 replicas) failed" in status.summary
    # Its first tokens pass the TTFT ratio; the gaps after them fail the inter-token one.
    assert "inter-token latency p95" in status.summary, status.summary
    assert f"(itlP95Ratio {RATIO:g})" in status.summary, status.summary
    assert "ITL p95" in figures.history, figures.history
    assert figures.served_new > 0, "the slow image never served: nothing was measured"
    assert len(figures.failed) <= figures.requests * STEP / 100
    # Each answer has one gap (two tokens at 2,000 tokens/s, 50 times slower): the client saw it.
    assert min(figures.latency_new) >= SLOWER_DECODE * 0.0005


async def test_an_erroring_image_is_rolled_back_at_its_first_canary_step(stack: Stack) -> None:
    for cluster in stack.fleet.cluster_names:
        stack.fleet.update_faults(
            cluster, {"image_faults": {ERRORING_IMAGE: {"error_rate_5xx": ERROR_RATE}}}
        )
    await _gateway(stack)
    figures, status = await _run(stack, "errors", ERRORING_IMAGE)
    assert figures.done_after is not None, f"not rolled back: {figures.summary}"
    assert f"canary step {STEP}% (1 of 2 replicas) failed" in status.summary
    assert f"above maxErrorPercent {MAX_ERRORS:g}%" in status.summary, status.summary
    # The client saw at most the step's share of its requests fail.
    assert len(figures.failed) <= figures.requests * STEP / 100


async def test_a_good_image_passes_its_canary_step_and_reaches_every_replica(
    stack: Stack,
) -> None:
    await _gateway(stack)
    figures, status = await _run(stack, "good", GOOD_IMAGE)
    assert figures.done_after is not None, f"never reached every replica: {figures.summary}"
    assert ROLLED_BACK not in status.summary
    assert len(figures.analyses) == 1, figures.analyses
    assert figures.analyses[0].startswith(f"canary step {STEP}% (1 of 2 replicas) passed")
    assert "canary: every replica runs the new template" in figures.log
    assert len(figures.failed) <= figures.requests // 100, figures.failed[:5]


async def test_a_person_aborts_or_promotes_a_canary_mid_window(stack: Stack) -> None:
    """``rollout abort`` during a step's window rolls back now; ``rollout promote`` during the
    next change's window rolls it to every replica without waiting the window out."""
    ns = "canary-person"
    md = _canaried(ns)
    assert md.spec.strategy.canary is not None
    md.spec.strategy.canary.analysis.window_seconds = 3600  # only a person ends it
    address = stack.client.service_client.config.target_host
    try:
        await apply_resource(stack.client, md)
        await stack.wait_status(ns, "m", lambda s: s.ready == 2 and s.phase == "Ready", 120)
        changes = (
            (GOOD_IMAGE, "abort", "aborted"),
            ("vllm/vllm-openai:v0.23.2", "promote", "promoted"),
        )
        for image, verb, done in changes:
            changed = _with_image(md, image)
            await apply_resource(stack.client, changed)
            await stack.wait_status(ns, "m", lambda s: s.summary.startswith("canary at"), 120)
            said = await cli(address, "rollout", verb, "deployment/m", "-n", ns)
            assert f"canary {done}" in said, said
            wanted = template_hash(md if verb == "abort" else changed)
            status = await stack.wait_status(
                ns,
                "m",
                lambda s, w=wanted: (
                    s.ready == 2
                    and len(s.replicas) == 2
                    and all(r.template_hash == w for r in s.replicas)
                ),
                120,
            )
            print(f"{verb}: {status.summary or '(no summary)'}")
            if verb == "abort":
                assert "canary aborted by `rollout abort`" in status.summary, status.summary
                assert ROLLED_BACK in status.summary
        handle = stack.client.get_workflow_handle(deployment_id(ns, "m"))
        log = [e.message for e in await handle.query(DeploymentWorkflow.decisions)]
        assert "canary promoted by `rollout promote`: rolling to every replica" in log, log
    finally:
        with contextlib.suppress(Exception):
            handle = stack.client.get_workflow_handle(deployment_id(ns, "m"))
            await handle.execute_update(DeploymentWorkflow.delete)
            await asyncio.wait_for(handle.result(), 90)
