"""The load generator against a simulated engine served over real HTTP (and a failing server):
counts, percentiles, time to first token, errors, and which pod served; the CLI verb prints them."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator

import pytest
from aiohttp import web
from typer.testing import CliRunner

from modelfleet.cli.main import app
from modelfleet.sim.load import LoadProgress, LoadSpec, percentile, run_load
from modelfleet.sim.serving.engine import EngineProfile, EngineState
from modelfleet.sim.serving.openai_api import handle_engine

MODEL = "qwen"


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 90) == 90.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([3.0], 99) == 3.0
    assert percentile([], 50) is None


def test_bad_specs_are_refused() -> None:
    with pytest.raises(ValueError, match="rps"):
        LoadSpec(base_url="http://x", rps=0, duration=1)
    with pytest.raises(ValueError, match="max_tokens"):
        LoadSpec(base_url="http://x", rps=1, duration=1, max_tokens=0)


async def _serve(app_: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app_)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


@pytest.fixture
async def engine_url() -> AsyncIterator[tuple[str, EngineState]]:
    engine = EngineState(model=MODEL, pod="qwen-abc12-main-0", profile=EngineProfile())

    async def handler(request: web.Request) -> web.StreamResponse:
        return await handle_engine(request, engine)

    application = web.Application()
    application.router.add_route("*", "/{tail:.*}", handler)
    runner, url = await _serve(application)
    yield url, engine
    await runner.cleanup()


async def test_a_run_sends_on_schedule_and_measures(
    engine_url: tuple[str, EngineState],
) -> None:
    url, engine = engine_url
    seen: list[LoadProgress] = []
    spec = LoadSpec(base_url=url, rps=40, duration=1.5, max_tokens=4, prompt_tokens=5)
    report = await run_load(spec, seen.append)
    assert report.sent == 60
    assert report.ok == 60
    assert report.failed == 0
    assert engine.requests_total == 60
    assert engine.prompt_tokens_total == 60 * 5
    assert len(report.ttfts) == 60
    p50, p99 = report.latency(50), report.latency(99)
    assert p50 is not None
    assert p99 is not None
    assert 0 < p50 <= p99
    assert dict(report.served_by) == {"qwen-abc12-main-0": 60}
    # Open loop: the run lasts about its duration, with progress about once a second.
    assert 1.4 <= report.elapsed < 10
    assert seen
    assert seen[-1].done == 60


async def test_unstreamed_requests_and_errors_are_counted(
    engine_url: tuple[str, EngineState],
) -> None:
    url, engine = engine_url
    spec = LoadSpec(base_url=url, rps=20, duration=0.5, stream=False, max_tokens=3)
    report = await run_load(spec)
    assert (report.sent, report.ok, report.ttfts) == (10, 10, [])
    assert engine.generation_tokens_total == 30

    async def failing(request: web.Request) -> web.StreamResponse:
        if request.path.endswith("/models"):
            return web.json_response({"data": [{"id": MODEL}]})
        return web.Response(status=503, text="no healthy upstream")

    application = web.Application()
    application.router.add_route("*", "/{tail:.*}", failing)
    runner, bad = await _serve(application)
    try:
        report = await run_load(LoadSpec(base_url=bad, rps=20, duration=0.5))
    finally:
        await runner.cleanup()
    assert (report.ok, dict(report.errors)) == (0, {"HTTP 503": 10})
    assert report.latency(50) is None


@pytest.fixture
def engine_in_thread() -> Iterator[str]:
    """An engine on its own loop in a thread, for the synchronous CLI runner."""
    loop = asyncio.new_event_loop()
    engine = EngineState(model=MODEL, pod="qwen-abc12-main-0", profile=EngineProfile())

    async def handler(request: web.Request) -> web.StreamResponse:
        return await handle_engine(request, engine)

    application = web.Application()
    application.router.add_route("*", "/{tail:.*}", handler)
    runner, url = loop.run_until_complete(_serve(application))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield url
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def test_the_cli_verb_prints_percentiles_and_the_spread(engine_in_thread: str) -> None:
    result = CliRunner().invoke(
        app,
        ["sim", "load", engine_in_thread, "--rps", "20", "--duration", "0.5", "--max-tokens", "3"],
    )
    assert result.exit_code == 0, result.output
    assert "P50" in result.output
    assert "TTFT P99" in result.output
    assert "Served by: qwen-abc12-main-0 10" in result.output
    bad = CliRunner().invoke(app, ["sim", "load", engine_in_thread, "--rps", "0"])
    assert bad.exit_code != 0
    assert "rps and duration must be > 0" in bad.output


def test_the_documented_rehearsal_autoscaler_validates() -> None:
    from pathlib import Path

    from modelfleet.api.loading import load_paths

    docs = Path(__file__).resolve().parents[2] / "docs" / "autoscaling-rehearsal.yaml"
    result = load_paths([str(docs)])
    assert result.errors == []
    [autoscaler] = result.resources
    assert autoscaler.KIND == "ModelAutoscaler"


async def test_an_engine_counts_its_answers_by_handler_and_status_class() -> None:
    """The simulated engine's ``http_requests_total``, as vLLM's API server counts: every answer
    but to its own /metrics, by handler, method and status class."""
    engine = EngineState(model=MODEL, pod="qwen-abc12-main-0", profile=EngineProfile())
    for status in (200, 200, 500, 404):
        engine.answered("/v1/chat/completions", "POST", status)
    engine.answered("/health", "GET", 200)
    text = engine.metrics_text()
    assert (
        'http_requests_total{handler="/v1/chat/completions",method="POST",status="2xx"} 2.0' in text
    )
    assert (
        'http_requests_total{handler="/v1/chat/completions",method="POST",status="5xx"} 1.0' in text
    )
    assert 'http_requests_total{handler="/health",method="GET",status="2xx"} 1.0' in text
    assert 'status="4xx"} 1.0' in text
