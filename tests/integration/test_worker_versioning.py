"""Worker Versioning on the real dev server (docs/operations.md, "Upgrading workflows"): a
ModelReplica in flight on version v1 finishes its saga on v1 after v2 became current, while a
replica started after the switch runs on v2 alone (``versioning_scenario.py``, in a process of
its own started as a versioned worker is); and a worker without a build ID is unversioned and
declares nothing, so the server accepts its tasks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.common import VersioningBehavior
from temporalio.workflow import _Definition

from modelfleet.contracts.versioning import ENV_BUILD_ID, VERSIONED
from modelfleet.replica.workflow import ReplicaWorkflow
from modelfleet.worker.settings import SettingsError
from modelfleet.worker.versioning import ENV_DEPLOYMENT, deployment_config

SCENARIO = Path(__file__).resolve().parent / "versioning_scenario.py"


@pytest.mark.integration
def test_a_pinned_replica_finishes_on_its_version_while_new_ones_start_on_the_next() -> None:
    env = {**os.environ, ENV_BUILD_ID: "scenario"}
    # Bounded: the scenario's own waits are 60 s each; a hang fails here with its output.
    done = subprocess.run(
        [sys.executable, str(SCENARIO)], env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-8000:]
    assert done.stdout.strip().splitlines()[-1] == "OK"


def test_an_unversioned_process_declares_no_behaviour() -> None:
    # The server refuses a task naming a behaviour from an unversioned worker.
    assert not VERSIONED
    defn = _Definition.must_from_class(ReplicaWorkflow)
    assert not defn.versioning_behavior or (
        defn.versioning_behavior == VersioningBehavior.UNSPECIFIED
    )


def test_a_worker_is_unversioned_unless_a_build_id_is_set() -> None:
    assert deployment_config({}) is None
    config = deployment_config({ENV_BUILD_ID: "0.2.0-rc1"})
    assert config is not None
    assert (config.version.deployment_name, config.version.build_id) == ("modelfleet", "0.2.0-rc1")
    assert config.use_worker_versioning


def test_a_malformed_build_id_is_refused_naming_the_variable() -> None:
    with pytest.raises(SettingsError, match=ENV_BUILD_ID):
        deployment_config({ENV_BUILD_ID: "0.2.0 rc"})
    with pytest.raises(SettingsError, match=ENV_DEPLOYMENT):
        deployment_config({ENV_BUILD_ID: "v1", ENV_DEPLOYMENT: "model.fleet"})
