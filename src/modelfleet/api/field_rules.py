"""Field checks every kind's rules share: duplicate keys in a list, label keys and values
(reserved prefixes allowed or not), annotation keys and sizes. Each yields a ``FieldError`` with the
exact field path. Pure: it may touch the API's models and the standard library; no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

from modelfleet.api.manifest_errors import FieldError, Path
from modelfleet.api.meta import (
    RESERVED_LABEL_PREFIXES,
    label_key_problem,
    label_value_problem,
)

__all__ = ["annotation_errors", "duplicate_errors", "label_errors"]


def duplicate_errors(path: Path, keys: Sequence[object], what: str) -> Iterator[FieldError]:
    counts = Counter(keys)
    for i, key in enumerate(keys):
        if counts[key] > 1 and keys.index(key) != i:
            yield FieldError((*path, i), f"duplicate {what} {key!r}: {what}s must be unique")


def label_errors(path: Path, labels: dict[str, str], *, reserved_ok: bool) -> Iterator[FieldError]:
    for key, value in labels.items():
        problem = label_key_problem(key)
        if problem:
            yield FieldError((*path, key), f"invalid label key {key!r}: {problem}")
        elif not reserved_ok and key.startswith(RESERVED_LABEL_PREFIXES):
            yield FieldError(
                (*path, key),
                f"label key {key!r} uses a reserved prefix "
                f"({', '.join(RESERVED_LABEL_PREFIXES)} are set by modelfleet)",
            )
        value_problem = label_value_problem(value)
        if value_problem:
            yield FieldError((*path, key), f"invalid label value {value!r}: {value_problem}")


def annotation_errors(path: Path, annotations: dict[str, str]) -> Iterator[FieldError]:
    for key, value in annotations.items():
        problem = label_key_problem(key)
        if problem:
            yield FieldError((*path, key), f"invalid annotation key {key!r}: {problem}")
        if len(value) > 8192:
            yield FieldError(
                (*path, key), f"annotation value must be at most 8192 characters ({len(value)})"
            )
