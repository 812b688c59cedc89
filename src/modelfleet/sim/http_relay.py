"""Relaying an upstream HTTP response to the client as it arrives, the way the API server's
service proxy and the inference gateway both do: status and headers first (minus hop-by-hop
ones), then the body chunk by chunk, so streamed completions stream through.

Touches only the two aiohttp objects it is given.
"""

from __future__ import annotations

from collections.abc import Set

import aiohttp
from aiohttp import web


async def relay(
    request: web.Request, upstream: aiohttp.ClientResponse, dropped_headers: Set[str]
) -> web.StreamResponse:
    """Answer ``request`` with ``upstream``'s status, headers (those whose lower-case name is
    not in ``dropped_headers``) and body."""
    response = web.StreamResponse(status=upstream.status)
    for key, value in upstream.headers.items():
        if key.lower() not in dropped_headers:
            response.headers.add(key, value)
    await response.prepare(request)
    async for chunk in upstream.content.iter_any():
        await response.write(chunk)
    await response.write_eof()
    return response
