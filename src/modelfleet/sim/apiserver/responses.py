"""HTTP response helpers shared by the simulated API server and its fault middleware.

Development/test emulator only: product code never imports ``modelfleet.sim``. Builds aiohttp
responses; performs no I/O itself.

Every JSON response carries ``Content-Type: application/json`` exactly, without a charset
parameter: some clients (lightkube) only raise their typed errors for that exact value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from modelfleet.sim.apiserver.status_errors import ApiError

__all__ = ["JSON_CONTENT_TYPE", "error_response", "json_response"]

JSON_CONTENT_TYPE = "application/json"


def json_response(
    payload: Any, *, status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    body = json.dumps(payload, separators=(",", ":")).encode()
    all_headers = {"Content-Type": JSON_CONTENT_TYPE}
    if headers:
        all_headers.update(headers)
    return web.Response(body=body, status=status, headers=all_headers)


def error_response(err: ApiError) -> web.Response:
    return json_response(err.status, status=err.code, headers=err.headers)
