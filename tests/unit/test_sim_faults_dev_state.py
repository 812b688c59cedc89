"""`modelfleet sim faults` reaches the fleet `modelfleet dev` runs: dev writes the fleet's state
file under its state directory (``.modelfleet/dev/sim/sim.json``) with the same writer as `sim
up`, and `sim faults` finds it without ``--state-dir``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.loading import load_paths
from modelfleet.cli.main import app
from modelfleet.cli.sim import STATE_FILE, write_state
from modelfleet.sim.loop_thread import LoopThread
from modelfleet.sim.simulated_fleet import SimulatedFleet

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
DEV_SIM_DIR = Path(".modelfleet/dev/sim")


@pytest.fixture
def dev_fleet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LoopThread[SimulatedFleet]]:
    loaded = load_paths([str(QUICKSTART / "classes.yaml"), str(QUICKSTART / "clusters.yaml")])
    loaded.raise_for_errors()
    classes = [r for r in loaded.resources if isinstance(r, InferenceClass)]
    clusters = [r for r in loaded.resources if isinstance(r, InferenceCluster)]
    monkeypatch.chdir(tmp_path)
    with SimulatedFleet.start_in_thread(
        classes, clusters, state_dir=tmp_path / DEV_SIM_DIR, startup_seconds=0
    ) as running:
        # What `modelfleet dev` does once its environment is up.
        write_state(running.target, tmp_path / DEV_SIM_DIR / STATE_FILE)
        yield running


def test_sim_faults_finds_dev_fleet_by_default(dev_fleet: LoopThread[SimulatedFleet]) -> None:
    state = json.loads((DEV_SIM_DIR / STATE_FILE).read_text())
    assert state["base_url"] == dev_fleet.target.base_url
    assert set(state["clusters"]) == set(dev_fleet.target.cluster_names)

    runner = CliRunner()
    result = runner.invoke(
        app, ["sim", "faults", "l4-dev", "--error-rate", "0.25", "--deny-access", "delete pods"]
    )
    assert result.exit_code == 0, result.output
    config = dev_fleet.call(dev_fleet.target.server.cluster, "l4-dev").faults.config
    assert config.error_rate_500 == 0.25
    assert config.deny_access == ["delete pods"]
    shown = runner.invoke(app, ["sim", "faults", "l4-dev"])
    assert json.loads(shown.output)["error_rate_500"] == 0.25


def test_sim_faults_without_any_fleet_names_both_places(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["sim", "faults", "l4-dev", "--dark"])
    assert result.exit_code == 1
    assert ".modelfleet/sim/sim.json" in result.output
    assert ".modelfleet/dev/sim/sim.json" in result.output
    assert "Traceback" not in result.output
