"""The simulated API server's ``pods/exec`` at the frame level: the WebSocket subprotocols
(v5.channel.k8s.io and v4), the stream bytes, the Status on the error stream, stdin and its v5
close signal, a TTY's line endings, and the answers to requests that are not WebSocket exec
(kubectl's real client is driven in tests/kubectl)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from modelfleet.sim.apiserver.server import FleetApiServer, serve_in_thread
from modelfleet.sim.loop_thread import LoopThread

V5, V4 = "v5.channel.k8s.io", "v4.channel.k8s.io"


@pytest.fixture(scope="module")
def srv() -> Iterator[LoopThread[FleetApiServer]]:
    with serve_in_thread() as running:
        yield running


def _pod(srv: LoopThread[FleetApiServer], *, running: bool = True) -> tuple[str, str]:
    cluster = f"x-{uuid.uuid4().hex[:6]}"
    srv.call(srv.target.add_cluster, cluster)
    store = srv.call(srv.target.store, cluster)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "box", "namespace": "default"},
        "spec": {
            "nodeName": "node-1",
            "containers": [
                {"name": "main", "image": "busybox", "env": [{"name": "A", "value": "1"}]}
            ],
        },
    }
    srv.run(store.create(pod))
    state = {"running": {"startedAt": "2026-01-01T00:00:00Z"}} if running else {"waiting": {}}
    status = {
        "phase": "Running" if running else "Pending",
        "podIP": "10.128.0.9",
        "containerStatuses": [{"name": "main", "state": state}],
    }
    srv.run(store.patch_status("v1", "Pod", "box", status, namespace="default"))
    return srv.target.cluster_url(cluster), cluster


async def _exec(
    url: str, query: str, protocols: tuple[str, ...], send: tuple[bytes, ...] = ()
) -> tuple[str | None, list[bytes], int | None]:
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(
            f"{url}/api/v1/namespaces/default/pods/box/exec?{query}", protocols=protocols
        ) as ws,
    ):
        for frame in send:
            await ws.send_bytes(frame)
        frames: list[bytes] = []
        async with asyncio.timeout(30):
            async for msg in ws:
                assert msg.type == aiohttp.WSMsgType.BINARY
                frames.append(msg.data)
        return ws.protocol, frames, ws.close_code


def _status(frame: bytes) -> dict[str, Any]:
    assert frame[0] == 3
    status: dict[str, Any] = json.loads(frame[1:])
    return status


def test_v4_and_v5_frames_and_the_success_status(srv: LoopThread[FleetApiServer]) -> None:
    url, _ = _pod(srv)
    query = "command=sh&command=-c&command=echo%20hi%3B%20echo%20oops%20%3E%262&stdout=1&stderr=1"
    for protocols, negotiated in (((V5, V4), V5), ((V4,), V4)):
        protocol, frames, code = asyncio.run(_exec(url, query, protocols))
        assert protocol == negotiated
        # The lowest output stream announces the session, then output, then the Status.
        assert frames[:3] == [b"\x01", b"\x01hi\n", b"\x02oops\n"]
        assert _status(frames[3]) == {"metadata": {}, "status": "Success"}
        assert (len(frames), code) == (4, 1000)


def test_non_zero_exit_is_a_non_zero_exit_code_status(srv: LoopThread[FleetApiServer]) -> None:
    url, _ = _pod(srv)
    _, frames, _ = asyncio.run(_exec(url, "command=printenv&command=NOPE&stdout=1", (V5,)))
    status = _status(frames[-1])
    assert (status["status"], status["reason"]) == ("Failure", "NonZeroExitCode")
    assert status["details"] == {"causes": [{"reason": "ExitCode", "message": "1"}]}
    assert status["message"].endswith("error executing command [printenv NOPE], exit code 1")


def test_stdin_ends_with_the_v5_close_signal(srv: LoopThread[FleetApiServer]) -> None:
    url, _ = _pod(srv)
    send = (b"\x00line 1\n", b"\x00line 2\n", b"\xff\x00")
    _, frames, _ = asyncio.run(_exec(url, "command=cat&stdin=1&stdout=1", (V5,), send))
    assert b"".join(f[1:] for f in frames if f[0] == 1) == b"line 1\nline 2\n"
    assert _status(frames[-1])["status"] == "Success"


def test_a_tty_has_one_output_stream_with_crlf(srv: LoopThread[FleetApiServer]) -> None:
    url, _ = _pod(srv)
    query = "command=sh&command=-c&command=echo%20a%3B%20nope&stdout=1&stderr=1&tty=1"
    # kubectl sends the terminal's size first; the command starts once it is there.
    resize = b'\x04{"Width":80,"Height":24}'
    _, frames, _ = asyncio.run(_exec(url, query, (V5,), (resize,)))
    assert b"".join(f[1:] for f in frames if f[0] == 1) == b"a\r\nsh: 1: nope: not found\r\n"
    assert not [f for f in frames if f[0] == 2]


def test_a_container_not_running_fails_after_the_upgrade(srv: LoopThread[FleetApiServer]) -> None:
    url, _ = _pod(srv, running=False)
    _, frames, _ = asyncio.run(_exec(url, "command=true&stdout=1", (V5,)))
    status = _status(frames[-1])
    assert (status["reason"], status["code"]) == ("InternalError", 500)
    assert status["message"] == (
        'Internal error occurred: unable to upgrade connection: container not found ("main")'
    )


def test_requests_that_are_not_websocket_exec(srv: LoopThread[FleetApiServer]) -> None:
    url, cluster = _pod(srv)
    exec_path = "/api/v1/namespaces/default/pods/box/exec"

    async def post(
        query: str, headers: dict[str, str] | None = None, root: str = url
    ) -> tuple[int, dict[str, Any]]:
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{root}{exec_path}?{query}", headers=headers) as resp,
        ):
            return resp.status, await resp.json()

    spdy = {"Connection": "Upgrade", "Upgrade": "SPDY/3.1"}
    code, body = asyncio.run(post("command=true&stdout=1", spdy))
    assert (code, body["reason"]) == (400, "BadRequest")
    assert "WebSocket" in body["message"]
    code, body = asyncio.run(post("command=true&stdout=1"))
    assert (code, body["message"]) == (400, "Upgrade request required")
    code, body = asyncio.run(post("stdout=1"))
    assert (code, body["message"]) == (400, "you must specify at least 1 command")
    code, body = asyncio.run(post("command=true&stdout=1&container=side"))
    assert (code, body["message"]) == (400, "container side is not valid for pod box")
    # The same subresource under /clusters/<name> on the main port.
    code, body = asyncio.run(post("command=true&stdout=1", root=srv.target.prefixed_url(cluster)))
    assert (code, body["message"]) == (400, "Upgrade request required")
