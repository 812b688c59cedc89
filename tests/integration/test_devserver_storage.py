"""The dev server that ``modelfleet dev`` starts keeps its SQLite state in WAL mode (issue 11:
fsync on every commit halved the dev server's throughput)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from modelfleet.worker.devserver import start_dev_server

pytestmark = pytest.mark.integration


async def test_dev_server_state_is_in_write_ahead_log_mode(tmp_path: Path) -> None:
    server = await start_dev_server(tmp_path, ui=False)
    try:
        # journal_mode=wal is stored in the database file itself, and the server keeps a -wal
        # file beside it while running.
        assert (tmp_path / "temporal.sqlite-wal").exists()
        with sqlite3.connect(tmp_path / "temporal.sqlite") as db:
            assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert "synchronous=normal" in server.process.args
    finally:
        server.stop()
