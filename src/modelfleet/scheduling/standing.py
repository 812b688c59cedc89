"""How a replica serves as its deployment knows it, the order scale-down removes replicas in.

Its own module, importing nothing, so the placement request contract (read inside workflow
sandboxes) can name it without loading the scheduler.

Layer rule: pure (no I/O, no Temporal, no SDKs).
"""

from __future__ import annotations

from enum import StrEnum


class Standing(StrEnum):
    """How a replica serves, as its deployment knows it: what scale-down removes first.
    A replica the request does not rank serves its current template."""

    FAILED = "Failed"
    NOT_READY = "NotReady"
    OLD_TEMPLATE = "OldTemplate"
    SERVING = "Serving"


# Lower goes first: a failed replica costs nothing to remove, a serving one of the template the
# deployment runs costs capacity.
REMOVE_FIRST = {
    Standing.FAILED: 0,
    Standing.NOT_READY: 1,
    Standing.OLD_TEMPLATE: 2,
    Standing.SERVING: 3,
}
