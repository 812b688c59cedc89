"""Input and status of the AcceptedResource workflow, which holds a document modelfleet accepts
but does not act upon (a ServingStack, a per-cloud cluster kind), so ``get`` lists it
and its reason is visible. Layer rule: pure pydantic, as every contract (see ``wire``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from modelfleet.contracts.wire import WireModel


class AcceptedInput(WireModel):
    # The validated manifest as the user wrote it (camelCase); names Secrets, never holds one.
    document: dict[str, Any]
    # When the resource was created: the first run's start, carried across continue-as-new
    # (None in payloads from before it was carried: then this run's start stands in).
    created: datetime | None = None


class AcceptedStatus(WireModel):
    kind: str
    namespace: str
    name: str
    # Why it is not acted upon, in the user's words (``NotActedUpon: ...``).
    reason: str
    deleting: bool = False
    document: dict[str, Any] = {}
    # When the document was first accepted (kept across the workflow's continue-as-new).
    created: datetime | None = None
