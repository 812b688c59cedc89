"""The ``pods/exec`` subresource as kubectl (1.30 and later) speaks it: a WebSocket with the
``v5.channel.k8s.io`` subprotocol (``v4.channel.k8s.io`` accepted too), binary frames whose first
byte is the stream (0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize; in v5, ``[255, id]`` closes
a stream). The command runs in :mod:`.exec_commands`' emulated container.

What the real API server and runtime do, and this one does too:

- Before the upgrade, answered as a Status: a missing pod (404), a container that is not the
  pod's or a missing container name with several (400, the API server's wording), a pod not
  bound to a node (400 ``pod X does not have a host assigned``), no command or no stream (400).
  kubectl then retries over SPDY, which this server refuses with the same kind of 400.
- After the upgrade: an empty frame on the lowest output stream first, the output, then one
  metav1.Status on stream 3 worded as the API server's stream translator relays the runtime's
  answer: Success; Failure/NonZeroExitCode with ``details.causes [{reason: ExitCode, message:
  "<code>"}]``; or InternalError for a container that is not running (``unable to upgrade
  connection: container not found``) or an executable the runtime cannot start (containerd's
  ``OCI runtime exec failed`` message, as ``kubectl exec`` prints it). Then a normal close.
- With a TTY, stderr is not a separate stream and output lines end in CRLF (the terminal's
  ``onlcr``); the command starts once the terminal's first size has come (at most 1 s), later
  resize frames are ignored.

The container's environment is the one its runtime would give it: ``PATH``, ``HOSTNAME``, its
``env``/``envFrom`` (values, ``$(VAR)`` references, field, ConfigMap and Secret references), the
service links of its namespace (``enableServiceLinks``) and the ``kubernetes`` Service's, and
``HOME``. Its GPUs are the ``gpu.nvidia.com`` devices allocated to the ResourceClaims the
container references, described by the ResourceSlices that publish them.

Development/test emulator only: product code never imports ``modelfleet.sim``. Reads the
cluster's in-memory store; talks HTTP only to the loopback engine ports the serving plane
reports (for ``curl`` inside the container).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import re
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web

from modelfleet.sim.apiserver import status_errors
from modelfleet.sim.apiserver.exec_commands import (
    Container,
    Gpu,
    Outcome,
    StartError,
    run_command,
)
from modelfleet.sim.apiserver.request_info import RequestInfo
from modelfleet.sim.apiserver.status_errors import ApiError

if TYPE_CHECKING:
    from modelfleet.sim.apiserver.proxy import EngineLocator
    from modelfleet.sim.apiserver.store import ClusterStore

__all__ = ["EXEC_PROTOCOLS", "container_env", "container_gpus", "serve_pod_exec"]

EXEC_PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
NVIDIA_GPU_DRIVER = "gpu.nvidia.com"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_FRAME_BYTES = 32 * 1024
_FETCH_TIMEOUT = aiohttp.ClientTimeout(total=30.0, sock_connect=5.0)
# How long the server waits for the client's answer to its close frame.
_CLOSE_TIMEOUT_SECONDS = 10.0
# A TTY client sends the terminal's size first; the command waits for it at most this long.
_FIRST_RESIZE_SECONDS = 1.0


def _flag(query: Mapping[str, str], name: str) -> bool:
    return query.get(name, "").lower() in ("1", "true")


def _pick_container(pod: Mapping[str, Any], requested: str) -> dict[str, Any]:
    name = str((pod.get("metadata") or {}).get("name", ""))
    spec = pod.get("spec") or {}
    containers = list(spec.get("containers") or [])
    if not requested:
        if len(containers) == 1:
            return dict(containers[0])
        if not containers:
            raise status_errors.bad_request(f"a container name must be specified for pod {name}")
        names = [str(c.get("name")) for c in containers + list(spec.get("initContainers") or [])]
        raise status_errors.bad_request(
            f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]"
        )
    for c in containers + list(spec.get("initContainers") or []):
        if c.get("name") == requested:
            return dict(c)
    raise status_errors.bad_request(f"container {requested} is not valid for pod {name}")


def _running(pod: Mapping[str, Any], container: str) -> bool:
    status = pod.get("status") or {}
    for cs in list(status.get("containerStatuses") or []) + list(
        status.get("initContainerStatuses") or []
    ):
        if cs.get("name") == container:
            return bool((cs.get("state") or {}).get("running"))
    return False


async def serve_pod_exec(
    request: web.Request, store: ClusterStore, info: RequestInfo, locator: EngineLocator | None
) -> web.StreamResponse:
    """``GET|POST .../pods/<name>/exec?command=...&container=...&stdout=true...``."""
    if request.method not in ("GET", "POST"):
        raise status_errors.method_not_allowed(request.method, request.path)
    if info.name is None or info.namespace is None:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    query = request.query
    pod = store.get_object(store.resource_type("v1", "Pod"), info.namespace, info.name)
    spec = _pick_container(pod, query.get("container", ""))
    if not (pod.get("spec") or {}).get("nodeName"):
        raise status_errors.bad_request(f"pod {info.name} does not have a host assigned")
    command = query.getall("command", [])
    if not command:
        raise status_errors.bad_request("you must specify at least 1 command")
    stdin, stdout, stderr, tty = (_flag(query, p) for p in ("stdin", "stdout", "stderr", "tty"))
    stderr = stderr and not tty  # a terminal has one output stream
    if not (stdin or stdout or stderr):
        raise status_errors.bad_request("you must specify at least 1 of stdin, stdout, stderr")
    ws = web.WebSocketResponse(protocols=EXEC_PROTOCOLS, autoping=True, max_msg_size=0)
    ready = ws.can_prepare(request)
    if not ready.ok:
        if request.headers.get("Upgrade", "").lower().startswith("spdy"):
            raise status_errors.bad_request(
                "the simulated API server serves exec over WebSocket (v5.channel.k8s.io) only; "
                "use kubectl 1.30 or later"
            )
        raise status_errors.bad_request("Upgrade request required")
    if ready.protocol is None:
        raise status_errors.bad_request(
            f"requested protocol(s) are not supported: "
            f"[{request.headers.get('Sec-WebSocket-Protocol', '')}]; "
            f"supports [{' '.join(EXEC_PROTOCOLS)}]"
        )
    await ws.prepare(request)
    session = _Session(ws, v5=ready.protocol == EXEC_PROTOCOLS[0], stdin=stdin)
    reader = asyncio.create_task(session.read_loop())
    try:
        # The lowest output stream announces the connection (the API server's first frame).
        first = STDOUT if stdout else STDERR if stderr else ERROR
        await ws.send_bytes(bytes([first]))
        if tty:
            # A command that ends at once would otherwise close the session before kubectl has
            # written the terminal's size, which it then reports as an error (a real runtime is
            # never that fast).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_FIRST_RESIZE_SECONDS):
                    await session.resized.wait()
        status = await _run(session, store, pod, spec, list(command), locator, tty=tty)
        await _send_output(ws, session.outcome, stdout=stdout, stderr=stderr, tty=tty)
        await ws.send_bytes(bytes([ERROR]) + json.dumps(status, separators=(",", ":")).encode())
        with contextlib.suppress(TimeoutError, ConnectionError):
            async with asyncio.timeout(_CLOSE_TIMEOUT_SECONDS):
                await ws.close()
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reader
    return ws


class _Session:
    """The client's side of one exec: stdin until closed, resize frames ignored."""

    def __init__(self, ws: web.WebSocketResponse, *, v5: bool, stdin: bool) -> None:
        self.ws = ws
        self.v5 = v5
        self.stdin_open = stdin
        self.stdin = bytearray()
        self.stdin_done = asyncio.Event()
        self.resized = asyncio.Event()
        if not stdin:
            self.stdin_done.set()
        self.outcome = Outcome()

    async def read_loop(self) -> None:
        try:
            async for msg in self.ws:
                if msg.type != aiohttp.WSMsgType.BINARY or not msg.data:
                    continue
                data: bytes = msg.data
                stream, payload = data[0], data[1:]
                if stream == STDIN and self.stdin_open:
                    self.stdin += payload
                elif stream == CLOSE and self.v5 and payload[:1] == bytes([STDIN]):
                    self.stdin_done.set()
                elif stream == RESIZE:
                    self.resized.set()
        finally:
            self.stdin_done.set()

    async def read_stdin(self) -> bytes:
        await self.stdin_done.wait()
        return bytes(self.stdin)


