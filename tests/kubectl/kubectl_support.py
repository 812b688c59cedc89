"""Helpers for the kubectl suites, imported by module name: the real ``kubectl`` on PATH as a
subprocess with its own timeout, and the quickstart fleet on its own loop in a thread. Without
kubectl a suite fails (never skips)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.loading import load_paths
from modelfleet.sim.loop_thread import LoopThread
from modelfleet.sim.simulated_fleet import SimulatedFleet

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
CLUSTER = "l4-dev"
KUBECTL_TIMEOUT = 60


def kubectl_binary() -> str:
    found = shutil.which("kubectl")
    if found is None:
        pytest.fail(
            "kubectl is not on PATH: this suite drives the real kubectl against the simulated "
            "fleet; install kubectl (v1.32 or newer) and re-run",
            pytrace=False,
        )
    return found


def quickstart_fleet(state_dir: Path) -> LoopThread[SimulatedFleet]:
    """The quickstart's classes and clusters, simulated (enter it to run it)."""
    kubectl_binary()
    loaded = load_paths([str(QUICKSTART / "classes.yaml"), str(QUICKSTART / "clusters.yaml")])
    loaded.raise_for_errors()
    classes = [r for r in loaded.resources if isinstance(r, InferenceClass)]
    clusters = [r for r in loaded.resources if isinstance(r, InferenceCluster)]
    return SimulatedFleet.start_in_thread(
        classes, clusters, state_dir=state_dir, startup_seconds=0.2
    )


class Kubectl:
    def __init__(self, binary: str, kubeconfig: Path, home: Path) -> None:
        self.binary = binary
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(home),  # kubectl's discovery cache stays inside the test
            "KUBECONFIG": str(kubeconfig),
        }

    def run(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [self.binary, *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=KUBECTL_TIMEOUT,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {result.returncode}:\n"
                f"{result.stdout}\n{result.stderr}"
            )
        return result

    def out(self, *args: str, stdin: str | None = None) -> str:
        return self.run(*args, stdin=stdin).stdout

    def refused(self, *args: str, stdin: str | None = None) -> str:
        """kubectl's error output for a call that must fail."""
        result = self.run(*args, stdin=stdin, check=False)
        assert result.returncode != 0, f"kubectl {' '.join(args)} succeeded:\n{result.stdout}"
        return result.stderr
