"""The cluster CLI without a server: what ``get clusters`` and ``describe cluster`` show for a
cluster's record and workflow status, when ``rollout status cluster/NAME`` stops and how, the
cloud faults ``sim faults --cloud`` sends, and ``plan`` on GKE/EKS clusters."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from rich.text import Text
from temporalio.exceptions import ActivityError, ApplicationError, RetryState, TimeoutType
from temporalio.exceptions import TimeoutError as TemporalTimeout
from typer.testing import CliRunner

from modelfleet.api.classes import DeviceCapacity
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.loading import load_paths
from modelfleet.api.meta import Condition
from modelfleet.cli import cluster_view
from modelfleet.cli.cluster_rollout import StepPrinter, cluster_target, judge
from modelfleet.cli.clusters import cluster_resource
from modelfleet.cli.errors import UsageError
from modelfleet.cli.main import app
from modelfleet.cli.output import console
from modelfleet.cli.sim_cloud_faults import Cloud, CloudError, CloudStep, When, fault_body
from modelfleet.cluster.probe_failure import probe_failure
from modelfleet.contracts.cloud_payloads import ClusterStep
from modelfleet.contracts.kube_payloads import DeviceGroup, PoolObservation
from modelfleet.contracts.stack_payloads import DEFAULT_STACK
from modelfleet.contracts.status import ClusterRecord, ClusterStatus, StackPiece
from modelfleet.scheduling.capacity import DeviceCount
from modelfleet.scheduling.pricing import estimate
from modelfleet.scheduling.snapshot import QueueCapacity

PROVISIONING = Path(__file__).resolve().parents[2] / "examples" / "provisioning"
_LOADED = load_paths([str(PROVISIONING)]).resources
CLUSTERS = {r.name: r for r in _LOADED if isinstance(r, InferenceCluster)}
CLASSES = {r.name: r for r in _LOADED if r.KIND == "InferenceClass"}
T0 = datetime(2026, 11, 23, 20, 0, tzinfo=UTC)
runner = CliRunner()


def _step(name: str, start: int, end: int | None, error: str = "") -> ClusterStep:
    return ClusterStep(
        name=name,
        started=T0 + timedelta(seconds=start),
        finished=T0 + timedelta(seconds=end) if end is not None else None,
        error=error,
    )


def _plain(cells: list[str]) -> list[str]:
    return [Text.from_markup(c).plain for c in cells]


def test_a_failed_cluster_shows_the_failed_step_and_no_free_devices() -> None:
    spec = CLUSTERS["gke-central"]
    failed = "CloudStockout: ZONE_RESOURCE_POOL_EXHAUSTED"
    status = ClusterStatus(
        name=spec.name,
        phase="Failed",
        ready=False,
        reason="ProvisioningFailed at create node pool gpu-h100: Stockout: zone exhausted",
        steps=[
            _step("create cluster gke-central", 0, 3),
            _step("create node pool gpu-h100", 3, 5, failed),
            _step("delete cluster gke-central", 5, 7),
        ],
    )
    item = cluster_resource(ClusterRecord(spec=spec), status, None, CLASSES, T0)
    row = _plain(cluster_view.cells(item, "1m", wide=True))
    assert row == [
        "gke-central",
        "GKE",
        "Failed",
        "create node pool gpu-h100 (failed)",
        "gpu-h100 0/1",
        "-",
        "1m",
        "-",
        status.reason,
    ]
    conditions = {c["type"]: c for c in item.status["conditions"]}
    assert conditions["Provisioned"]["status"] == "False"
    assert conditions["Provisioned"]["message"] == f"create node pool gpu-h100: {failed}"
    assert "ServingStack" not in conditions  # never checked


def test_a_ready_cluster_shows_pools_free_devices_and_a_missing_stack_piece(
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = CLUSTERS["eks-east"]
    pieces = [
        StackPiece(
            name=c.name,
            version=c.version,
            api_version=c.api_version,
            served=c.name != "LeaderWorkerSet",
            problem="HTTP 404" if c.name == "LeaderWorkerSet" else "",
        )
        for c in DEFAULT_STACK
    ]
    status = ClusterStatus(
        name=spec.name,
        phase="Ready",
        ready=True,
        reason="probe ok",
        observed_pools={"gpu-h200": PoolObservation(nodes=2, ready_nodes=1)},
        stack=pieces,
        steps=[_step("create cluster eks-east", 0, 9)],
    )
    free = {"gpu-h200": [DeviceCount("gpu", 5, 8), DeviceCount("efa", 16, 16)]}
    record = ClusterRecord(spec=spec, ready=True, gateway_address="10.0.0.9")
    item = cluster_resource(record, status, free, CLASSES, T0)
    row = _plain(cluster_view.cells(item, "5m", wide=False))
    assert row == ["eks-east", "EKS", "Ready", "-", "gpu-h200 1/2", "5/8 gpu, 16/16 efa", "5m"]
    conditions = {c["type"]: c for c in item.status["conditions"]}
    assert conditions["ServingStack"]["status"] == "False"
    assert "LeaderWorkerSet v0.7.0" in conditions["ServingStack"]["message"]
    assert "HTTP 404" in conditions["ServingStack"]["message"]
    assert conditions["Provisioned"]["status"] == "True"
    cluster_view.describe_cluster(item, "http://ui/cluster", T0 + timedelta(seconds=60))
    page = capsys.readouterr().out
    assert "create cluster eks-east" in page
    assert "9.0s" in page
    assert "2 nodes, gpu x8 (memory 140Gi), efa x16 per node" in page
    assert "1/2 nodes ready; counted: 8 gpu, 16 efa" in page
    assert "Gateway API Inference Extension" in page
    assert "missing: HTTP 404" in page
    assert "ServingStack=False" in page


def test_rollout_status_of_a_cluster_stops_at_ready_or_failed_and_says_why() -> None:
    base = ClusterStatus(name="c", phase="Provisioning", ready=False, reason="creating")
    assert judge(base, running_now=True) is None
    ready = judge(base.model_copy(update={"phase": "Ready", "reason": "probe ok"}), True)
    assert ready is not None
    assert ready.ok
    failed = judge(base.model_copy(update={"phase": "Failed", "reason": "quota"}), True)
    assert failed is not None
    assert not failed.ok
    assert "rolled back: quota" in failed.message
    gone = judge(base, running_now=False)
    assert gone is not None
    assert not gone.ok
    waiting = base.model_copy(
        update={"reason": "WaitingForClasses: nodePools[gpu]: InferenceClass x is not in the fleet"}
    )
    assert judge(waiting, True, elapsed=1.0) is None
    stuck = judge(waiting, True, elapsed=30.0)
    assert stuck is not None
    assert not stuck.ok
    assert "InferenceClass x is not in the fleet" in stuck.message


def test_rollout_status_tells_a_cluster_from_a_deployment() -> None:
    assert cluster_target(["cluster/gke-central"]) == "gke-central"
    assert cluster_target(["cluster", "gke-central"]) == "gke-central"
    assert cluster_target(["gke-central"]) is None
    assert cluster_target(["deployment/qwen"]) is None


def test_each_step_is_printed_once_when_it_starts_and_once_when_it_ends() -> None:
    printer = StepPrinter()
    now = T0 + timedelta(seconds=30)
    with console.capture() as captured:
        printer.show([_step("create cluster c", 0, None)], now)
        printer.show([_step("create cluster c", 0, None)], now)
        printer.show([_step("create cluster c", 0, 4), _step("create node pool p", 4, None)], now)
        printer.show([_step("create cluster c", 0, 4), _step("create node pool p", 4, 6, "E")], now)
    lines = [line.split() for line in captured.get().splitlines()]
    assert lines == [
        ["started", "create", "cluster", "c"],
        ["done", "create", "cluster", "c", "(4.0s)"],
        ["started", "create", "node", "pool", "p"],
        ["failed", "create", "node", "pool", "p", "(2.0s):", "E"],
    ]


def test_cloud_faults_surface_where_a_real_cloud_reports_them() -> None:
    stockout = fault_body(Cloud.GKE, CloudError.STOCKOUT, CloudStep.CREATE_POOL, "gpu", 1, None)
    assert stockout == {
        "operation": "createNodePool",
        "error": "stockout",
        "times": 1,
        "stage": "operation",
        "target": "gpu",
    }
    bad = fault_body(Cloud.EKS, CloudError.BAD_MACHINE_TYPE, CloudStep.CREATE_POOL, None, 2, None)
    assert bad == {
        "operation": "CreateNodegroup",
        "error": "bad-machine-type",
        "times": 2,
        "stage": "call",
    }
    # AKS steps are named by their ARM operation IDs; a delete may fail in its operation.
    assert fault_body(Cloud.AKS, CloudError.QUOTA, CloudStep.CREATE_POOL, None, 1, None) == {
        "operation": "AgentPools_CreateOrUpdate",
        "error": "quota",
        "times": 1,
        "stage": "operation",
    }
    assert (
        fault_body(Cloud.AKS, CloudError.UNAVAILABLE, CloudStep.DELETE_CLUSTER, "c", 1, None)[
            "operation"
        ]
        == "ManagedClusters_Delete"
    )
    with pytest.raises(UsageError, match="EKS deletions fail only at the call"):
        fault_body(Cloud.EKS, CloudError.QUOTA, CloudStep.DELETE_POOL, None, 1, When.OPERATION)


def test_sim_faults_for_a_cloud_needs_a_fleet_that_runs_clouds(tmp_path: Path) -> None:
    (tmp_path / "sim.json").write_text(json.dumps({"base_url": "http://127.0.0.1:9"}))
    result = runner.invoke(
        app, ["sim", "faults", "--cloud", "gke", "--fail", "quota", "--state-dir", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert "runs no simulated clouds" in result.output + result.stderr


def test_plan_shows_what_each_cloud_cluster_would_create_and_cost() -> None:
    result = runner.invoke(app, ["plan", "-f", str(PROVISIONING)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.output
    assert "cluster gke-central: GKE (project my-gcp-project, region us-central1)" in out
    assert "a3-highgpu-8g + 8 nvidia-h100-80gb" in out
    assert "p5en.48xlarge + EFA" in out
    gke = estimate("GKE", [("gpu-h100", "a3-highgpu-8g", 1)])
    assert f"${gke.known:,.2f}/hour" in out
    document = json.loads(
        # stdout only: a directory's "read N files from DIR" goes to stderr
        runner.invoke(app, ["plan", "-f", str(PROVISIONING), "-o", "json"]).stdout
    )
    by_name = {c["name"]: c for c in document["clusters"]}
    assert by_name["gke-central"]["hourlyCost"] == round(gke.known, 2)
    at_max = estimate("GKE", [("gpu-h100", "a3-highgpu-8g", 4)])
    assert by_name["gke-central"]["hourlyCostAtMax"] == round(at_max.known, 2)
    assert by_name["eks-east"]["pools"][0]["nodes"] == 2
    # The EKS example's class sets its own price; the GKE one's falls back to the table.
    eks_pool = by_name["eks-east"]["pools"][0]
    assert (eks_pool["hourlyPerNode"], eks_pool["priceSource"]) == (43.26, "class")
    assert by_name["gke-central"]["pools"][0]["priceSource"] == "estimate"
    assert re.search(r"43\.26\s+86\.52\s+class", out)
    assert "estimate, 2026-11-23" in out


def test_plan_names_a_pool_whose_class_is_missing(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text((PROVISIONING / "gke.yaml").read_text().split("---")[1])
    result = runner.invoke(app, ["plan", "-f", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "cannot plan nodePools[gpu-h100]: InferenceClass gke-a3-highgpu-8g" in result.output


def test_published_devices_and_typed_conditions_are_shown_when_the_worker_reports_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A worker that publishes ResourceSlice devices per pool and keeps typed conditions (a
    newer status than this one) is shown as it reports, not as the class declares."""

    class NewerStatus(ClusterStatus):
        conditions: list[Condition] = []

    spec = CLUSTERS["gke-central"]
    status = NewerStatus(
        name=spec.name,
        phase="NotReady",
        ready=False,
        reason="AccessDenied",
        observed_pools={"gpu-h100": PoolObservation(nodes=1, ready_nodes=1)},
        conditions=[
            Condition(type="AccessGranted", status="False", reason="Denied", message="list nodes")
        ],
    )
    item = cluster_resource(ClusterRecord(spec=spec), status, None, CLASSES, T0)
    types = [(c["type"], c["status"]) for c in item.status["conditions"]]
    assert types == [("Ready", "False"), ("AccessGranted", "False")]
    item.status["pools"][0]["publishedDevices"] = [
        {"driver": "gpu.nvidia.com", "count": 8, "capacity": {"memory": {"value": "81559Mi"}}}
    ]
    cluster_view.describe_cluster(item, "http://ui/cluster", T0)
    page = capsys.readouterr().out
    assert "1/1 node ready, gpu.nvidia.com x8 (memory 81559Mi) per node" in page
    assert "AccessGranted=False (Denied) list nodes" in page