async def _run(
    session: _Session,
    store: ClusterStore,
    pod: Mapping[str, Any],
    spec: Mapping[str, Any],
    command: list[str],
    locator: EngineLocator | None,
    *,
    tty: bool,
) -> dict[str, Any]:
    name = str(spec.get("name", ""))
    if not _running(pod, name):
        return _internal_error(f'unable to upgrade connection: container not found ("{name}")')
    meta = pod.get("metadata") or {}
    namespace, pod_name = str(meta.get("namespace", "")), str(meta.get("name", ""))

    async def fetch(port: int, path: str) -> tuple[int, bytes] | None:
        base = locator.engine_url(namespace, pod_name, port) if locator is not None else None
        if base is None:
            return None
        try:
            async with (
                aiohttp.ClientSession(timeout=_FETCH_TIMEOUT) as http,
                http.get(base + path) as response,
            ):
                return response.status, await response.read()
        except (aiohttp.ClientError, OSError):
            return None

    container = Container(
        hostname=pod_hostname(pod),
        pod_ip=str((pod.get("status") or {}).get("podIP", "")),
        env=container_env(store, pod, spec),
        gpus=container_gpus(store, pod, spec),
        read_stdin=session.read_stdin,
        fetch=fetch,
    )
    try:
        outcome = await run_command(command, container)
    except StartError as exc:
        exec_id = secrets.token_hex(32)
        return _internal_error(
            "Internal error occurred: error executing command in container: failed to exec in "
            f'container: failed to start exec "{exec_id}": OCI runtime exec failed: exec failed: '
            f"unable to start container process: {exc}: unknown"
        )
    session.outcome = outcome
    if outcome.code == 0:
        return {"metadata": {}, "status": "Success"}
    # The runtime's error, wrapped once by the kubelet's stream server and once by the API
    # server's stream translator, as a real cluster relays it.
    runtime = f"error executing command [{' '.join(command)}], exit code {outcome.code}"
    return {
        "metadata": {},
        "status": "Failure",
        "message": "command terminated with non-zero exit code: "
        f"command terminated with non-zero exit code: {runtime}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(outcome.code)}]},
    }


