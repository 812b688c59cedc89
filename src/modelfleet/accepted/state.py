"""The AcceptedResource workflow's whole state, carried whole across continue-as-new, and its
input (settings beside the state; this kind has none yet).

Pure: pydantic models only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from modelfleet.contracts.wire import WireModel


class AcceptedDocument(WireModel):
    """A document to hold, as ``apply`` gives it."""

    # The validated manifest as the user wrote it (camelCase); names Secrets, never holds one.
    document: dict[str, Any]


class AcceptedState(WireModel):
    """Everything the workflow knows: one document (bounded by the manifest's size)."""

    document: dict[str, Any]
    # When the resource was created: the first run's start (None until that run sets it).
    created: datetime | None = None
    deleting: bool = False


class AcceptedInput(WireModel):
    state: AcceptedState

    @classmethod
    def of(cls, document: dict[str, Any]) -> AcceptedInput:
        """A first run's input."""
        return cls(state=AcceptedState(document=document))
