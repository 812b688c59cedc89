"""Start and stop the simulated clouds: the GKE fake, moto behind its EKS layer and the ARM
(AKS) fake, sharing the
simulated fleet's API server for the clusters they create.

Development/test emulator only: product code never imports ``modelfleet.sim``. Binds loopback
ports (the GKE fake, the EKS layer, moto) and writes the kubeconfigs the simulated fleet keeps
for its own use under ``<state_dir>/kubeconfigs`` (never a worker's credentials directory).

    async with SimulatedClouds.start(classes, server, state_dir=tmp) as clouds:
        os.environ.update(clouds.worker_env())   # what a worker needs to reach them
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from aiohttp import web
from moto.server import ThreadedMotoServer

from modelfleet.api.classes import InferenceClass
from modelfleet.sim.apiserver.server import FleetApiServer
from modelfleet.sim.clouds.aks import FakeAKS
from modelfleet.sim.clouds.eks import FakeEKS
from modelfleet.sim.clouds.faults import Stockout
from modelfleet.sim.clouds.gke import FakeGKE
from modelfleet.sim.clouds.kube import CloudKube, MachineCatalog
from modelfleet.sim.loop_thread import LoopThread
from modelfleet.sim.simulated_fleet import SimulatedFleet

__all__ = ["SimulatedClouds", "ThreadedClouds", "clouds_in_thread"]

T = TypeVar("T")

# Names of the worker settings the adapters read (see modelfleet.adapters.cloud_config).
ENV_GKE_ENDPOINT = "MODELFLEET_GKE_ENDPOINT"
ENV_GKE_TOKEN_FILE = "MODELFLEET_GKE_TOKEN_FILE"
ENV_EKS_ENDPOINT = "MODELFLEET_EKS_ENDPOINT"
ENV_AKS_ENDPOINT = "MODELFLEET_AKS_ENDPOINT"
ENV_AKS_TOKEN_FILE = "MODELFLEET_AKS_TOKEN_FILE"
ENV_AKS_SUBSCRIPTION = "MODELFLEET_AKS_SUBSCRIPTION_ID"
# A fake access token: the GKE fake demands it, so the tests can tell the worker used it.
SIM_GKE_TOKEN = "ya29.sim-gke-access-token-do-not-log"
SIM_AWS_KEY = "AKIASIMULATEDKEY0001"
SIM_AWS_SECRET = "sim-aws-secret-key-do-not-log"
# An ARM access token the AKS fake demands (a JWT's shape, not a JWT).
SIM_AZURE_TOKEN = "eyJ0eXAiOiJKV1Qi.sim-azure-arm-token-do-not-log"
SIM_AZURE_SUBSCRIPTION = "00000000-0000-4000-8000-00000000a4c5"


class SimulatedClouds:
    def __init__(
        self,
        gke: FakeGKE,
        eks: FakeEKS,
        aks: FakeAKS,
        moto: ThreadedMotoServer,
        runners: list[web.AppRunner],
        urls: tuple[str, str, str],
        fleet: SimulatedFleet,
        state_dir: Path,
    ) -> None:
        self.gke = gke
        self.eks = eks
        self.aks = aks
        self._moto = moto
        self._runners = runners
        self.gke_url, self.eks_url, self.aks_url = urls
        self.fleet = fleet
        self.state_dir = state_dir

    @classmethod
    async def start(
        cls,
        classes: Iterable[InferenceClass] | Mapping[str, InferenceClass],
        server: FleetApiServer,
        *,
        state_dir: str | Path,
        polls: int = 2,
        host: str = "127.0.0.1",
        stockouts: Mapping[str, Iterable[Stockout | Mapping[str, Any]]] | None = None,
    ) -> SimulatedClouds:
        """``stockouts``: per cloud (``gke``, ``eks``, ``aks``), the zones (or machine types in
        zones) out of capacity from the start; changed later at each fake's
        ``/_admin/stockouts``."""
        catalog = MachineCatalog(
            dict(classes) if isinstance(classes, Mapping) else {c.name: c for c in classes}
        )
        root = Path(state_dir)
        fleet = await SimulatedFleet.start(
            {}, [], state_dir=root, server=server, startup_seconds=0.3
        )
        kube = CloudKube(fleet, catalog)
        # moto's HTTP server logs every request; the fakes report what tests need.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        moto = ThreadedMotoServer(ip_address=host, port=0, verbose=False)
        moto.start()
        moto_host, moto_port = moto.get_host_and_port()
        gke = FakeGKE(kube, polls_per_operation=polls, token=SIM_GKE_TOKEN)
        eks = FakeEKS(kube, f"http://{moto_host}:{moto_port}", polls_to_active=polls)
        aks = FakeAKS(kube, polls=polls, token=SIM_AZURE_TOKEN)
        for fake, name in ((gke, "gke"), (eks, "eks"), (aks, "aks")):
            for item in (stockouts or {}).get(name, []):
                fake.stockouts.add(Stockout.model_validate(item))
        runners: list[web.AppRunner] = []
        urls: list[str] = []
        for app in (gke.app(), eks.app(), aks.app()):
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, host, 0)
            await site.start()
            port = runner.addresses[0][1]
            runners.append(runner)
            urls.append(f"http://{host}:{port}")
        clouds = cls(gke, eks, aks, moto, runners, (urls[0], urls[1], urls[2]), fleet, root)
        await eks.reset()
        return clouds

    def worker_env(self) -> dict[str, str]:
        """The worker settings that point the adapters at these clouds (documented in
        docs/clouds.md); the token file stands in for a real access token."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        token_file = self.state_dir / "gke-token"
        token_file.write_text(SIM_GKE_TOKEN)
        token_file.chmod(0o600)
        azure_token = self.state_dir / "azure-token"
        azure_token.write_text(SIM_AZURE_TOKEN)
        azure_token.chmod(0o600)
        return {
            ENV_AKS_ENDPOINT: self.aks_url,
            ENV_AKS_TOKEN_FILE: str(azure_token),
            ENV_AKS_SUBSCRIPTION: SIM_AZURE_SUBSCRIPTION,
            ENV_GKE_ENDPOINT: self.gke_url,
            ENV_GKE_TOKEN_FILE: str(token_file),
            ENV_EKS_ENDPOINT: self.eks_url,
            "AWS_ACCESS_KEY_ID": SIM_AWS_KEY,
            "AWS_SECRET_ACCESS_KEY": SIM_AWS_SECRET,
            "AWS_DEFAULT_REGION": "us-east-2",
        }

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()
        self._moto.stop()
        await self.fleet.stop()

    async def __aenter__(self) -> SimulatedClouds:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


