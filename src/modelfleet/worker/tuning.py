"""Timing knobs of cluster health and of the Fleet's NotReady grace, read from the environment:

- ``MODELFLEET_CLUSTER_PROBE_SECONDS``: how often each InferenceCluster workflow probes its
  cluster (default 15);
- ``MODELFLEET_CLUSTER_FAILURE_THRESHOLD``: failed probes in a row before a cluster is reported
  NotReady (default 3);
- ``MODELFLEET_CLUSTER_SWEEP_SECONDS``: how often a Ready cluster sweeps the objects of replicas
  the Fleet no longer holds there, besides on its return from NotReady (default 600);
- ``MODELFLEET_NOT_READY_GRACE_SECONDS``: how long a cluster may stay NotReady before the Fleet
  re-places its replicas on other clusters (default 120, counted from its first failed probe);
- ``MODELFLEET_ROLLOUT_SLOTS``: how many deployments roll out at once, fleet-wide (default 20;
  the rest wait their turn in the ``Waiting`` phase, see ``admission``);
- ``MODELFLEET_ROLLOUT_SLOT_LEASE_SECONDS``: how long a deployment may hold its slot before it
  is taken back for the next in line (default 600).

They are read where the workflows start: the probe and sweep knobs when a cluster is first
applied (its workflow carries them from then on, across continue-as-new), the grace when the
Fleet workflow is first started (by the first worker, ``apply`` or ``modelfleet dev``; it
carries its limits across continue-as-new), the rollout slots when the RolloutSlots workflow
is first started or when a worker (or ``apply``) runs with either variable set (it signals the
running one). Unset, the workflow inputs' own defaults stand.
Tests pass a :class:`Tuning` explicitly instead of changing the environment.

May touch: environment variables (read only).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import Field

from modelfleet.admission.state import SlotSettings, SlotsState
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.meta import Model
from modelfleet.cluster.state import ClusterInput
from modelfleet.contracts.workflow_inputs import FleetInput, FleetLimits
from modelfleet.worker.settings import SettingsError

ENV_PROBE_SECONDS = "MODELFLEET_CLUSTER_PROBE_SECONDS"
ENV_FAILURE_THRESHOLD = "MODELFLEET_CLUSTER_FAILURE_THRESHOLD"
ENV_NOT_READY_GRACE = "MODELFLEET_NOT_READY_GRACE_SECONDS"
ENV_SWEEP_SECONDS = "MODELFLEET_CLUSTER_SWEEP_SECONDS"
ENV_ROLLOUT_SLOTS = "MODELFLEET_ROLLOUT_SLOTS"
ENV_SLOT_LEASE = "MODELFLEET_ROLLOUT_SLOT_LEASE_SECONDS"


class Tuning(Model):
    """None: the default of the workflow input the knob ends up in."""

    probe_interval_seconds: int | None = Field(default=None, ge=1)
    failure_threshold: int | None = Field(default=None, ge=1)
    sweep_resync_seconds: int | None = Field(default=None, ge=1)
    not_ready_grace_seconds: int | None = Field(default=None, ge=1)
    rollout_slots: int | None = Field(default=None, ge=1)
    rollout_slot_lease_seconds: int | None = Field(default=None, ge=1)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Tuning:
        """The knobs set in ``env`` (default: this process's environment); a value that is not a
        whole number of at least 1 raises :class:`SettingsError` naming the variable."""
        env = os.environ if env is None else env
        values: dict[str, int] = {}
        for field, var in (
            ("probe_interval_seconds", ENV_PROBE_SECONDS),
            ("failure_threshold", ENV_FAILURE_THRESHOLD),
            ("sweep_resync_seconds", ENV_SWEEP_SECONDS),
            ("not_ready_grace_seconds", ENV_NOT_READY_GRACE),
            ("rollout_slots", ENV_ROLLOUT_SLOTS),
            ("rollout_slot_lease_seconds", ENV_SLOT_LEASE),
        ):
            raw = env.get(var, "").strip()
            if not raw:
                continue
            if not raw.isdigit() or int(raw) < 1:
                raise SettingsError(f"{var}={raw!r}: must be a whole number of at least 1")
            values[field] = int(raw)
        return cls.model_validate(values)

    def cluster_input(self, spec: InferenceCluster) -> ClusterInput:
        """The input a new InferenceCluster workflow starts with."""
        knobs = {
            "probe_interval_seconds": self.probe_interval_seconds,
            "failure_threshold": self.failure_threshold,
            "sweep_resync_seconds": self.sweep_resync_seconds,
        }
        return ClusterInput.of(spec).model_copy(
            update={k: v for k, v in knobs.items() if v is not None}
        )

    def fleet_input(self) -> FleetInput:
        """The input a new Fleet workflow starts with."""
        if self.not_ready_grace_seconds is None:
            return FleetInput()
        return FleetInput(limits=FleetLimits(not_ready_grace_seconds=self.not_ready_grace_seconds))

    def slot_settings(self) -> SlotSettings | None:
        """The rollout bound set here (None: neither knob is set, the workflow's stands)."""
        if self.rollout_slots is None and self.rollout_slot_lease_seconds is None:
            return None
        knobs = {
            "slots": self.rollout_slots,
            "lease_seconds": self.rollout_slot_lease_seconds,
        }
        return SlotSettings.model_validate({k: v for k, v in knobs.items() if v is not None})

    def slots_input(self) -> SlotsState:
        """The input a new RolloutSlots workflow starts with."""
        return SlotsState(settings=self.slot_settings() or SlotSettings())
