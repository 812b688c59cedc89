"""A load generator for rehearsing scaling policies: OpenAI chat completions sent to a service
address at a steady rate (open loop: a new request starts on schedule whether or not earlier ones
have finished, as independent users do), streamed so that time to first token is measured, with
latency percentiles, errors and which pod served each request.

Development tooling (``modelfleet sim load``). Talks HTTP with ``httpx`` to the one base URL it
is given and nothing else; keeps all results in memory. The ``Authorization`` header it sends is
the caller's key, never logged or printed.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

import httpx

__all__ = [
    "SERVED_BY_HEADER",
    "LoadProgress",
    "LoadReport",
    "LoadSpec",
    "percentile",
    "run_load",
]

# The simulated engines name the pod that served a request in this response header.
SERVED_BY_HEADER = "x-modelfleet-served-by"
_WORDS = ("load", "test", "prompt", "tokens", "for", "the", "fleet", "autoscaler")


@dataclass(frozen=True)
class LoadSpec:
    """What to send: ``rps`` requests per second for ``duration`` seconds to ``base_url``
    (``.../v1`` is appended), each a chat completion of about ``prompt_tokens`` words asking for
    ``max_tokens`` tokens. ``headers`` go on every request (e.g. a wait-for-backend timeout)."""

    base_url: str
    rps: float
    duration: float
    model: str | None = None
    prompt_tokens: int = 16
    max_tokens: int = 64
    # Streamed answers measure time to first token; unstreamed ones cost the server less.
    stream: bool = True
    timeout: float = 60.0
    max_in_flight: int = 2000
    api_key: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.rps <= 0 or self.duration <= 0:
            raise ValueError("rps and duration must be > 0")
        if self.prompt_tokens < 1 or self.max_tokens < 1:
            raise ValueError("prompt_tokens and max_tokens must be >= 1")


@dataclass(frozen=True)
class LoadProgress:
    """A live snapshot, handed to the progress callback about once a second."""

    elapsed: float
    sent: int
    done: int
    in_flight: int
    errors: int
    p50: float | None


@dataclass
class LoadReport:
    """What came of a run. Latencies and TTFTs are of successful requests, in seconds."""

    sent: int = 0
    ok: int = 0
    skipped: int = 0  # not sent: max_in_flight reached
    latencies: list[float] = field(default_factory=list)
    ttfts: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    served_by: Counter[str] = field(default_factory=Counter)
    elapsed: float = 0.0

    @property
    def failed(self) -> int:
        return sum(self.errors.values())

    def latency(self, q: float) -> float | None:
        return percentile(self.latencies, q)

    def ttft(self, q: float) -> float | None:
        return percentile(self.ttfts, q)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank ``q``-th percentile (0 < q <= 100), or None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def _prompt(tokens: int, n: int) -> str:
    # Different prompts per request: a real mix, and synthetic answers differ too.
    return " ".join(_WORDS[(n + i) % len(_WORDS)] for i in range(tokens))


async def _discover_model(client: httpx.AsyncClient) -> str:
    try:
        response = await client.get("models")
        data = response.json().get("data") if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError) as exc:
        raise ValueError(f"listing its models failed: {type(exc).__name__}") from None
    if not data:
        raise ValueError(f"listing its models failed (HTTP {response.status_code})")
    return str(data[0]["id"])


async def _nothing() -> AsyncIterator[str]:
    return
    yield


async def _one(
    client: httpx.AsyncClient, spec: LoadSpec, model: str, n: int, report: LoadReport
) -> None:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": _prompt(spec.prompt_tokens, n)}],
        "max_tokens": spec.max_tokens,
        "stream": spec.stream,
    }
    started = time.monotonic()
    first: float | None = None
    try:
        async with client.stream("POST", "chat/completions", json=body) as response:
            if response.status_code != 200:
                await response.aread()
                report.errors[f"HTTP {response.status_code}"] += 1
                return
            if not spec.stream and not json.loads(await response.aread()).get("choices"):
                raise ValueError("an answer without choices")
            async for line in response.aiter_lines() if spec.stream else _nothing():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                if first is None:
                    chunk = json.loads(line[6:])
                    if any((c.get("delta") or {}).get("content") for c in chunk["choices"]):
                        first = time.monotonic() - started
            served = response.headers.get(SERVED_BY_HEADER)
    except httpx.TimeoutException:
        report.errors["timeout"] += 1
        return
    except httpx.HTTPError as exc:
        report.errors[type(exc).__name__] += 1
        return
    except (ValueError, KeyError, TypeError):
        report.errors["bad response"] += 1
        return
    report.ok += 1
    report.latencies.append(time.monotonic() - started)
    if first is not None:
        report.ttfts.append(first)
    if served:
        report.served_by[served] += 1


async def run_load(
    spec: LoadSpec,
    progress: Callable[[LoadProgress], None] | None = None,
    *,
    stop: asyncio.Event | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> LoadReport:
    """Send the load, wait for every request to finish (or time out), and report. Setting
    ``stop`` ends the sending early (what was sent still finishes)."""
    headers = dict(spec.headers)
    if spec.api_key:
        headers["Authorization"] = f"Bearer {spec.api_key}"
    report = LoadReport()
    limits = httpx.Limits(max_connections=spec.max_in_flight, max_keepalive_connections=64)
    async with httpx.AsyncClient(
        base_url=spec.base_url.rstrip("/") + "/v1/",
        headers=headers,
        timeout=spec.timeout,
        limits=limits,
        transport=transport,
    ) as client:
        model = spec.model or await _discover_model(client)
        loop = asyncio.get_running_loop()
        start = loop.time()
        total = max(1, round(spec.rps * spec.duration))
        tasks: set[asyncio.Task[None]] = set()
        next_report = 1.0

        def snapshot() -> LoadProgress:
            return LoadProgress(
                elapsed=loop.time() - start,
                sent=report.sent,
                done=report.ok + report.failed,
                in_flight=len(tasks),
                errors=report.failed,
                p50=report.latency(50),
            )

        for n in range(total):
            due = start + n / spec.rps
            while stop is None or not stop.is_set():
                now = loop.time()
                if progress is not None and now - start >= next_report:
                    progress(snapshot())
                    next_report += 1.0
                if now >= due:
                    break
                await asyncio.sleep(min(due - now, max(0.0, start + next_report - now), 0.1))
            if stop is not None and stop.is_set():
                break
            if len(tasks) >= spec.max_in_flight:
                report.skipped += 1
                continue
            report.sent += 1
            task = asyncio.create_task(_one(client, spec, model, n, report))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        while tasks:
            await asyncio.wait(set(tasks), timeout=1.0)
            if progress is not None:
                progress(snapshot())
        report.elapsed = loop.time() - start
    return report
