"""Best-effort reading of engine command-line flags (vLLM, SGLang) from a user's container.

The renderer passes args through verbatim; it only *reads* a few of them to configure what sits
around the engine (the P/D sidecar's upstream port, the endpoint picker's KV block size). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from modelfleet.api.deployments import Container


def flag_value(tokens: Sequence[str], flag: str) -> str | None:
    """The value of ``flag`` given as ``--flag=value`` or ``--flag value``; the last one wins, as
    with argparse. None when the flag is absent or has no value."""
    value: str | None = None
    prefix = f"{flag}="
    for i, token in enumerate(tokens):
        if token.startswith(prefix):
            value = token[len(prefix) :]
        elif token == flag and i + 1 < len(tokens):
            value = tokens[i + 1]
    return value


def container_tokens(container: Container) -> list[str]:
    """Command then args: an engine started as ``command: [python, -m, sglang...]`` carries its
    flags in ``command``, a vLLM image with its own entrypoint carries them in ``args``."""
    return [*(container.command or []), *(container.args or [])]


def int_flag(
    container: Container, flags: Sequence[str], default: int, *, low: int, high: int
) -> int:
    """The first of ``flags`` present in the container, as an int in [low, high]; ``default``
    when none is present or the value is not such an int (a typo must not break the render)."""
    tokens = container_tokens(container)
    for flag in flags:
        raw = flag_value(tokens, flag)
        if raw is None:
            continue
        try:
            number = int(raw.strip())
        except ValueError:
            return default
        return number if low <= number <= high else default
    return default
