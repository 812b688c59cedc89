"""Validation of signal payloads, which (unlike Updates) cannot be rejected: a handler takes the
raw value, asks here whether it is usable, and logs the reason once when it is not. Pure and
deterministic, so workflows may call it.
"""

from __future__ import annotations

from collections.abc import Mapping


def scale_replicas(value: object, maximum: int) -> int | str:
    """The replica count a ``scale`` signal asks for, or why the payload is unusable.

    Accepted: an integer, a string of digits (``temporal workflow signal --input '"3"'``) or a
    mapping ``{"replicas": N}`` (the shape of the ``scale`` Update).
    """
    raw = value
    if isinstance(value, Mapping):
        if set(value) != {"replicas"}:
            return f"expected {{'replicas': N}}, got keys {sorted(map(str, value))}"
        raw = value["replicas"]
    if isinstance(raw, bool):
        return f"expected an integer replica count, got {raw!r}"
    if isinstance(raw, str) and raw.strip().isdigit():
        raw = int(raw.strip())
    if not isinstance(raw, int):
        return f"expected an integer replica count, got {type(raw).__name__} {raw!r:.40}"
    if not 0 <= raw <= maximum:
        return f"replicas must be between 0 and {maximum}, got {raw}"
    return raw
