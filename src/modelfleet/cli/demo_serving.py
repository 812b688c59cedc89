"""The end of ``modelfleet demo``: apply the quickstart's InferenceGateway and ModelService, wait
until the service routes, then send one chat completion through the service address with the
official ``openai`` client and print the answer and which replica served it.

Side effects: Temporal client calls, HTTP to the service address, console output.
"""

from __future__ import annotations

import asyncio
import time

from temporalio.client import Client

from modelfleet.api.meta import Resource
from modelfleet.api.services import InferenceGateway, ModelService
from modelfleet.applying.serving import apply_serving
from modelfleet.cli.output import console
from modelfleet.cli.serving_inspect import service_status
from modelfleet.contracts.serving_payloads import ServiceStatus

SERVED_BY_HEADER = "x-modelfleet-served-by"


async def _routing(client: Client, svc: ModelService, limit: float) -> ServiceStatus | None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        status = await service_status(client, svc.namespace, svc.name)
        if status.phase == "Ready" and status.address:
            return status
        await asyncio.sleep(0.5)
    return None


async def chat_through_services(client: Client, resources: list[Resource]) -> bool:
    """True when every ModelService answered a chat completion (or there is none)."""
    gateways = [r for r in resources if isinstance(r, InferenceGateway)]
    services = [r for r in resources if isinstance(r, ModelService)]
    if not services:
        return True
    try:
        import openai
    except ImportError:
        console.print("[yellow]skipping the chat completion: install the dev extra (openai)[/]")
        return True
    for gateway in gateways:
        await apply_serving(client, gateway)
    ok = True
    for svc in services:
        await apply_serving(client, svc, probe_interval_seconds=2)
        status = await _routing(client, svc, 60)
        if status is None or status.address is None:
            console.print(f"[red]ModelService {svc.namespace}/{svc.name} is not routing[/]")
            ok = False
            continue
        console.print(
            f"ModelService {svc.namespace}/{svc.name} serves at [bold]{status.address}[/]"
        )
        api = openai.AsyncOpenAI(base_url=f"{status.address}/v1", api_key="none", max_retries=2)
        models = await api.models.list()
        model = models.data[0].id
        raw = await api.chat.completions.with_raw_response.create(
            model=model, messages=[{"role": "user", "content": "Say hello to the fleet."}]
        )
        answer = raw.parse().choices[0].message.content
        console.print(f"  chat completion from {model}: [green]{answer}[/]")
        console.print(f"  served by {raw.headers.get(SERVED_BY_HEADER, 'an unnamed replica')}")
    return ok
