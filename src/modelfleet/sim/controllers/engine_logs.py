"""What a simulated container prints: the start-up lines of an inference engine (vLLM, SGLang,
TensorRT-LLM, the endpoint picker) or of any other image, and the last lines of a crash. The
kubelet writes them to the cluster's :class:`~modelfleet.sim.apiserver.pod_logs.PodLogBook`;
serving engines append their request lines there through the same book.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure: a container
in, lines out; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["crash_lines", "rejected_args_lines", "startup_lines"]


def _arg(container: Mapping[str, Any], flag: str) -> str | None:
    args = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def _port(container: Mapping[str, Any], default: int) -> int:
    ports = container.get("ports") or []
    if ports and isinstance(ports[0], Mapping):
        return int(ports[0].get("containerPort") or default)
    return default


def startup_lines(container: Mapping[str, Any], pod_ip: str) -> list[str]:
    """The lines ``container`` prints from its start until it is Ready."""
    image = str(container.get("image", ""))
    name = str(container.get("name", ""))
    lowered = image.lower()
    if "vllm" in lowered:
        model = _arg(container, "--model") or _first_positional(container) or "model"
        port = _port(container, 8000)
        return [
            f"INFO vLLM API server version (simulated) image={image}",
            f"INFO non-default args: model={model!r}",
            f"INFO Resolved architecture for {model}",
            "INFO Loading model weights took 0.00 GiB (simulated)",
            "INFO Capturing CUDA graphs (simulated): done",
            f"INFO Starting vLLM API server on http://{pod_ip}:{port}",
            "INFO Application startup complete.",
        ]
    if "sglang" in lowered:
        model = _arg(container, "--model-path") or "model"
        port = _port(container, 30000)
        return [
            f"[sglang] server_args: model_path={model} (simulated, image={image})",
            "[sglang] Load weight end (simulated).",
            f"[sglang] Uvicorn running on http://{pod_ip}:{port}",
            "[sglang] The server is fired up and ready to roll!",
        ]
    if "tensorrt" in lowered or "trtllm" in lowered:
        port = _port(container, 8000)
        return [
            f"[TensorRT-LLM] engine loaded (simulated, image={image})",
            f"[TensorRT-LLM] serving on http://{pod_ip}:{port}",
        ]
    if "endpoint-picker" in lowered or "router" in lowered or "scheduler" in lowered:
        return [
            f"endpoint picker starting (simulated, image={image})",
            "loaded plugins and scheduling profiles",
            f"gRPC ext-proc server listening on {pod_ip}:{_port(container, 9002)}",
        ]
    return [f"{name}: started (simulated, image={image}) on {pod_ip}"]


def _first_positional(container: Mapping[str, Any]) -> str | None:
    args = [str(a) for a in container.get("args") or []]
    if len(args) >= 2 and args[0] == "serve":
        return args[1]
    return None


def crash_lines(container: Mapping[str, Any], restarts: int) -> list[str]:
    """The last lines before a (simulated) crash."""
    return [
        f"ERROR {container.get('name', '')}: engine core died unexpectedly "
        f"(simulated crash, restart {restarts})",
        "Traceback elided: simulated failure",
    ]


def rejected_args_lines(container: Mapping[str, Any], rejected: list[str]) -> list[str]:
    """What an engine prints when argparse rejects its command line (then it exits with 2)."""
    image = str(container.get("image", "")).lower()
    if "sglang" in image:
        prog, usage = "launch_server.py", "usage: launch_server.py [-h] --model-path MODEL_PATH"
    elif "vllm" in image:
        prog, usage = "vllm serve", "usage: vllm serve [model_tag] [options]"
    else:
        prog = str(container.get("name", "") or "server")
        usage = f"usage: {prog} [options]"
    return [usage, f"{prog}: error: unrecognized arguments: {' '.join(rejected)}"]