class _ServerAndClouds:
    """What the loop thread holds: stopping it stops the clouds, then the server."""

    def __init__(self, server: FleetApiServer, clouds: SimulatedClouds) -> None:
        self.server = server
        self.clouds = clouds

    async def stop(self) -> None:
        await self.clouds.stop()
        await self.server.stop()


class ThreadedClouds:
    """The simulated fleet server and clouds on their own loop thread, for sync callers."""

    def __init__(self, running: LoopThread[_ServerAndClouds]) -> None:
        self._running = running
        self.server = running.target.server
        self.clouds = running.target.clouds

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        return self._running.run(coro, timeout)

    def stop(self) -> None:
        self._running.stop()


def clouds_in_thread(
    classes: Iterable[InferenceClass] | Mapping[str, InferenceClass],
    state_dir: str | Path,
    *,
    polls: int = 2,
) -> ThreadedClouds:
    """Start a fleet server and the clouds on a loop thread; stop with ``.stop()``."""
    catalog = dict(classes) if isinstance(classes, Mapping) else {c.name: c for c in classes}

    async def boot() -> _ServerAndClouds:
        server = await FleetApiServer.start()
        clouds = await SimulatedClouds.start(catalog, server, state_dir=state_dir, polls=polls)
        return _ServerAndClouds(server, clouds)

    return ThreadedClouds(LoopThread.start(boot, name="modelfleet-sim-clouds", timeout=60.0))