def _internal_error(message: str) -> dict[str, Any]:
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"Internal error occurred: {message}",
        "reason": "InternalError",
        "details": {"causes": [{"message": message}]},
        "code": 500,
    }


async def _send_output(
    ws: web.WebSocketResponse, outcome: Outcome, *, stdout: bool, stderr: bool, tty: bool
) -> None:
    out, err = bytes(outcome.stdout), bytes(outcome.stderr)
    if tty:
        out = (out + err).replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        err = b""
    for stream, data, wanted in ((STDOUT, out, stdout), (STDERR, err, stderr)):
        if not wanted:
            continue
        for start in range(0, len(data), _FRAME_BYTES):
            await ws.send_bytes(bytes([stream]) + data[start : start + _FRAME_BYTES])


# ------------------------------------------------------------------------- what the container has


def pod_hostname(pod: Mapping[str, Any]) -> str:
    """The pod's hostname as the kubelet sets it: ``spec.hostname``, else the pod name cut to
    63 characters without a trailing ``-`` or ``.``."""
    spec = pod.get("spec") or {}
    if spec.get("hostname"):
        return str(spec["hostname"])
    return str((pod.get("metadata") or {}).get("name", ""))[:63].rstrip("-.")


_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def _env_name(name: str) -> str:
    return name.upper().replace("-", "_")


