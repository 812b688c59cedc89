"""Shell completion of live names and namespaces, as kubectl completes them from the server.

Names come from Temporal visibility (the ``ModelfleetKind``, ``ModelfleetNamespace`` and
``ModelfleetName`` search attributes each entity workflow keeps), else, for kinds held inside
another workflow (classes in the Fleet, the gateway in the endpoint directory), from the kind's
own reader. Completion must never get in the way of typing: the whole lookup is bounded by
:data:`COMPLETION_SECONDS`, and no server, no worker, a bad configuration or any error offers
no candidates and prints nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import typer
from temporalio.client import Client

from modelfleet.cli.targets import is_namespaced, resolve_namespace
from modelfleet.contracts import search
from modelfleet.worker.client import connect
from modelfleet.worker.settings import TemporalSettings

__all__ = ["COMPLETION_SECONDS", "complete_names", "complete_namespaces"]

# A shell waits on completion while the user waits on the shell.
COMPLETION_SECONDS = 2.0
# Visibility rows read at most (a completion menu past this is no help anyway).
MAX_ROWS = 1000


def complete_names(ctx: typer.Context, kind: str, incomplete: str) -> list[str]:
    """Names of live ``kind`` resources starting with ``incomplete``, in the namespace the verb
    would use (``-n``, else ``MODELFLEET_NAMESPACE``, the config file, ``default``), or every
    namespace with ``-A``."""
    namespace: str | None = None
    if is_namespaced(kind) and not ctx.params.get("all_namespaces"):
        try:
            namespace = resolve_namespace(ctx.params.get("namespace")).name
        except Exception:  # an unreadable config file: the verb will say so, not completion
            return []
    found = _bounded(ctx, lambda client: _names(client, kind, namespace))
    return sorted(n for n in found if n.startswith(incomplete))


def complete_namespaces(ctx: typer.Context, incomplete: str) -> list[str]:
    """Namespaces that hold any live modelfleet resource, starting with ``incomplete``."""
    found = _bounded(ctx, _namespaces)
    return sorted(n for n in found if n.startswith(incomplete))


def _bounded(ctx: typer.Context, read: Callable[[Client], Awaitable[set[str]]]) -> set[str]:
    root = ctx.find_root().params

    async def run() -> set[str]:
        settings = TemporalSettings.load(
            root.get("profile"),
            address=root.get("address"),
            namespace=root.get("temporal_namespace"),
        )
        return await read(await connect(settings))

    async def bounded() -> set[str]:
        return await asyncio.wait_for(run(), COMPLETION_SECONDS)

    with contextlib.suppress(Exception):
        return asyncio.run(bounded())
    return set()


async def _names(client: Client, kind: str, namespace: str | None) -> set[str]:
    query = f"ModelfleetKind = '{kind}' AND ExecutionStatus = 'Running'"
    if namespace:
        query += f" AND ModelfleetNamespace = '{namespace}'"
    names = {
        name
        async for w in client.list_workflows(query, limit=MAX_ROWS)
        if (name := w.typed_search_attributes.get(search.NAME))
    }
    if names:
        return names
    from modelfleet.cli import kinds  # the registry imports this module's callers

    fetch = kinds.spec_of(kind).fetch
    if fetch is None:
        return set()
    fetched: list[Any] = await fetch(client, namespace, set())
    return {f.name for f in fetched}


async def _namespaces(client: Client) -> set[str]:
    query = "ModelfleetNamespace IS NOT NULL AND ExecutionStatus = 'Running'"
    return {
        ns
        async for w in client.list_workflows(query, limit=MAX_ROWS)
        if (ns := w.typed_search_attributes.get(search.NAMESPACE))
    }
