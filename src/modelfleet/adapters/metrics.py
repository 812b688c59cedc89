"""Reading engine load: a replica's ``/metrics`` through the Kubernetes API server's proxy, and
PromQL queries against a Prometheus server, parsed with ``prometheus-client``'s parser.

This module may touch: ``httpx`` (the network), the ``kubernetes`` SDK's kubeconfig loader (only
to resolve the server, TLS files and credentials, including exec plugins, exactly as the
Kubernetes adapter does) and ``prometheus_client``'s text parser. It never logs or embeds a
credential in an error, and never writes the kubeconfig. No pod network access is needed: the
API server proxies ``/api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/metrics`` (and the same
under ``services/<svc>:<port>``), which is how a worker outside the cluster reaches an engine.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import ssl
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import httpx
from kubernetes.client import Configuration
from kubernetes.config import ConfigException, load_kube_config
from prometheus_client.parser import text_string_to_metric_families

from modelfleet.api.naming import LABEL_SERVING

__all__ = [
    "INFERENCE_HANDLERS",
    "ITL_HISTOGRAM",
    "TTFT_HISTOGRAM",
    "KubeMetricsReader",
    "MetricsError",
    "PodTarget",
    "ReplicaCounts",
    "histogram_buckets",
    "itl_buckets",
    "labelled_sum",
    "parse_samples",
    "prometheus_query",
    "responses",
    "ttft_buckets",
]

# The SDK's loader is unannotated; it is called only here.
_load_kube_config: Callable[..., Any] = load_kube_config

# The container the renderer names for every engine, and the port it serves (and exports
# /metrics) on when the pod does not name one.
ENGINE_CONTAINER = "engine"
DEFAULT_PORT = 8000
_PORT_NAMES = ("metrics", "http")


class MetricsError(Exception):
    """Load could not be read. The message names the server and path, never a credential."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


def parse_samples(text: str, names: Iterable[str]) -> dict[str, float]:
    """The value of each of ``names`` in a Prometheus text exposition: the sum of the samples of
    that exact name (one per label set, e.g. per served model). Names not exported are absent;
    NaN samples are skipped. Raises MetricsError when the text does not parse."""
    wanted = set(names)
    found: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in wanted and not math.isnan(sample.value):
                    found[sample.name] = found.get(sample.name, 0.0) + float(sample.value)
    except ValueError as exc:
        raise MetricsError(f"not Prometheus text: {exc}", retryable=False) from None
    return found


def labelled_sum(text: str, name: str, labels: Mapping[str, Collection[str]]) -> float | None:
    """The sum of the samples of ``name`` whose every label in ``labels`` has one of the given
    values (a gateway's per-route gauge, read for a few services); None when no sample matches,
    which tells "never seen" from a series at 0. Raises MetricsError when the text does not
    parse."""
    total: float | None = None
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name != name or math.isnan(sample.value):
                    continue
                if all(sample.labels.get(k) in allowed for k, allowed in labels.items()):
                    total = (total or 0.0) + float(sample.value)
    except ValueError as exc:
        raise MetricsError(f"not Prometheus text: {exc}", retryable=False) from None
    return total


