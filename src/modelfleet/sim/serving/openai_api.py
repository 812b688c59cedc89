"""The OpenAI-compatible HTTP surface of one simulated engine, as vLLM serves it:
``GET /v1/models``, ``POST /v1/completions`` and ``/v1/chat/completions`` (SSE when
``stream: true``), ``/health`` and ``/metrics``.

Development/test emulator only. Touches only the aiohttp request it is given and the engine's
in-memory state; latency is simulated with real sleeps on the event loop.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from modelfleet.sim.serving.engine import EngineState, count_tokens, synthetic_tokens

__all__ = ["INFERENCE_PATHS", "SERVED_BY_HEADER", "fails", "handle_engine"]

INFERENCE_PATHS = frozenset({"/v1/completions", "/v1/chat/completions"})

# Which pod answered: lets a caller (the demo, tests) see which replica served a request.
SERVED_BY_HEADER = "x-modelfleet-served-by"
_ids = itertools.count(1)


def _error(status: int, message: str, kind: str) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    return web.json_response(body, status=status)


def _prompt_text(body: Mapping[str, Any], chat: bool) -> str | None:
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return None
        parts: list[str] = []
        for message in messages:
            content = message.get("content") if isinstance(message, Mapping) else None
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts += [str(p.get("text", "")) for p in content if isinstance(p, Mapping)]
        return " ".join(parts)
    prompt = body.get("prompt")
    if isinstance(prompt, list):
        return " ".join(str(p) for p in prompt)
    return prompt if isinstance(prompt, str) else None


def fails(path: str, error_rate: float, draw: float) -> bool:
    """Whether a request to ``path`` meets the engine's injected 5xx (``draw`` uniform in
    [0, 1)): only completions fail; health, models and metrics keep answering, as an engine
    whose core is broken but whose HTTP server is up does."""
    return path in INFERENCE_PATHS and draw < error_rate


async def handle_engine(
    request: web.Request,
    engine: EngineState,
    *,
    fail: bool = False,
    slower: float = 1.0,
    slower_decode: float = 1.0,
) -> web.StreamResponse:
    """Answer one request; ``fail`` answers it 500 (an injected fault), ``slower`` multiplies
    its time to first token (an image whose prefill is slow), ``slower_decode`` the time
    between its output tokens (an image whose decoding is slow)."""
    response = await _answer(request, engine, fail=fail, slower=slower, slower_decode=slower_decode)
    if request.path != "/metrics":
        # Counted as vLLM's API server counts them (its own /metrics excluded).
        engine.answered(request.path, request.method, response.status)
    return response


async def _answer(
    request: web.Request,
    engine: EngineState,
    *,
    fail: bool = False,
    slower: float = 1.0,
    slower_decode: float = 1.0,
) -> web.StreamResponse:
    path, method = request.path, request.method
    if fail:
        if engine.log is not None:
            engine.log(f"ERROR Engine core failed the request to {path} (simulated fault)")
        return _error(
            500,
            "EngineCore encountered an issue. See stack trace (above) for the root cause.",
            "InternalServerError",
        )
    if path == "/health" and method == "GET":
        return web.Response(status=200)
    if path == "/metrics" and method == "GET":
        return web.Response(text=engine.metrics_text(), content_type="text/plain")
    if path == "/v1/models" and method == "GET":
        card = {
            "id": engine.model,
            "object": "model",
            "created": 0,
            "owned_by": "vllm",
            "root": engine.model,
            "parent": None,
            "max_model_len": engine.profile.max_model_len,
        }
        return web.json_response({"object": "list", "data": [card]})
    if path in ("/v1/completions", "/v1/chat/completions"):
        if method != "POST":
            return _error(405, f"{method} not allowed on {path}", "BadRequestError")
        return await _generate(
            request,
            engine,
            chat=path.endswith("chat/completions"),
            slower=slower,
            slower_decode=slower_decode,
        )
    return _error(404, f"no route {method} {path}", "NotFoundError")


async def _generate(
    request: web.Request,
    engine: EngineState,
    *,
    chat: bool,
    slower: float = 1.0,
    slower_decode: float = 1.0,
) -> web.StreamResponse:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return _error(400, "the request body is not JSON", "BadRequestError")
    if not isinstance(body, dict):
        return _error(400, "the request body must be a JSON object", "BadRequestError")
    if body.get("model") != engine.model:
        return _error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
    prompt = _prompt_text(body, chat)
    if prompt is None:
        field = "messages" if chat else "prompt"
        return _error(400, f"`{field}` is required", "BadRequestError")
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    max_tokens = engine.profile.default_max_tokens
    if limit is not None:
        if not isinstance(limit, int) or limit < 1:
            return _error(400, "max_tokens must be a positive integer", "BadRequestError")
        max_tokens = limit
    prompt_tokens = count_tokens(prompt)
    tokens = synthetic_tokens(engine.model, prompt, max_tokens)
    ident = f"{'chatcmpl' if chat else 'cmpl'}-sim{next(_ids)}"
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": len(tokens),
        "total_tokens": prompt_tokens + len(tokens),
    }
    headers = {SERVED_BY_HEADER: engine.pod}
    started = time.monotonic()
    profile = engine.profile
    async with engine.slot(prompt_tokens + len(tokens)):
        await asyncio.sleep(profile.time_to_first_token * slower)
        engine.observe_ttft(time.monotonic() - started)
        per_token = slower_decode / profile.tokens_per_second
        if not body.get("stream"):
            if len(tokens) > 1:
                # Decoded in one go: each token after the first took an equal share of it.
                decoding = time.monotonic()
                await asyncio.sleep((len(tokens) - 1) * per_token)
                spent = time.monotonic() - decoding
                engine.observe_tpot(spent / (len(tokens) - 1), len(tokens) - 1)
            engine.finished(prompt_tokens, len(tokens))
            return web.json_response(
                _whole(ident, engine.model, tokens, usage, chat), headers=headers
            )
        response = web.StreamResponse(
            headers={**headers, "Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        created = int(time.time())
        previous = time.monotonic()
        for i, token in enumerate(tokens):
            if i:
                await asyncio.sleep(per_token)
                now = time.monotonic()
                engine.observe_tpot(now - previous)
                previous = now
            last = i == len(tokens) - 1
            chunk = _chunk(ident, engine.model, created, token, i == 0, last, chat)
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        options = body.get("stream_options")
        if isinstance(options, Mapping) and options.get("include_usage"):
            tail = {**_chunk(ident, engine.model, created, "", False, False, chat), "choices": []}
            await response.write(f"data: {json.dumps({**tail, 'usage': usage})}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        engine.finished(prompt_tokens, len(tokens))
        await response.write_eof()
        return response


def _whole(
    ident: str, model: str, tokens: list[str], usage: dict[str, int], chat: bool
) -> dict[str, Any]:
    text = "".join(tokens)
    choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": "length"}
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    return {
        "id": ident,
        "object": "chat.completion" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": usage,
    }


def _chunk(
    ident: str, model: str, created: int, token: str, first: bool, last: bool, chat: bool
) -> dict[str, Any]:
    choice: dict[str, Any] = {
        "index": 0,
        "logprobs": None,
        "finish_reason": "length" if last else None,
    }
    if chat:
        choice["delta"] = {"role": "assistant", "content": token} if first else {"content": token}
    else:
        choice["text"] = token
    return {
        "id": ident,
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": created,
        "model": model,
        "choices": [choice],
    }
