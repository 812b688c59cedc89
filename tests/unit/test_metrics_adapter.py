"""The metrics adapter over real HTTP: an API-server stand-in the test starts (pod list by label,
the pod and service proxy routes) serving vLLM-shaped metrics text, and a Prometheus stand-in.
The simulated API server's own proxy route is a separate piece of the simulator."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from metrics_fakes import NS, TOKEN, Served, pod, serve, vllm_text, write_kubeconfig

from modelfleet.adapters.metrics import (
    KubeMetricsReader,
    MetricsError,
    itl_buckets,
    labelled_sum,
    parse_samples,
    prometheus_query,
    responses,
    ttft_buckets,
)
from modelfleet.api.naming import LABEL_SERVING


@pytest_asyncio.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with serve(tmp_path / "east.yaml") as running:
        yield running


NAMES = ["vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:gpu_cache_usage_perc"]


def test_parse_samples_sums_label_sets_and_skips_other_families() -> None:
    base = 'vllm:num_requests_waiting{model_name="qwen3-8b"} 7\n'
    text = vllm_text(7, 3, 0.62)
    assert base in text
    # A second label set of the same family is summed (one engine serving a base and a LoRA).
    merged = text.replace(base, base + 'vllm:num_requests_waiting{model_name="lora-a"} 2.0\n')
    values = parse_samples(merged, [*NAMES, "vllm:prompt_tokens_total", "absent:metric"])
    assert values["vllm:num_requests_waiting"] == 9.0
    assert values["vllm:num_requests_running"] == 3.0
    assert values["vllm:gpu_cache_usage_perc"] == pytest.approx(0.62)
    assert values["vllm:prompt_tokens_total"] == 12345.0
    assert "absent:metric" not in values


GATEWAY_TEXT = """\
# HELP gateway_requests_waiting_for_backend Requests held at the gateway.
# TYPE gateway_requests_waiting_for_backend gauge
gateway_requests_waiting_for_backend{namespace="mf-ml",route="ms-a",service="a"} 2.0
gateway_requests_waiting_for_backend{namespace="mf-ml",route="ms-b",service="b"} 3.0
gateway_requests_waiting_for_backend{namespace="mf-ml",route="ms-c",service="c"} 0.0
gateway_requests_waiting_for_backend{namespace="mf-other",route="ms-a",service="a"} 5.0
# HELP gateway_requests_held_total Requests the gateway held for a backend.
# TYPE gateway_requests_held_total counter
gateway_requests_held_total{namespace="mf-ml",route="ms-a",service="a"} 9.0
"""


def test_labelled_sum_adds_only_the_series_asked_for() -> None:
    gauge = "gateway_requests_waiting_for_backend"
    ml = {"namespace": {"mf-ml"}}
    assert labelled_sum(GATEWAY_TEXT, gauge, {**ml, "service": {"a", "b"}}) == 5.0
    # Another namespace's service of the same name is not counted.
    assert labelled_sum(GATEWAY_TEXT, gauge, {**ml, "service": {"a"}}) == 2.0
    # A series at 0 is 0; no series at all is None ("never seen").
    assert labelled_sum(GATEWAY_TEXT, gauge, {**ml, "service": {"c"}}) == 0.0
    assert labelled_sum(GATEWAY_TEXT, gauge, {**ml, "service": {"zzz"}}) is None
    with pytest.raises(MetricsError, match="not Prometheus text"):
        labelled_sum("<html>502</html>\n", gauge, ml)


def test_parse_samples_rejects_what_is_not_prometheus_text() -> None:
    with pytest.raises(MetricsError, match="not Prometheus text"):
        parse_samples("<html>502 Bad Gateway</html>\n", NAMES)


async def test_replica_load_is_the_mean_of_its_ready_serving_pods(served: Served) -> None:
    fake = served.fake
    fake.pods = [
        pod("qwen-a-0", "qwen-a"),
        pod("qwen-a-1", "qwen-a", port=8001),
        pod("qwen-a-2", "qwen-a", ready=False),
        pod("qwen-b-0", "qwen-b"),
    ]
    fake.texts = {
        "qwen-a-0:8000": vllm_text(6, 2, 0.5),
        "qwen-a-1:8001": vllm_text(2, 4, 0.7),
        "qwen-a-2:8000": vllm_text(100, 100, 1.0),  # not Ready: never scraped
        "qwen-b-0:8000": vllm_text(1, 1, 0.1),
    }
    async with KubeMetricsReader(served.kubeconfig) as reader:
        load = await reader.replica_load(NS, "qwen-a", NAMES)
    assert load == {
        "vllm:num_requests_waiting": 4.0,
        "vllm:num_requests_running": 3.0,
        "vllm:gpu_cache_usage_perc": pytest.approx(0.6),
    }
    paths = [p for p, _ in fake.seen]
    assert f"/api/v1/namespaces/{NS}/pods?labelSelector={LABEL_SERVING}=qwen-a" in paths
    assert f"/api/v1/namespaces/{NS}/pods/qwen-a-0:8000/proxy/metrics" in paths
    assert f"/api/v1/namespaces/{NS}/pods/qwen-a-1:8001/proxy/metrics" in paths
    assert not any("qwen-a-2" in p or "qwen-b" in p for p in paths)
    # The kubeconfig's bearer token goes to the API server on every request.
    assert {auth for _, auth in fake.seen} == {f"Bearer {TOKEN}"}


async def test_one_broken_pod_leaves_the_others_and_errors_carry_no_token(
    served: Served,
) -> None:
    fake = served.fake
    fake.pods = [pod("a-0", "a"), pod("a-1", "a")]
    fake.texts = {"a-0:8000": vllm_text(8, 1, 0.2)}
    fake.broken = {"a-1:8000"}
    async with KubeMetricsReader(served.kubeconfig) as reader:
        load = await reader.replica_load(NS, "a", NAMES)
        assert load["vllm:num_requests_waiting"] == 8.0
        fake.texts = {}
        with pytest.raises(MetricsError) as info:
            await reader.replica_load(NS, "a", NAMES)
    message = str(info.value)
    assert "HTTP 500" in message
    assert "HTTP 404" in message
    assert TOKEN not in message
    assert info.value.retryable


async def test_replica_without_ready_pods_is_an_error(served: Served) -> None:
    served.fake.pods = [pod("a-0", "a", ready=False)]
    async with KubeMetricsReader(served.kubeconfig) as reader:
        with pytest.raises(MetricsError, match="no Ready serving pod"):
            await reader.replica_load(NS, "a", NAMES)


async def test_service_proxy_route(served: Served) -> None:
    served.fake.texts = {"qwen-epp:9090": vllm_text(3, 1, 0.4)}
    async with KubeMetricsReader(served.kubeconfig) as reader:
        text = await reader.scrape_service(NS, "qwen-epp", 9090)
    assert parse_samples(text, NAMES)["vllm:num_requests_waiting"] == 3.0
    path = f"/api/v1/namespaces/{NS}/services/qwen-epp:9090/proxy/metrics"
    assert (path, f"Bearer {TOKEN}") in served.fake.seen


async def test_unreachable_server_is_a_retryable_error(tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "dark.yaml", "http://127.0.0.1:9", token=None)
    async with KubeMetricsReader(kubeconfig, timeout=2.0) as reader:
        with pytest.raises(MetricsError) as info:
            await reader.replica_load(NS, "a", NAMES)
    assert info.value.retryable
    assert "127.0.0.1:9" in str(info.value)


def test_broken_kubeconfig_names_the_file_only(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("users: [{name: x, user: {token: " + TOKEN + "}}]\n")
    with pytest.raises(MetricsError) as info:
        KubeMetricsReader(bad)
    assert str(bad) in str(info.value)
    assert TOKEN not in str(info.value)
    assert not info.value.retryable


async def test_prometheus_vector_and_scalar(served: Served) -> None:
    prom = f"{served.url}/prom"
    assert await prometheus_query(prom, "sum(vllm:num_requests_waiting)") == 12.0
    assert await prometheus_query(prom, "scalar(42)") == 42.0
    with pytest.raises(MetricsError, match="HTTP 400") as info:
        await prometheus_query(prom, "nonsense(")
    assert not info.value.retryable


def test_responses_counts_inference_answers_and_their_5xx_from_vllm_exposition() -> None:
    # As vLLM's API server exports them (prometheus-fastapi-instrumentator), status grouped.
    text = "\n".join(
        [
            "# TYPE http_requests_total counter",
            'http_requests_total{handler="/v1/chat/completions",method="POST",status="2xx"} 40.0',
            'http_requests_total{handler="/v1/chat/completions",method="POST",status="5xx"} 9.0',
            'http_requests_total{handler="/v1/completions",method="POST",status="4xx"} 2.0',
            'http_requests_total{handler="/v1/completions",method="POST",status="5xx"} 1.0',
            'http_requests_total{handler="/health",method="GET",status="2xx"} 300.0',
            'http_requests_total{handler="/v1/models",method="GET",status="5xx"} 7.0',
            "",
        ]
    )
    assert responses(text) == (52.0, 10.0)
    assert responses("# TYPE vllm:num_requests_running gauge\n") == (0.0, 0.0)


async def test_replica_responses_sums_every_serving_pod_that_answers(served: Served) -> None:
    """A replacement's answers so far: every serving pod, Ready or not (one that crashed
    answered too), summed; a pod that cannot be scraped is left out, none at all is an error."""

    def answers(ok: int, failed: int) -> str:
        head = 'http_requests_total{handler="/v1/chat/completions",method="POST",status='
        return f'{head}"2xx"}} {ok}.0\n{head}"5xx"}} {failed}.0\n'

    fake = served.fake
    fake.pods = [pod("m-0", "m"), pod("m-1", "m", ready=False), pod("m-2", "m")]
    fake.texts = {"m-0:8000": answers(30, 3), "m-1:8000": answers(5, 5)}
    fake.broken = {"m-2:8000"}
    async with KubeMetricsReader(served.kubeconfig) as reader:
        assert await reader.replica_responses(NS, "m") == (43, 8)
        fake.texts = {}
        with pytest.raises(MetricsError):
            await reader.replica_responses(NS, "m")
        fake.pods = []
        with pytest.raises(MetricsError, match="no serving pod"):
            await reader.replica_responses(NS, "m")


def _ttft(
    counts: list[int], model: str = "m", name: str = "vllm:time_to_first_token_seconds"
) -> str:
    bounds = ["0.005", "0.1", "1.0", "+Inf"]
    lines = [f"# TYPE {name} histogram"]
    lines += [
        f'{name}_bucket{{le="{le}",model_name="{model}"}} {float(n)}'
        for le, n in zip(bounds, counts, strict=True)
    ]
    lines += [f'{name}_count{{model_name="{model}"}} {float(counts[-1])}']
    return "\n".join(lines) + "\n"


def test_ttft_buckets_sum_the_histogram_by_bound() -> None:
    text = _ttft([1, 5, 9, 10]) + _ttft([0, 0, 2, 2], model="other")
    assert ttft_buckets(text) == {"0.005": 1.0, "0.1": 5.0, "1.0": 11.0, "+Inf": 12.0}
    assert ttft_buckets("# TYPE vllm:num_requests_running gauge\n") == {}
    # The inter-token histogram is another family: neither reads the other's.
    itl = _ttft([4, 8, 8, 8], name="vllm:time_per_output_token_seconds")
    assert itl_buckets(text + itl) == {"0.005": 4.0, "0.1": 8.0, "1.0": 8.0, "+Inf": 8.0}
    assert ttft_buckets(text + itl) == ttft_buckets(text)
    assert itl_buckets(text) == {}


async def test_replica_counts_sum_every_serving_pod(served: Served) -> None:
    """A canary reading: the TTFT histogram and the answers of every serving pod, summed."""
    head = 'http_requests_total{handler="/v1/chat/completions",method="POST",status='
    fake = served.fake
    fake.pods = [pod("m-0", "m"), pod("m-1", "m")]
    fake.texts = {
        "m-0:8000": _ttft([1, 2, 3, 3])
        + _ttft([6, 6, 6, 6], name="vllm:time_per_output_token_seconds")
        + f'{head}"2xx"}} 3.0\n{head}"5xx"}} 1.0\n',
        "m-1:8000": _ttft([0, 0, 4, 4])
        + _ttft([1, 9, 9, 9], name="vllm:time_per_output_token_seconds")
        + f'{head}"2xx"}} 4.0\n',
    }
    async with KubeMetricsReader(served.kubeconfig) as reader:
        counts = await reader.replica_counts(NS, "m")
    assert counts.ttft == {"0.005": 1.0, "0.1": 2.0, "1.0": 7.0, "+Inf": 7.0}
    assert counts.itl == {"0.005": 7.0, "0.1": 15.0, "1.0": 15.0, "+Inf": 15.0}
    assert (counts.requests, counts.errors) == (8.0, 1.0)
