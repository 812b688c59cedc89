"""Input and status of the AcceptedResource workflow, which holds a document modelfleet accepts
but does not act upon (a ServingStack, a per-cloud cluster kind), so ``get`` lists it
and its reason is visible. Layer rule: pure pydantic, as every contract (see ``wire``).
"""

from __future__ import annotations

from typing import Any

from modelfleet.contracts.wire import WireModel


class AcceptedInput(WireModel):
    # The validated manifest as the user wrote it (camelCase); names Secrets, never holds one.
    document: dict[str, Any]


class AcceptedStatus(WireModel):
    kind: str
    namespace: str
    name: str
    # Why it is not acted upon, in the user's words (``NotActedUpon: ...``).
    reason: str
    deleting: bool = False
    document: dict[str, Any] = {}
