"""What a simulated engine serves, read from its pod the way vLLM reads its command line.

Development/test emulator only. Pure: reads JSON-like pod dicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["engine_tokens", "flag_value", "served_model_name", "serving_ports"]


def flag_value(tokens: Sequence[str], flag: str) -> str | None:
    """``--flag=value`` or ``--flag value``; the last wins, as with argparse."""
    value: str | None = None
    prefix = f"{flag}="
    for i, token in enumerate(tokens):
        if token.startswith(prefix):
            value = token[len(prefix) :]
        elif token == flag and i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            value = tokens[i + 1]
    return value


def engine_tokens(container: Mapping[str, Any]) -> list[str]:
    return [str(t) for t in (container.get("command") or []) + (container.get("args") or [])]


def _positional_model(tokens: Sequence[str]) -> str | None:
    # ``vllm serve MODEL ...``: the model is the first positional after "serve".
    for i, token in enumerate(tokens):
        if token == "serve" and i + 1 < len(tokens) and not tokens[i + 1].startswith("-"):
            return tokens[i + 1]
    return None


def served_model_name(container: Mapping[str, Any]) -> str | None:
    """The name ``/v1/models`` lists: ``--served-model-name`` (its first value), else the model
    (``--model``, SGLang's ``--model-path``, or the positional of ``vllm serve``)."""
    tokens = engine_tokens(container)
    served = flag_value(tokens, "--served-model-name")
    if served:
        return served.split(",")[0].strip() or None
    return (
        flag_value(tokens, "--model")
        or flag_value(tokens, "--model-path")
        or _positional_model(tokens)
    )


def _serving_containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Containers that run alongside the pod's life: its containers, and native sidecars (init
    containers with ``restartPolicy: Always``, as the P/D sidecar is rendered)."""
    spec = pod.get("spec") or {}
    sidecars = [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    return [*(spec.get("containers") or []), *sidecars]


def serving_ports(pod: Mapping[str, Any]) -> list[int]:
    """Container ports that answer HTTP: those a container's HTTP readiness probe checks (the
    engine's port, and the P/D sidecar's). Ports without an HTTP probe (the endpoint picker's
    gRPC, NIXL side channels) are not OpenAI servers."""
    ports: list[int] = []
    for container in _serving_containers(pod):
        probe = (container.get("readinessProbe") or {}).get("httpGet") or {}
        port = probe.get("port")
        named = {p.get("name"): p.get("containerPort") for p in container.get("ports") or []}
        if isinstance(port, str):
            port = named.get(port)
        if isinstance(port, int) and port not in ports:
            ports.append(port)
    return ports


def pod_model(pod: Mapping[str, Any]) -> str | None:
    """The served model name of the first container that names one."""
    for container in (pod.get("spec") or {}).get("containers") or []:
        name = served_model_name(container)
        if name:
            return name
    return None
