"""Shell completion of live names and namespaces through the shell protocol, against the real
dev server: what ``get``, ``describe`` and ``delete`` offer after a kind, after ``KIND/`` and
after ``-n``; and nothing (quickly, silently) when no server answers."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid

from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from typer.testing import CliRunner

from modelfleet.cli.main import app
from modelfleet.contracts import search


def _complete(words: str, address: str, namespace: str = "") -> list[str]:
    parts = words.split(" ")
    result = CliRunner().invoke(
        app,
        [],
        prog_name="modelfleet",
        env={
            "_MODELFLEET_COMPLETE": "complete_bash",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(parts) - 1),
            "MODELFLEET_TEMPORAL_ADDRESS": address,
            "MODELFLEET_NAMESPACE": namespace,
            "MODELFLEET_CONFIG": "/nonexistent/modelfleet.yaml",
        },
    )
    assert result.exit_code == 0, result.output
    return result.output.split()


async def _start(client: Client, kind: str, namespace: str, name: str) -> None:
    """A running workflow marked as a modelfleet resource (no worker needed: visibility only)."""
    await client.start_workflow(
        kind,
        id=f"{kind}/{namespace}/{name}/{uuid.uuid4().hex[:6]}",
        task_queue="completion-test-nobody-polls",
        search_attributes=TypedSearchAttributes(
            [
                SearchAttributePair(search.KIND, kind),
                SearchAttributePair(search.NAMESPACE, namespace),
                SearchAttributePair(search.NAME, name),
            ]
        ),
    )


async def _eventually(what: str, check: object) -> list[str]:
    deadline = time.monotonic() + 60  # visibility lags a start by well under a second
    while True:
        found = await asyncio.to_thread(check)  # type: ignore[arg-type]
        if found or time.monotonic() > deadline:
            assert found, f"no completion for {what}"
            return found  # type: ignore[no-any-return]
        await asyncio.sleep(0.2)


async def test_names_and_namespaces_complete_from_the_live_fleet(dev_client: Client) -> None:
    address = dev_client.service_client.config.target_host
    await _start(dev_client, "ModelDeployment", "ml", "qwen3-8b")
    await _start(dev_client, "ModelDeployment", "ml", "qwen3-coder")
    await _start(dev_client, "ModelDeployment", "research", "kimi-k2")
    await _start(dev_client, "ModelCache", "ml", "qwen-weights")

    offered = await _eventually(
        "deployment names", lambda: _complete("modelfleet get deploy -n ml q", address)
    )
    assert offered == ["qwen3-8b", "qwen3-coder"]

    async def complete(words: str, namespace: str = "") -> list[str]:
        # In a thread: a shell's completion process has no running event loop.
        return await asyncio.to_thread(_complete, words, address, namespace)

    assert await complete("modelfleet get md -A ") == ["kimi-k2", "qwen3-8b", "qwen3-coder"]
    assert await complete("modelfleet describe -n ml md/qwen3-c") == ["md/qwen3-coder"]
    assert await complete("modelfleet delete md -n ml qwen3-8") == ["qwen3-8b"]
    assert await complete("modelfleet get caches -n ml ") == ["qwen-weights"]
    assert await complete("modelfleet get md ", namespace="research") == ["kimi-k2"]
    assert await complete("modelfleet get md ") == []  # the default namespace holds none
    assert await complete("modelfleet get nosuchkind ") == []
    assert await complete("modelfleet get -n r") == ["research"]
    assert await complete("modelfleet get -n ") == ["ml", "research"]


def test_completion_offers_nothing_quietly_when_no_server_answers() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    assert _complete("modelfleet get deploy ", address) == []
    assert _complete("modelfleet get -n ", address) == []
    assert "deployments" in _complete("modelfleet get deploy", address)  # kinds need no server
