"""Where the simulated gateway sends a request for one backendRef: an InferencePool's least-loaded
Ready pod (decode pods first in a disaggregated pool, as an endpoint picker would), a Service's
selector pods, or a selectorless Service's EndpointSlices (how a front door reaches other
clusters and external providers; an address that is a serving pod's IP maps to its loopback port).

Development/test emulator only. Reads the cluster's in-process store and the plane's engine
ports; it connects nowhere (the gateway does, to the URL it answers).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from modelfleet.sim.apiserver.selectors import label_selector_from_object
from modelfleet.sim.apiserver.store import ClusterStore
from modelfleet.sim.serving.engine import EngineState
from modelfleet.sim.serving.engine_ports import EnginePorts
from modelfleet.sim.serving.routes import BackendRef
from modelfleet.sim.serving.store_view import get, objects

__all__ = ["POOL_GROUP", "Backends", "NoBackendError"]

POOL_GROUP = "inference.networking.k8s.io"
_SERVICE_NAME_LABEL = "kubernetes.io/service-name"
_ROLE = "llm-d.ai/role"


class NoBackendError(Exception):
    """Nothing Ready behind the chosen backend (503)."""


class Backends:
    """Resolves backendRefs to the base URL (scheme://host:port) of one endpoint behind them."""

    def __init__(
        self, store: ClusterStore, engines: EnginePorts, host: str, rng: random.Random
    ) -> None:
        self.store = store
        self.engines = engines
        self.host = host
        self._rng = rng

    def resolve(self, backend: BackendRef) -> str:
        if backend.group == POOL_GROUP and backend.kind == "InferencePool":
            return self._pool_endpoint(backend)
        if backend.group in ("", "core") and backend.kind == "Service":
            return self._service_endpoint(backend)
        raise NoBackendError(f"unsupported backend kind {backend.group}/{backend.kind}")

    def _least_loaded(self, candidates: list[tuple[EngineState, int]], what: str) -> str:
        if not candidates:
            raise NoBackendError(f"no Ready pod behind {what}")
        low = min(engine.load for engine, _ in candidates)
        picks = [local for engine, local in candidates if engine.load == low]
        return f"http://{self.host}:{self._rng.choice(picks)}"

    def _pool_endpoint(self, backend: BackendRef) -> str:
        pool = get(self.store, f"{POOL_GROUP}/v1", "InferencePool", backend.namespace, backend.name)
        if pool is None:
            raise NoBackendError(f"InferencePool {backend.name} not found")
        spec = pool.get("spec") or {}
        ports = spec.get("targetPorts") or [{"number": 8000}]
        port = int(ports[0].get("number", 8000))
        selector = spec.get("selector") or {}
        # A disaggregated pool: the picker sends requests to the decode side (its sidecar
        # fetches the prefill), so only decode pods take requests directly.
        decode = self.engines.ready(
            backend.namespace,
            {**selector, "matchLabels": {**selector.get("matchLabels", {}), _ROLE: "decode"}},
            port,
        )
        candidates = decode or self.engines.ready(backend.namespace, selector, port)
        return self._least_loaded(candidates, f"InferencePool {backend.name}")

    def _service_endpoint(self, backend: BackendRef) -> str:
        svc = get(self.store, "v1", "Service", backend.namespace, backend.name)
        if svc is None:
            raise NoBackendError(f"Service {backend.name} not found")
        spec = svc.get("spec") or {}
        svc_ports = spec.get("ports") or []
        chosen = next(
            (p for p in svc_ports if backend.port is None or p.get("port") == backend.port),
            None,
        )
        if chosen is None:
            raise NoBackendError(f"Service {backend.name} has no port {backend.port}")
        if spec.get("selector"):
            target = chosen.get("targetPort", chosen.get("port"))
            if not isinstance(target, int):
                raise NoBackendError(f"named targetPort {target!r} is not supported")
            candidates = self.engines.ready(
                backend.namespace, {"matchLabels": spec["selector"]}, target
            )
            return self._least_loaded(candidates, f"Service {backend.name}")
        return self._slice_endpoint(backend, chosen)

    def _slice_endpoint(self, backend: BackendRef, svc_port: Mapping[str, Any]) -> str:
        slices = objects(
            self.store,
            "discovery.k8s.io/v1",
            "EndpointSlice",
            backend.namespace,
            label_selector_from_object({"matchLabels": {_SERVICE_NAME_LABEL: backend.name}}),
        )
        port_name = svc_port.get("name", "")
        targets: list[str] = []
        for item in slices:
            ports = [p for p in item.get("ports") or [] if p.get("name", "") == port_name]
            if not ports:
                continue
            port = int(ports[0].get("port", svc_port.get("port", 80)))
            https = ports[0].get("appProtocol") == "https" or port == 443
            for endpoint in item.get("endpoints") or []:
                if (endpoint.get("conditions") or {}).get("ready") is False:
                    continue
                for address in endpoint.get("addresses") or []:
                    local = self.engines.local_port(str(address), port)
                    if local is not None:
                        targets.append(f"http://{self.host}:{local}")
                    else:
                        host = f"[{address}]" if ":" in str(address) else str(address)
                        targets.append(f"{'https' if https else 'http'}://{host}:{port}")
        if not targets:
            raise NoBackendError(f"no ready endpoint of Service {backend.name}")
        return self._rng.choice(targets)