def _safe(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@dataclass(frozen=True)
class PodTarget:
    name: str
    ready: bool
    port: int


def _engine_port(pod: Mapping[str, Any]) -> int:
    containers = (pod.get("spec") or {}).get("containers") or []
    engine = next((c for c in containers if c.get("name") == ENGINE_CONTAINER), None)
    ports = (engine or {}).get("ports") or []
    for wanted in _PORT_NAMES:
        for port in ports:
            if port.get("name") == wanted and port.get("containerPort"):
                return int(port["containerPort"])
    if ports and ports[0].get("containerPort"):
        return int(ports[0]["containerPort"])
    return DEFAULT_PORT


def _pod_ready(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def _tls(cfg: Any) -> ssl.SSLContext | bool:
    """The TLS settings the kubeconfig asks for: its CA, its client certificate, or none."""
    if not str(cfg.host).startswith("https"):
        return True
    if not cfg.verify_ssl:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        context = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
    if cfg.cert_file and cfg.key_file:
        context.load_cert_chain(cfg.cert_file, cfg.key_file)
    return context


@dataclass
class ReplicaCounts:
    """What one replica's engines had counted, summed over its pods (see ``replica_counts``)."""

    ttft: dict[str, float] = field(default_factory=dict)
    itl: dict[str, float] = field(default_factory=dict)
    requests: float = 0.0
    errors: float = 0.0


def _add(into: dict[str, float], buckets: dict[str, float]) -> None:
    for le, count in buckets.items():
        into[le] = into.get(le, 0.0) + count


class KubeMetricsReader:
    """Scrapes engines on one cluster through its API server. Construction reads the kubeconfig
    but does no network I/O; use as an async context manager."""

    def __init__(self, kubeconfig: str | os.PathLike[str], *, timeout: float = 5.0) -> None:
        path = os.fspath(kubeconfig)
        self._config = Configuration()
        try:
            _load_kube_config(
                config_file=path, client_configuration=self._config, persist_config=False
            )
        except (ConfigException, OSError, ValueError, TypeError, KeyError) as exc:
            raise MetricsError(
                f"cannot load kubeconfig {path}: {type(exc).__name__}", retryable=False
            ) from None
        cfg = self._config
        self.server = _safe(str(cfg.host))
        try:
            verify = _tls(cfg)
        except (OSError, ssl.SSLError) as exc:
            raise MetricsError(
                f"cannot load the TLS files of kubeconfig {path}: {type(exc).__name__}",
                retryable=False,
            ) from None
        self._client = httpx.AsyncClient(
            base_url=str(cfg.host).rstrip("/"),
            verify=verify,
            timeout=timeout,
            follow_redirects=False,
        )

    async def __aenter__(self) -> KubeMetricsReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    def _headers(self, accept: str) -> dict[str, str]:
        headers = {"Accept": accept}
        try:
            # Refreshes exec-plugin and auth-provider tokens when they expire.
            token = self._config.get_api_key_with_prefix("BearerToken", alias="authorization")
        except ConfigException:
            raise MetricsError(
                f"refreshing credentials for {self.server} failed", retryable=True
            ) from None
        if token:
            headers["Authorization"] = str(token)
        return headers

    async def _get(self, path: str, *, accept: str, params: dict[str, str] | None = None) -> str:
        where = f"{self.server}{path}"
        try:
            response = await self._client.get(path, params=params, headers=self._headers(accept))
        except httpx.TimeoutException:
            raise MetricsError(f"GET {where}: timed out") from None
        except httpx.HTTPError as exc:
            raise MetricsError(f"GET {where}: {type(exc).__name__}") from None
        if response.status_code != 200:
            # 4xx other than throttling will not heal by retrying the same request.
            retryable = response.status_code >= 500 or response.status_code == 429
            raise MetricsError(f"GET {where}: HTTP {response.status_code}", retryable=retryable)
        return response.text

    async def serving_pods(self, namespace: str, replica: str) -> list[PodTarget]:
        """The pods that serve ``replica`` (Standalone pods or gang leaders), by label."""
        body = await self._get(
            f"/api/v1/namespaces/{quote(namespace)}/pods",
            accept="application/json",
            params={"labelSelector": f"{LABEL_SERVING}={replica}"},
        )
        try:
            items = json.loads(body).get("items") or []
        except (ValueError, AttributeError):
            raise MetricsError(f"listing pods on {self.server}: not a PodList") from None
        return sorted(
            (
                PodTarget(
                    name=str(p["metadata"]["name"]), ready=_pod_ready(p), port=_engine_port(p)
                )
                for p in items
            ),
            key=lambda t: t.name,
        )

    async def scrape_pod(self, namespace: str, pod: str, port: int) -> str:
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(pod)}:{port}/proxy/metrics"
        return await self._get(path, accept="text/plain")

    async def scrape_service(self, namespace: str, service: str, port: int | str) -> str:
        path = (
            f"/api/v1/namespaces/{quote(namespace)}/services/{quote(service)}:{port}/proxy/metrics"
        )
        return await self._get(path, accept="text/plain")

    async def _scrape_all(self, namespace: str, pods: list[PodTarget]) -> list[str]:
        """The metrics text of each of ``pods`` that answered; MetricsError (every pod's
        reason) when none did. An error other than MetricsError is raised as it is."""
        results = await asyncio.gather(
            *(self.scrape_pod(namespace, p.name, p.port) for p in pods), return_exceptions=True
        )
        texts: list[str] = []
        errors: list[str] = []
        for result in results:
            if isinstance(result, MetricsError):
                errors.append(str(result))
            elif isinstance(result, BaseException):
                raise result
            else:
                texts.append(result)
        if not texts:
            raise MetricsError("; ".join(errors))
        return texts

    async def replica_responses(self, namespace: str, replica: str) -> tuple[int, int]:
        """(inference requests answered, of which 5xx) by all of ``replica``'s serving pods
        since they started. Raises MetricsError when none could be scraped."""
        pods = await self.serving_pods(namespace, replica)
        if not pods:
            raise MetricsError(f"replica {replica} has no serving pod on {self.server}")
        counts = [responses(text) for text in await self._scrape_all(namespace, pods)]
        return int(sum(c[0] for c in counts)), int(sum(c[1] for c in counts))

    async def replica_counts(self, namespace: str, replica: str) -> ReplicaCounts:
        """The TTFT and inter-token latency histograms' buckets by ``le``, the inference
        requests answered and how many of them 5xx, summed over ``replica``'s serving pods.
        Raises MetricsError when none could be scraped."""
        pods = await self.serving_pods(namespace, replica)
        if not pods:
            raise MetricsError(f"replica {replica} has no serving pod on {self.server}")
        counts = ReplicaCounts()
        for text in await self._scrape_all(namespace, pods):
            _add(counts.ttft, ttft_buckets(text))
            _add(counts.itl, itl_buckets(text))
            answered, errors = responses(text)
            counts.requests += answered
            counts.errors += errors
        return counts

    async def replica_load(
        self, namespace: str, replica: str, names: Iterable[str]
    ) -> dict[str, float]:
        """Each of ``names`` for one replica: the mean over its Ready serving pods of what each
        pod exports. A name no Ready pod exports is absent (HPA's missing metric). Raises
        MetricsError when no Ready pod could be scraped at all."""
        wanted = list(names)
        pods = [p for p in await self.serving_pods(namespace, replica) if p.ready]
        if not pods:
            raise MetricsError(f"replica {replica} has no Ready serving pod on {self.server}")
        per_pod = [parse_samples(text, wanted) for text in await self._scrape_all(namespace, pods)]
        load: dict[str, float] = {}
        for name in wanted:
            values = [sample[name] for sample in per_pod if name in sample]
            if values:
                load[name] = sum(values) / len(values)
        return load


# The inference handlers of an OpenAI-compatible engine (vLLM's API server counts every request
# in ``http_requests_total{handler,method,status}``, status grouped as 2xx/4xx/5xx).
INFERENCE_HANDLERS = frozenset(
    {"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses"}
)


def responses(text: str) -> tuple[float, float]:
    """(inference requests answered, of which 5xx) in one engine's metrics text."""
    handlers = {"handler": INFERENCE_HANDLERS}
    total = labelled_sum(text, "http_requests_total", handlers) or 0.0
    failed = labelled_sum(text, "http_requests_total", {**handlers, "status": {"5xx"}}) or 0.0
    return total, failed


# vLLM's time-to-first-token histogram (its ``_bucket`` samples, cumulative, by ``le``).
TTFT_HISTOGRAM = "vllm:time_to_first_token_seconds_bucket"
# vLLM's inter-token latency histogram: the time between a request's successive output tokens.
ITL_HISTOGRAM = "vllm:time_per_output_token_seconds_bucket"


def ttft_buckets(text: str) -> dict[str, float]:
    """The TTFT histogram's cumulative counts by upper bound (see ``histogram_buckets``)."""
    return histogram_buckets(text, TTFT_HISTOGRAM)


def itl_buckets(text: str) -> dict[str, float]:
    """The inter-token latency histogram's cumulative counts by upper bound."""
    return histogram_buckets(text, ITL_HISTOGRAM)


def histogram_buckets(text: str, name: str) -> dict[str, float]:
    """The cumulative counts by upper bound of histogram ``name`` (its ``_bucket`` samples) in
    one engine's metrics text, summed over its other labels (served models); empty when it
    exports none."""
    buckets: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name != name or math.isnan(sample.value):
                    continue
                le = sample.labels.get("le")
                if le is None:
                    continue
                # The parser keeps the text's spelling ("0.1", "+Inf"); one spelling per bound.
                key = "+Inf" if le in ("+Inf", "Inf", "inf") else repr(float(le))
                buckets[key] = buckets.get(key, 0.0) + float(sample.value)
    except ValueError as exc:
        raise MetricsError(f"not Prometheus text: {exc}", retryable=False) from None
    return buckets


async def prometheus_query(url: str, query: str, *, request_timeout: float = 5.0) -> float:
    """The scalar result of an instant PromQL query: the sum of the vector's samples (0 for an
    empty vector, which is how Prometheus says "no load"), or the scalar itself."""
    endpoint = url.rstrip("/") + "/api/v1/query"
    where = _safe(endpoint)
    try:
        async with httpx.AsyncClient(timeout=request_timeout) as client:
            response = await client.get(endpoint, params={"query": query})
    except httpx.HTTPError as exc:
        raise MetricsError(f"GET {where}: {type(exc).__name__}") from None
    if response.status_code != 200:
        raise MetricsError(
            f"GET {where}: HTTP {response.status_code}",
            retryable=response.status_code >= 500 or response.status_code == 429,
        )
    try:
        body = response.json()
        data = body["data"]
        if data["resultType"] == "scalar":
            return float(data["result"][1])
        if data["resultType"] == "vector":
            values = [float(item["value"][1]) for item in data["result"]]
            return sum(v for v in values if not math.isnan(v))
    except (ValueError, KeyError, TypeError, IndexError):
        raise MetricsError(
            f"GET {where}: not a Prometheus query response", retryable=False
        ) from None
    raise MetricsError(
        f"GET {where}: the query returned a {data['resultType']}, not a scalar or vector",
        retryable=False,
    )