def test_describe_shows_where_the_hardware_differs_from_the_class(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The class and the slices disagree on a GPU's memory (80Gi declared, 81559Mi reported, or
    the other way round): published as the slices say, and the difference is shown."""
    spec = CLUSTERS["gke-central"]
    klass = CLASSES[spec.spec.node_pools[0].class_name]
    gpu = next(d for d in klass.spec.devices if d.driver == "gpu.nvidia.com")
    declared = gpu.capacity["memory"].value
    real = "80Gi" if declared == "81559Mi" else "81559Mi"
    group = DeviceGroup(
        driver=gpu.driver,
        count=gpu.count,
        attributes=dict(gpu.attributes),
        capacity={"memory": DeviceCapacity(value=real)},
    )
    status = ClusterStatus(
        name=spec.name,
        phase="Ready",
        ready=True,
        observed_pools={"gpu-h100": PoolObservation(nodes=1, ready_nodes=1, devices=[group])},
    )
    item = cluster_resource(ClusterRecord(spec=spec), status, None, CLASSES, T0)
    assert item.status["pools"][0]["differences"] == [
        f"{gpu.name} memory: class {declared}, hardware {real}"
    ]
    cluster_view.describe_cluster(item, "http://ui/cluster", T0)
    page = capsys.readouterr().out
    assert "Hardware differs from the class" in page
    assert f"gpu-h100: {gpu.name} memory: class {declared}, hardware {real}" in page
    # The same hardware as the class: nothing to show.
    same = group.model_copy(update={"capacity": dict(gpu.capacity)})
    status.observed_pools["gpu-h100"].devices = [same]
    item = cluster_resource(ClusterRecord(spec=spec), status, None, CLASSES, T0)
    assert item.status["pools"][0]["differences"] == []


def test_an_unreachable_cluster_shows_its_nodes_as_unknown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = CLUSTERS["eks-east"]
    reason = "unreachable (3 probes in a row failed): KubeUnreachable: connection refused"
    status = ClusterStatus(
        name=spec.name,
        phase="NotReady",
        ready=False,
        reason=reason,
        observed_pools={"gpu-h200": PoolObservation(nodes=2, ready_nodes=2)},
        conditions=[
            Condition(type="Reachable", status="False", reason="ProbeFailed", message=reason)
        ],
    )
    item = cluster_resource(ClusterRecord(spec=spec), status, None, CLASSES, T0)
    free = {"gpu-h200": [DeviceCount("gpu", 16, 16)]}
    item = cluster_resource(ClusterRecord(spec=spec), status, free, CLASSES, T0)
    row = _plain(cluster_view.cells(item, "5m", wide=True))
    assert row[2:6] == ["NotReady", "-", "gpu-h200 ?/2", "?/16 gpu"]
    assert row[-1] == reason
    cluster_view.describe_cluster(item, "http://ui/cluster", T0)
    page = capsys.readouterr().out
    assert "node readiness is unknown" in page
    assert "?/2 nodes ready" in page
    # Reachable again: the counts are shown as observed.
    status.conditions = [Condition(type="Reachable", status="True", reason="ProbeSucceeded")]
    item = cluster_resource(ClusterRecord(spec=spec), status, None, CLASSES, T0)
    assert _plain(cluster_view.cells(item, "5m", wide=False))[4] == "gpu-h200 2/2"


def test_a_failed_probe_is_explained_by_its_innermost_cause() -> None:
    """Temporal wraps the last attempt's error in a ScheduleToClose timeout ("Not enough time to
    schedule next retry ..."); the status says what the cluster answered instead."""
    refused = ApplicationError("GET /version: connection refused", type="KubeUnreachable")
    timeout = TemporalTimeout(
        "Not enough time to schedule next retry before activity ScheduleToClose timeout",
        type=TimeoutType.SCHEDULE_TO_CLOSE,
        last_heartbeat_details=[],
    )
    timeout.__cause__ = refused
    wrapped = ActivityError(
        "Activity task failed",
        scheduled_event_id=1,
        started_event_id=2,
        identity="w",
        activity_type="kube.probe",
        activity_id="1",
        retry_state=RetryState.TIMEOUT,
    )
    wrapped.__cause__ = timeout
    assert probe_failure(wrapped) == "KubeUnreachable: GET /version: connection refused"
    hung = TemporalTimeout(
        "activity StartToClose timeout", type=TimeoutType.START_TO_CLOSE, last_heartbeat_details=[]
    )
    timeout.__cause__ = hung
    assert "did not answer in time" in probe_failure(wrapped)


def test_describe_shows_what_the_gang_scheduler_queue_can_admit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = CLUSTERS["gke-central"]
    queue = QueueCapacity(scheduler="KAI", name="team-a", total_gpus=16, used_gpus=16)
    status = ClusterStatus(name=spec.name, phase="Ready", ready=True, queue=queue)
    item = cluster_resource(ClusterRecord(spec=spec), status, None, CLASSES, T0)
    assert item.status["queue"]["totalGpus"] == 16
    cluster_view.describe_cluster(item, "http://ui/cluster", T0)
    assert "Gang scheduler: KAI queue team-a: 0 of 16 GPUs free" in capsys.readouterr().out
    missing = QueueCapacity(scheduler="Kueue", name="team-a", problem="not found")
    assert cluster_view.queue_line(missing.model_dump(mode="json", by_alias=True)) == (
        "Kueue queue team-a: not found (admits nothing)"
    )
