"""Which Worker Versioning behaviour a workflow type declares, and whether it declares one.

The server refuses a workflow task that names a behaviour from a worker that is not versioned,
so a behaviour is declared only in a process that runs versioned workers: one started with
``MODELFLEET_WORKER_BUILD_ID`` set (``worker.versioning``). Read once, when this module is first
imported, before any workflow class is defined; every workflow module imports it through the
sandbox's pass-through, so a workflow's definition and its sandboxed copy agree.

May touch: one environment variable, read once at import.
"""

from __future__ import annotations

import os

from temporalio.common import VersioningBehavior

ENV_BUILD_ID = "MODELFLEET_WORKER_BUILD_ID"

VERSIONED = bool(os.environ.get(ENV_BUILD_ID, "").strip())


def declared(behavior: VersioningBehavior) -> VersioningBehavior:
    """``behavior`` in a versioned worker process; unspecified in any other."""
    return behavior if VERSIONED else VersioningBehavior.UNSPECIFIED
