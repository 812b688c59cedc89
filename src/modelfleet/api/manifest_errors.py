"""The error taxonomy of manifest handling: one ``FieldError`` per broken rule, located by a field
path (``spec.engines[0].members[1].worker.nodes``) and, once a document is known, by file,
document index and line. Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Path = tuple[str | int, ...]


def format_path(path: Path) -> str:
    """``("spec", "engines", 0, "name")`` -> ``spec.engines[0].name``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out or "<document>"


@dataclass(frozen=True)
class FieldError:
    """One broken rule inside a document."""

    path: Path
    reason: str

    @property
    def field(self) -> str:
        return format_path(self.path)

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}"


@dataclass(frozen=True)
class ManifestError:
    """A FieldError located in a source: file, document index (0-based), line (1-based)."""

    source: str
    document: int
    line: int | None
    field: str
    reason: str
    subject: str = ""

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line else self.source
        subject = f" {self.subject}" if self.subject else ""
        return f"{where}: document {self.document}{subject}: {self.field}: {self.reason}"


class ModelfleetError(Exception):
    """Base of every error modelfleet raises on purpose."""


class InvalidResourceError(ModelfleetError):
    """A single resource broke one or more rules."""

    def __init__(self, subject: str, errors: Sequence[FieldError]) -> None:
        self.subject = subject
        self.errors = list(errors)
        detail = "; ".join(str(e) for e in self.errors)
        super().__init__(f"{subject} is invalid: {detail}")


class InvalidManifestsError(ModelfleetError):
    """One or more documents in the given sources are invalid; nothing was applied."""

    def __init__(self, errors: Sequence[ManifestError]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(str(e) for e in self.errors))
