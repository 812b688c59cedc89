"""The ``autoscaler.read_metrics`` activity: kubeconfigs resolved per cluster on the worker, load
read per Ready replica through the API-server stand-in, and every failure turned into a missing
metric with its reason (never an activity failure, never a credential)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from metrics_fakes import TOKEN, pod, serve, vllm_text, write_kubeconfig
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from modelfleet.activities.autoscaler import AutoscalerActivities
from modelfleet.activities.kube_ops import KubeconfigStore
from modelfleet.api.naming import workload_namespace
from modelfleet.contracts.autoscaler_payloads import (
    PromQuery,
    ReadMetricsRequest,
    ReadMetricsResult,
    TargetReplica,
)

WAITING = "vllm:num_requests_waiting"
CACHE = "vllm:gpu_cache_usage_perc"


async def test_reads_ready_replicas_per_cluster_and_reports_the_rest_as_missing(
    tmp_path: Path,
) -> None:
    creds = tmp_path / "credentials"
    creds.mkdir()
    async with serve(creds / "east.yaml") as east:
        ns = workload_namespace("ml")
        east.fake.pods = [pod("a-0", "qwen-a", namespace=ns), pod("b-0", "qwen-b", namespace=ns)]
        east.fake.texts = {"a-0:8000": vllm_text(6, 2, 0.5)}  # b-0 has no /metrics: 404
        # A second cluster that is dark: its kubeconfig points at a closed port.
        write_kubeconfig(creds / "west.yaml", "http://127.0.0.1:9", token=None)
        request = ReadMetricsRequest(
            namespace="ml",
            replicas=[
                TargetReplica(name="qwen-a", cluster="east", ready=True),
                TargetReplica(name="qwen-b", cluster="east", ready=True),
                TargetReplica(name="qwen-c", cluster="west", ready=True),
                TargetReplica(name="qwen-d", cluster="nowhere", ready=True),
                TargetReplica(name="qwen-e", cluster="east", ready=False),
            ],
            metrics=[WAITING, CACHE],
            queries=[
                PromQuery(label="promql:ok", url=f"{east.url}/prom", query="scalar(42)"),
                PromQuery(label="promql:bad", url=f"{east.url}/prom", query="nonsense("),
            ],
        )
        # read_metrics never calls Temporal: no client is needed.
        scaler = AutoscalerActivities(cast(Client, None), KubeconfigStore(creds))
        result: ReadMetricsResult = await ActivityEnvironment().run(scaler.read_metrics, request)
    by_name = {r.name: r for r in result.replicas}
    assert [r.name for r in result.replicas] == ["qwen-a", "qwen-b", "qwen-c", "qwen-d", "qwen-e"]
    assert by_name["qwen-a"].values == {WAITING: 6.0, CACHE: 0.5}
    assert by_name["qwen-b"].values == {}
    assert "HTTP 404" in by_name["qwen-b"].error
    assert by_name["qwen-c"].values == {}
    assert "127.0.0.1:9" in by_name["qwen-c"].error
    assert "no kubeconfig for cluster 'nowhere'" in by_name["qwen-d"].error
    assert not by_name["qwen-e"].ready
    assert by_name["qwen-e"].values == {}
    assert result.totals == {"promql:ok": 42.0, "promql:bad": None}
    assert TOKEN not in result.model_dump_json()
    # Only Ready replicas were asked for, in the workload namespace of the deployment's.
    pod_lists = sorted(p for p, _ in east.fake.seen if "labelSelector" in p)
    assert pod_lists == [
        f"/api/v1/namespaces/{ns}/pods?labelSelector=modelfleet.dev/serving=qwen-a",
        f"/api/v1/namespaces/{ns}/pods?labelSelector=modelfleet.dev/serving=qwen-b",
    ]
