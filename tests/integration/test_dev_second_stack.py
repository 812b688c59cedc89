"""A second Temporal dev server told to use a port the first one holds must not be taken for
started (issue 23): its own bind fails, yet the first server answers on that port, and before
this fix the second stack ran its worker against it. ``start_dev_server`` checks that the
process listening on the port is the one it started, and fails naming the holder."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelfleet.worker.devserver import DevServerError, start_dev_server

pytestmark = pytest.mark.integration


async def test_a_server_answering_on_the_port_is_not_taken_for_ours(tmp_path: Path) -> None:
    first = await start_dev_server(tmp_path / "first", ui=False, ready_timeout=60)
    try:
        port = int(first.address.rsplit(":", 1)[1])
        with pytest.raises(DevServerError, match=f"port {port} is in use") as raised:
            await start_dev_server(tmp_path / "second", port=port, ui=False, ready_timeout=60)
        assert f"pid {first.process.pid}" in str(raised.value)
        assert first.process.poll() is None  # the first one is left alone
    finally:
        first.stop()
