"""Worker Versioning: which worker deployment version this process's workers run as.

Unset (the default), the workers are unversioned and every workflow runs on whichever worker
polls its task. With ``MODELFLEET_WORKER_BUILD_ID`` set, every worker of the process runs as
version ``<MODELFLEET_WORKER_DEPLOYMENT>.<build ID>`` (deployment ``modelfleet`` unless named)
and the server routes each workflow by the behaviour its type declares on its
``@workflow.defn`` (declared only in such a process: ``contracts.versioning``): a pinned
ModelReplica finishes its rollout saga (and its compensation) on the code that started it,
every long-lived entity moves to the current version at its next workflow task. A release
becomes current with ``temporal worker deployment set-current-version``; docs/operations.md
("Upgrading workflows") has the policy and the steps.

May touch: environment variables (read only).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import WorkerDeploymentConfig

from modelfleet.contracts.versioning import ENV_BUILD_ID
from modelfleet.worker.settings import SettingsError

ENV_DEPLOYMENT = "MODELFLEET_WORKER_DEPLOYMENT"
DEFAULT_DEPLOYMENT = "modelfleet"

# Plain identifiers. A release number is a natural build ID ("0.2.0"), but a "." in the
# deployment's name would make a version's string form (<deployment>.<build ID>) ambiguous.
_BUILD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,254}$")
_DEPLOYMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,254}$")


def deployment_config(env: Mapping[str, str] | None = None) -> WorkerDeploymentConfig | None:
    """The versioning of this process's workers, from ``env`` (default: the environment); None
    when no build ID is set. A malformed name raises :class:`SettingsError` naming the
    variable."""
    env = os.environ if env is None else env
    build_id = env.get(ENV_BUILD_ID, "").strip()
    if not build_id:
        return None
    deployment = env.get(ENV_DEPLOYMENT, "").strip() or DEFAULT_DEPLOYMENT
    if not _BUILD_ID.match(build_id):
        raise SettingsError(
            f"{ENV_BUILD_ID}={build_id!r}: letters, digits, '.', '-' and '_' only (at most 255), "
            "starting with a letter or digit"
        )
    if not _DEPLOYMENT.match(deployment):
        raise SettingsError(
            f"{ENV_DEPLOYMENT}={deployment!r}: letters, digits, '-' and '_' only (at most 255), "
            "starting with a letter or digit"
        )
    return WorkerDeploymentConfig(
        version=WorkerDeploymentVersion(deployment_name=deployment, build_id=build_id),
        use_worker_versioning=True,
        # Every workflow type declares its own; this covers one that forgot, as the safe choice
        # for a type that lives forever.
        default_versioning_behavior=VersioningBehavior.AUTO_UPGRADE,
    )
