"""The probe and grace knobs (``worker.tuning``): read from the environment, carried into the
workflow inputs they belong to, and unset they leave the inputs' defaults alone."""

from __future__ import annotations

import pytest

from modelfleet.admission.state import SlotSettings, SlotsState
from modelfleet.api.clusters import InferenceCluster
from modelfleet.cluster.state import ClusterInput
from modelfleet.contracts.workflow_inputs import FleetInput
from modelfleet.worker.settings import SettingsError
from modelfleet.worker.tuning import (
    ENV_FAILURE_THRESHOLD,
    ENV_NOT_READY_GRACE,
    ENV_PROBE_SECONDS,
    ENV_ROLLOUT_SLOTS,
    ENV_SLOT_LEASE,
    ENV_SWEEP_SECONDS,
    Tuning,
)

SPEC = InferenceCluster.model_validate(
    {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": "a"},
        "spec": {"cluster": {"source": "Existing"}, "nodePools": [{"name": "p", "className": "c"}]},
    }
)


def test_unset_knobs_keep_the_defaults() -> None:
    tuning = Tuning.from_env({})
    assert tuning.cluster_input(SPEC) == ClusterInput.of(SPEC)
    assert tuning.fleet_input() == FleetInput()


def test_knobs_from_the_environment_reach_the_inputs() -> None:
    env = {
        ENV_PROBE_SECONDS: "2",
        ENV_FAILURE_THRESHOLD: " 1 ",
        ENV_NOT_READY_GRACE: "20",
        ENV_SWEEP_SECONDS: "30",
    }
    tuning = Tuning.from_env(env)
    arg = tuning.cluster_input(SPEC)
    assert (arg.probe_interval_seconds, arg.failure_threshold) == (2, 1)
    assert arg.sweep_resync_seconds == 30
    assert arg.drain_timeout_seconds == ClusterInput.of(SPEC).drain_timeout_seconds
    assert tuning.fleet_input().limits.not_ready_grace_seconds == 20
    assert tuning.fleet_input().limits.max_replicas == FleetInput().limits.max_replicas


@pytest.mark.parametrize("var", [ENV_NOT_READY_GRACE, ENV_SWEEP_SECONDS])
@pytest.mark.parametrize("raw", ["0", "-3", "1.5", "soon"])
def test_a_bad_value_names_the_variable(var: str, raw: str) -> None:
    with pytest.raises(SettingsError, match=f"{var}='{raw}'"):
        Tuning.from_env({var: raw})


def test_the_rollout_bound_is_set_only_when_a_knob_is() -> None:
    unset = Tuning.from_env({})
    assert unset.slot_settings() is None
    assert unset.slots_input() == SlotsState()
    bound = Tuning.from_env({ENV_ROLLOUT_SLOTS: "5"})
    assert bound.slot_settings() == SlotSettings(slots=5)
    assert bound.slots_input().settings == SlotSettings(slots=5, lease_seconds=600)
    lease = Tuning.from_env({ENV_SLOT_LEASE: "30"})
    assert lease.slot_settings() == SlotSettings(lease_seconds=30)


def test_a_bad_rollout_bound_names_its_variable() -> None:
    with pytest.raises(SettingsError, match="MODELFLEET_ROLLOUT_SLOTS='0'"):
        Tuning.from_env({ENV_ROLLOUT_SLOTS: "0"})
