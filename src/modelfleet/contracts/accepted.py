"""The status of the AcceptedResource workflow, which holds a document modelfleet accepts but does
not act upon (a ServingStack, a per-cloud cluster kind), so ``get`` lists it and its reason is
visible (its input and state: ``accepted.state``). Layer rule: pure pydantic, as every contract
(see ``wire``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from modelfleet.contracts.wire import WireModel


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