def _service_env(service: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The Docker-link variables the kubelet gives a container for one Service."""
    spec = service.get("spec") or {}
    ip = str(spec.get("clusterIP") or "")
    ports = list(spec.get("ports") or [])
    if not ip or ip == "None" or not ports:
        return []
    prefix = _env_name(str((service.get("metadata") or {}).get("name", "")))
    out = [(f"{prefix}_SERVICE_HOST", ip), (f"{prefix}_SERVICE_PORT", str(ports[0].get("port")))]
    for port in ports:
        if port.get("name"):
            out.append((f"{prefix}_SERVICE_PORT_{_env_name(port['name'])}", str(port.get("port"))))
    for index, port in enumerate(ports):
        proto = str(port.get("protocol") or "TCP")
        address = f"{proto.lower()}://{ip}:{port.get('port')}"
        if index == 0:
            out.append((f"{prefix}_PORT", address))
        base = f"{prefix}_PORT_{port.get('port')}_{proto.upper()}"
        out += [
            (base, address),
            (f"{base}_PROTO", proto.lower()),
            (f"{base}_PORT", str(port.get("port"))),
            (f"{base}_ADDR", ip),
        ]
    return out


def _field_value(pod: Mapping[str, Any], path: str) -> str | None:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName", "default"),
        "status.hostIP": status.get("hostIP"),
        "status.podIP": status.get("podIP"),
    }
    if path in simple:
        value = simple[path]
        return None if value is None else str(value)
    match = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    return None


def _ref_value(
    store: ClusterStore, namespace: str, ref: Mapping[str, Any], kind: str
) -> dict[str, str] | None:
    try:
        obj = store.get_object(store.resource_type("v1", kind), namespace, str(ref.get("name")))
    except ApiError:
        return None
    if kind == "Secret":
        return {
            k: base64.b64decode(str(v)).decode(errors="replace")
            for k, v in (obj.get("data") or {}).items()
        } | {k: str(v) for k, v in (obj.get("stringData") or {}).items()}
    return {k: str(v) for k, v in (obj.get("data") or {}).items()}


def container_env(
    store: ClusterStore, pod: Mapping[str, Any], container: Mapping[str, Any]
) -> list[tuple[str, str]]:
    """The environment a process exec'd in ``container`` sees (see the module docstring)."""
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace", "default"))
    services_rt = store.resource_type("v1", "Service")
    service_env: list[tuple[str, str]] = []
    if (pod.get("spec") or {}).get("enableServiceLinks", True) is not False:
        for svc in store.list_objects(services_rt, namespace=namespace).items:
            if (svc.get("metadata") or {}).get("name") != "kubernetes":
                service_env += _service_env(svc)
    master = {
        "metadata": {"name": "kubernetes"},
        "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443}]},
    }
    with contextlib.suppress(ApiError):
        master = store.get_object(services_rt, "default", "kubernetes")
    service_env += _service_env(master)

    user: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            if source.get(key):
                values = _ref_value(store, namespace, source[key], kind) or {}
                prefix = str(source.get("prefix") or "")
                user.update({prefix + k: v for k, v in values.items()})
    expandable = {**dict(service_env), **user}
    for var in container.get("env") or []:
        name = str(var.get("name", ""))
        value: str | None
        if "valueFrom" not in var:
            value = _REF.sub(
                lambda m: "$" if m.group(0) == "$$" else expandable.get(m.group(1), m.group(0)),
                str(var.get("value", "")),
            )
        else:
            source = var["valueFrom"] or {}
            value = None
            if source.get("fieldRef"):
                value = _field_value(pod, str(source["fieldRef"].get("fieldPath", "")))
            for kind, key in (("ConfigMap", "configMapKeyRef"), ("Secret", "secretKeyRef")):
                if source.get(key):
                    values = _ref_value(store, namespace, source[key], kind) or {}
                    value = values.get(str(source[key].get("key")))
        if value is not None:
            user[name] = value
            expandable[name] = value
    env = [("PATH", user.pop("PATH", DEFAULT_PATH)), ("HOSTNAME", pod_hostname(pod))]
    env += list(user.items())
    env += [(k, v) for k, v in service_env if k not in user]
    if "HOME" not in user:
        env.append(("HOME", "/root"))
    return env


def container_gpus(
    store: ClusterStore, pod: Mapping[str, Any], container: Mapping[str, Any]
) -> list[Gpu]:
    """The NVIDIA GPUs allocated to the claims ``container`` references, in allocation order."""
    namespace = str((pod.get("metadata") or {}).get("namespace", "default"))
    wanted = {
        str(c.get("name")): c.get("request")
        for c in ((container.get("resources") or {}).get("claims") or [])
    }
    claim_names = {
        str(s.get("name")): str(s.get("resourceClaimName"))
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        if s.get("resourceClaimName")
    }
    claim_rt = store.resource_type("resource.k8s.io/v1", "ResourceClaim")
    slices = store.list_objects(store.resource_type("resource.k8s.io/v1", "ResourceSlice")).items
    gpus: list[Gpu] = []
    for pod_claim, request in wanted.items():
        if pod_claim not in claim_names:
            continue
        try:
            claim = store.get_object(claim_rt, namespace, claim_names[pod_claim])
        except ApiError:
            continue
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            if result.get("driver") != NVIDIA_GPU_DRIVER:
                continue
            if request and result.get("request") != request:
                continue
            device = _published(slices, result)
            attributes = (device or {}).get("attributes") or {}
            gpus.append(
                Gpu(
                    product=str((attributes.get("productName") or {}).get("string", "NVIDIA GPU")),
                    uuid=str((attributes.get("uuid") or {}).get("string", "")),
                )
            )
    return gpus


def _published(slices: list[dict[str, Any]], result: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for item in slices:
        spec = item.get("spec") or {}
        if spec.get("driver") != result.get("driver"):
            continue
        if (spec.get("pool") or {}).get("name") != result.get("pool"):
            continue
        for device in spec.get("devices") or []:
            if device.get("name") == result.get("device"):
                return dict(device)
    return None
