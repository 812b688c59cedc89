"""A simulated management cluster beside the shared stack (on the fleet's own API server, with
the CRDs installed and no GPUs), the controller running on the test's loop, and the real kubectl
against it (asynchronous subprocesses: the API server answers on this same loop).

Every wait is bounded; kubectl's own ``wait`` is used where it can say what is awaited.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from integration_support import Stack, cancel_and_wait, raise_its_error

from modelfleet.adapters.management import ManagementCluster
from modelfleet.api.crds import custom_resource_definitions
from modelfleet.controller.runner import Controller
from modelfleet.controller.support import ControllerSettings

KUBECTL_TIMEOUT = 120


@dataclass
class Kubectl:
    """The real kubectl against one cluster (HOME kept inside the test)."""

    kubeconfig: Path
    home: Path

    async def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> tuple[int, str, str]:
        binary = shutil.which("kubectl")
        if binary is None:
            pytest.fail("kubectl is not on PATH: these tests drive the real kubectl")
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.home),
            "KUBECONFIG": str(self.kubeconfig),
        }
        proc = await asyncio.create_subprocess_exec(
            binary,
            *args,
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(
            proc.communicate(stdin.encode() if stdin is not None else None), KUBECTL_TIMEOUT
        )
        code = proc.returncode or 0
        if check and code != 0:
            raise AssertionError(f"kubectl {' '.join(args)} exited {code}:\n{out!r}\n{err!r}")
        return code, out.decode(), err.decode()

    async def get_json(self, *args: str) -> dict[str, Any]:
        _, out, _ = await self.kubectl("get", *args, "-o", "json")
        found: dict[str, Any] = json.loads(out)
        return found


@dataclass
class Management(Kubectl):
    stack: Stack | None = None
    name: str = ""
    controllers: list[tuple[asyncio.Task[None], asyncio.Event, Controller]] = field(
        default_factory=list
    )

    def api(self) -> ManagementCluster:
        return ManagementCluster(self.kubeconfig)

    def start_controller(self, **settings: Any) -> Controller:
        defaults: dict[str, Any] = {"status_interval_seconds": 1.0, "resync_seconds": 20.0}
        assert self.stack is not None
        controller = Controller(
            self.api(), self.stack.client, ControllerSettings(**{**defaults, **settings})
        )
        stop = asyncio.Event()
        task = asyncio.create_task(controller.run(stop))
        self.controllers.append((task, stop, controller))
        return controller

    async def stop_controllers(self) -> None:
        for _task, stop, _ in self.controllers:
            stop.set()
        for task, _, _ in self.controllers:
            await asyncio.wait([task], timeout=30)
            if not task.done():
                await cancel_and_wait(task)
                raise AssertionError("a controller did not stop within 30 s of its stop event")
            raise_its_error(task)
        self.controllers.clear()

    async def kill(self, controller: Controller) -> None:
        """Stop one controller at once, as a SIGKILL would (its lease is not released)."""
        for entry in list(self.controllers):
            if entry[2] is controller:
                await cancel_and_wait(entry[0])
                self.controllers.remove(entry)


@contextlib.asynccontextmanager
async def management_cluster(stack: Stack, name: str, tmp: Path) -> AsyncIterator[Management]:
    """A fresh management cluster named ``name`` with the CRDs (no controller yet)."""
    server = stack.fleet.server
    server.add_cluster(name)
    kubeconfig = server.write_kubeconfig(name, tmp / f"{name}.yaml")
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    api = ManagementCluster(kubeconfig)
    for crd in custom_resource_definitions():
        await asyncio.to_thread(api.create, crd)
    found = Management(kubeconfig, home, stack, name)
    try:
        yield found
    finally:
        await found.stop_controllers()
        server.remove_cluster(name)
