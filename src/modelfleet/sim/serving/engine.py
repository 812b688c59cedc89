"""One simulated engine's state: the requests it runs and queues under its concurrency limit,
its counters, and the synthetic tokens it generates; its ``/metrics`` text in vLLM's names.

Development/test emulator only. No I/O: the HTTP side lives in :mod:`openai_api`. Time comes
from the caller's loop clock (latency is simulated with real sleeps by the caller).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

__all__ = [
    "TPOT_BUCKETS",
    "TTFT_BUCKETS",
    "EngineProfile",
    "EngineState",
    "count_tokens",
    "synthetic_tokens",
]

# vLLM's time-to-first-token histogram buckets (seconds).
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0)
# vLLM's time-per-output-token (inter-token latency) histogram buckets (seconds), led by finer
# ones: the simulated engines decode in well under vLLM's first bound (10 ms).
TPOT_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
    0.75, 1.0, 2.5,
)  # fmt: skip
_VOCAB = (
    "the", "fleet", "serves", "tokens", "from", "a", "simulated", "engine", "on", "every",
    "cluster", "with", "weights", "and", "health", "model", "replica", "gateway", "route", "ok",
)  # fmt: skip


@dataclass(frozen=True)
class EngineProfile:
    """How a simulated engine performs. Defaults keep tests fast while every request still
    takes real, measurable time."""

    tokens_per_second: float = 2000.0
    time_to_first_token: float = 0.002
    max_concurrency: int = 16
    default_max_tokens: int = 8
    # KV cache capacity in tokens: running requests' tokens over this is gpu_cache_usage_perc.
    kv_cache_tokens: int = 16384
    max_model_len: int = 8192

    def __post_init__(self) -> None:
        if self.tokens_per_second <= 0 or self.time_to_first_token < 0:
            raise ValueError("tokens_per_second must be > 0 and time_to_first_token >= 0")
        if self.max_concurrency < 1 or self.default_max_tokens < 1:
            raise ValueError("max_concurrency and default_max_tokens must be >= 1")


def count_tokens(text: str) -> int:
    """A whitespace tokenizer: deterministic and good enough for usage counts (never 0)."""
    return max(1, len(text.split()))


def synthetic_tokens(model: str, prompt: str, count: int) -> list[str]:
    """``count`` deterministic tokens for (model, prompt): the same request always gets the same
    answer, different prompts usually differ."""
    seed = hashlib.sha256(f"{model}\0{prompt}".encode()).digest()
    out: list[str] = []
    for i in range(count):
        if i and i % len(seed) == 0:
            seed = hashlib.sha256(seed).digest()
        word = _VOCAB[seed[i % len(seed)] % len(_VOCAB)]
        out.append(word if i == 0 else f" {word}")
    return out


@dataclass
class EngineState:
    """Requests in flight and counters of one engine (one pod)."""

    model: str
    pod: str
    profile: EngineProfile
    running: int = 0
    waiting: int = 0
    running_tokens: int = 0
    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    requests_total: int = 0
    ttft_counts: list[int] = field(default_factory=lambda: [0] * len(TTFT_BUCKETS))
    ttft_sum: float = 0.0
    ttft_count: int = 0
    tpot_counts: list[int] = field(default_factory=lambda: [0] * len(TPOT_BUCKETS))
    tpot_sum: float = 0.0
    tpot_count: int = 0
    # HTTP answers by (handler, method, status class "2xx"/"4xx"/"5xx"), as vLLM's API server
    # counts them (prometheus-fastapi-instrumentator's ``http_requests_total``).
    http_answers: dict[tuple[str, str, str], int] = field(default_factory=dict)
    # Where the engine's log lines go (the pod's container log, read by `kubectl logs`).
    log: Callable[[str], None] | None = None
    # The image the engine runs (per-image faults are looked up by it on every request).
    image: str = ""
    _slots: asyncio.Semaphore | None = None

    def answered(self, handler: str, method: str, status: int) -> None:
        key = (handler, method, f"{status // 100}xx")
        self.http_answers[key] = self.http_answers.get(key, 0) + 1

    @property
    def load(self) -> int:
        return self.running + self.waiting

    @asynccontextmanager
    async def slot(self, tokens: int) -> AsyncIterator[None]:
        """Hold one of the engine's concurrency slots; queued (``waiting``) until one frees."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.profile.max_concurrency)
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        self.running_tokens += tokens
        try:
            yield
        finally:
            self.running -= 1
            self.running_tokens -= tokens
            self._slots.release()

    def observe_ttft(self, seconds: float) -> None:
        self.ttft_sum += seconds
        self.ttft_count += 1
        for i, bound in enumerate(TTFT_BUCKETS):
            if seconds <= bound:
                self.ttft_counts[i] += 1

    def observe_tpot(self, seconds: float, times: int = 1) -> None:
        """``times`` output tokens after the first, each ``seconds`` after the one before."""
        self.tpot_sum += seconds * times
        self.tpot_count += times
        for i, bound in enumerate(TPOT_BUCKETS):
            if seconds <= bound:
                self.tpot_counts[i] += times

    def finished(self, prompt_tokens: int, completion_tokens: int) -> None:
        self.prompt_tokens_total += prompt_tokens
        self.generation_tokens_total += completion_tokens
        self.requests_total += 1
        if self.log is not None:
            self.log(
                f"INFO Finished request {self.requests_total} for {self.model}: "
                f"prompt_tokens={prompt_tokens} generation_tokens={completion_tokens}"
            )

    @property
    def cache_usage(self) -> float:
        return min(1.0, self.running_tokens / self.profile.kv_cache_tokens)

    def metrics_text(self) -> str:
        """Prometheus exposition in vLLM's metric names (labelled by model_name)."""
        label = f'model_name="{self.model}"'
        lines = [
            "# HELP vllm:num_requests_running Number of requests currently running on GPU.",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{label}}} {float(self.running)}",
            "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{{{label}}} {float(self.waiting)}",
            "# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.",
            "# TYPE vllm:gpu_cache_usage_perc gauge",
            f"vllm:gpu_cache_usage_perc{{{label}}} {self.cache_usage}",
            "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.",
            "# TYPE vllm:prompt_tokens_total counter",
            f"vllm:prompt_tokens_total{{{label}}} {float(self.prompt_tokens_total)}",
            "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{{{label}}} {float(self.generation_tokens_total)}",
            "# HELP vllm:request_success_total Count of successfully processed requests.",
            "# TYPE vllm:request_success_total counter",
            f"vllm:request_success_total{{{label}}} {float(self.requests_total)}",
            "# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.",
            "# TYPE vllm:time_to_first_token_seconds histogram",
        ]
        for bound, count in zip(TTFT_BUCKETS, self.ttft_counts, strict=True):
            lines.append(
                f'vllm:time_to_first_token_seconds_bucket{{le="{bound}",{label}}} {float(count)}'
            )
        lines += [
            f'vllm:time_to_first_token_seconds_bucket{{le="+Inf",{label}}} '
            f"{float(self.ttft_count)}",
            f"vllm:time_to_first_token_seconds_count{{{label}}} {float(self.ttft_count)}",
            f"vllm:time_to_first_token_seconds_sum{{{label}}} {self.ttft_sum}",
            "# HELP vllm:time_per_output_token_seconds Histogram of time per output token in "
            "seconds.",
            "# TYPE vllm:time_per_output_token_seconds histogram",
        ]
        for bound, count in zip(TPOT_BUCKETS, self.tpot_counts, strict=True):
            lines.append(
                f'vllm:time_per_output_token_seconds_bucket{{le="{bound}",{label}}} {float(count)}'
            )
        lines += [
            f'vllm:time_per_output_token_seconds_bucket{{le="+Inf",{label}}} '
            f"{float(self.tpot_count)}",
            f"vllm:time_per_output_token_seconds_count{{{label}}} {float(self.tpot_count)}",
            f"vllm:time_per_output_token_seconds_sum{{{label}}} {self.tpot_sum}",
            "# HELP http_requests_total Total number of requests by method, status and handler.",
            "# TYPE http_requests_total counter",
        ]
        for (handler, method, status), count in sorted(self.http_answers.items()):
            lines.append(
                f'http_requests_total{{handler="{handler}",method="{method}",status="{status}"}} '
                f"{float(count)}"
            )
        return "\n".join(lines) + "\n"
