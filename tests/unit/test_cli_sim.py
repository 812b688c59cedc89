"""``modelfleet sim up`` as a real process (ready line, kubeconfigs the adapter can use, clean stop
on SIGTERM) and ``modelfleet sim faults`` against it. Every wait is bounded; none is a sleep."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from modelfleet.adapters.kube_client import KubeCluster, RetryableKubeError
from modelfleet.cli.main import app

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
READY_WITHIN = 30.0
STOP_WITHIN = 15.0


class SimProcess:
    """``modelfleet sim up`` in a subprocess, with its stdout read line by line on a thread."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from modelfleet.cli.main import run; run()",
                "sim",
                "up",
                "--fleet",
                str(QUICKSTART),
                "--state-dir",
                str(state_dir),
                "--startup-seconds",
                "0",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            # Wide enough that the table prints every path on one line.
            env={**os.environ, "COLUMNS": "200"},
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.output: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, text: str, timeout: float) -> str:
        """The first line containing ``text``; fails on EOF or after ``timeout`` seconds."""
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                pytest.fail(f"no {text!r} line within {timeout}s; output so far: {self.output}")
            if line is None:
                pytest.fail(f"sim up exited before {text!r}: {self.output}")
            self.output.append(line)
            if text in line:
                return line

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=STOP_WITHIN)

    def rest(self) -> str:
        """Everything printed after the lines already consumed, up to the process's exit."""
        self._reader.join(timeout=STOP_WITHIN)
        while (line := self.lines.get_nowait()) is not None:
            self.output.append(line)
        return "".join(self.output)


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[SimProcess]:
    process = SimProcess(tmp_path / "state")
    try:
        yield process
    finally:
        if process.proc.poll() is None:
            process.proc.kill()  # only reached when a test failed before stopping it
            process.proc.wait(timeout=STOP_WITHIN)


def test_sim_up_serves_kubeconfigs_and_stops_on_sigterm(sim: SimProcess) -> None:
    ready = sim.wait_for("modelfleet sim ready:", READY_WITHIN)
    assert "(3 clusters)" in ready
    state = json.loads((sim.state_dir / "sim.json").read_text())
    assert state["pid"] == sim.proc.pid
    assert ready.split("ready: ", 1)[1].split()[0] == state["base_url"]
    kubeconfig = sim.state_dir / "kubeconfigs" / "h100-east.yaml"
    assert state["clusters"]["h100-east"]["kubeconfig"] == str(kubeconfig.resolve())
    table = "".join(sim.output)
    assert "gpu-h100" in table
    assert str(kubeconfig) in table

    with KubeCluster(kubeconfig, request_timeout=5.0) as kube:
        nodes = kube.nodes()
        assert sorted(n.name for n in nodes if n.pool == "gpu-h100") == [
            "h100-east-gpu-h100-0",
            "h100-east-gpu-h100-1",
        ]
        assert len(kube.resource_slices()) == 2

        assert sim.stop() == 0
        with pytest.raises(RetryableKubeError):
            kube.server_version()
    assert sim.rest().rstrip().endswith("stopped")
    assert not (sim.state_dir / "sim.json").exists()


def test_sim_faults_patches_the_running_sim(sim: SimProcess) -> None:
    sim.wait_for("modelfleet sim ready:", READY_WITHIN)
    runner = CliRunner()
    state = ["--state-dir", str(sim.state_dir)]
    result = runner.invoke(
        app,
        ["sim", "faults", "l4-dev", "--throttle-rate", "1", "--retry-after", "3", *state],
    )
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert (shown["error_rate_429"], shown["retry_after_seconds"]) == (1.0, 3)

    kubeconfig = sim.state_dir / "kubeconfigs" / "l4-dev.yaml"
    with KubeCluster(kubeconfig, request_timeout=5.0) as kube:
        with pytest.raises(RetryableKubeError) as err:
            kube.nodes()
        assert err.value.retry_after == 3.0

        result = runner.invoke(
            app, ["sim", "faults", "l4-dev", "--reset", "--never-ready", "qwen*", *state]
        )
        assert result.exit_code == 0, result.output
        shown = json.loads(result.output)
        assert (shown["error_rate_429"], shown["never_ready"]) == (0.0, ["qwen*"])
        assert kube.nodes()

    downloads = [
        *("--download-mib-per-second", "256", "--fail-downloads", "*hydrate*"),
        *("--download-error", "auth"),
    ]
    result = runner.invoke(app, ["sim", "faults", "l4-dev", *downloads, *state])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert (shown["download_mib_per_second"], shown["fail_downloads"]) == (256.0, ["*hydrate*"])
    assert shown["download_error"] == "auth"

    bad = ["--image", "vllm/*:bad", "--image-error-rate", "0.2", "--image-reject-args", "--x*"]
    result = runner.invoke(app, ["sim", "faults", "l4-dev", *bad, *state])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["image_faults"] == {
        "vllm/*:bad": {
            "error_rate_5xx": 0.2,
            "crash_after_seconds": None,
            "reject_args": ["--x*"],
            "ttft_factor": 1.0,
            "pull_error": None,
            "tpot_factor": 1.0,
        }
    }
    slow = ["--image", "vllm/*:slow", "--image-slower", "50"]
    result = runner.invoke(app, ["sim", "faults", "l4-dev", *slow, *state])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["image_faults"]["vllm/*:slow"]["ttft_factor"] == 50.0
    slow = ["--image", "vllm/*:slow", "--image-slower-decode", "30"]
    result = runner.invoke(app, ["sim", "faults", "l4-dev", *slow, *state])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["image_faults"]["vllm/*:slow"]["tpot_factor"] == 30.0
    for glob in ("vllm/*:slow", "vllm/*:bad"):
        healed = ["--image", glob, "--image-heal"]
        result = runner.invoke(app, ["sim", "faults", "l4-dev", *healed, *state])
        assert result.exit_code == 0, result.output
    assert json.loads(result.output)["image_faults"] == {}
    typo = ["--image", "vllm/*:typo", "--image-pull-error", "not-found"]
    result = runner.invoke(app, ["sim", "faults", "l4-dev", *typo, *state])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["image_faults"]["vllm/*:typo"]["pull_error"] == "not-found"

    result = runner.invoke(app, ["sim", "faults", "no-such-cluster", "--dark", *state])
    assert result.exit_code == 1
    assert "not found" in result.output
    assert sim.stop() == 0


def test_sim_faults_without_a_running_sim_says_so(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["sim", "faults", "l4-dev", "--state-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "modelfleet sim up" in result.output


def _post(url: str, body: dict[str, object], token: str) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_sim_up_runs_the_clouds_and_sim_faults_makes_them_fail(sim: SimProcess) -> None:
    sim.wait_for("modelfleet sim ready:", READY_WITHIN)
    state = json.loads((sim.state_dir / "sim.json").read_text())
    gke, eks = state["clouds"]["gke"], state["clouds"]["eks"]
    printed = "".join(sim.output)
    assert f"export MODELFLEET_GKE_ENDPOINT={gke}" in printed
    assert f"export MODELFLEET_EKS_ENDPOINT={eks}" in printed
    token_file = sim.state_dir / "clouds" / "gke-token"
    assert f"export MODELFLEET_GKE_TOKEN_FILE={token_file}" in printed

    runner = CliRunner()
    where = ["--state-dir", str(sim.state_dir)]
    fault = ["--cloud", "gke", "--fail", "bad-machine-type", "--target", "gpu-a"]
    result = runner.invoke(app, ["sim", "faults", *fault, *where])
    assert result.exit_code == 0, result.output
    (pending,) = json.loads(result.output)
    assert pending["operation"] == "createNodePool"
    assert pending["stage"] == "call"

    # The next node pool creation named gpu-a, as the GKE SDK sends it, is refused.
    pools = f"{gke}/v1/projects/p/locations/us-central1/clusters/c/nodePools"
    body = {"nodePool": {"name": "gpu-a", "config": {"machineType": "a3-highgpu-8g"}}}
    status, answer = _post(pools, body, token_file.read_text())
    assert status == 400
    error = answer["error"]
    assert isinstance(error, dict)
    assert error["status"] == "INVALID_ARGUMENT"
    assert "machine type does not exist" in str(error["message"])
    # Used up: the fault list is empty again, and the next call reaches the fake's own logic.
    status, _ = _post(pools, body, token_file.read_text())
    assert status == 404
    shown = runner.invoke(app, ["sim", "faults", "--cloud", "gke", *where])
    assert json.loads(shown.output) == []

    result = runner.invoke(
        app, ["sim", "faults", "--cloud", "eks", "--fail", "stockout", "--times", "2", *where]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)[0]["stage"] == "operation"
    cleared = runner.invoke(app, ["sim", "faults", "--cloud", "eks", "--reset", *where])
    assert json.loads(cleared.output) == []

    # A zone out of one machine type, until --reset.
    stock = ["--cloud", "eks", "--stockout-zone", "us-east-2b", "--machine", "p5en.48xlarge"]
    result = runner.invoke(app, ["sim", "faults", *stock, *where])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "stockouts": [{"zone": "us-east-2b", "machine": "p5en.48xlarge"}]
    }
    with urllib.request.urlopen(f"{eks}/_admin/stockouts", timeout=10) as response:
        assert json.loads(response.read()) == [{"zone": "us-east-2b", "machine": "p5en.48xlarge"}]
    runner.invoke(app, ["sim", "faults", "--cloud", "eks", "--reset", *where])
    with urllib.request.urlopen(f"{eks}/_admin/stockouts", timeout=10) as response:
        assert json.loads(response.read()) == []
    lone = runner.invoke(app, ["sim", "faults", "--cloud", "gke", "--machine", "x", *where])
    assert lone.exit_code != 0
    assert "--machine names what runs out in a --stockout-zone" in lone.output
    assert sim.stop() == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--image-error-rate", "1"], "need --image GLOB"),
        (["--image", "x"], "--image needs"),
        (["--image", "x", "--image-heal", "--image-crash-after", "3"], "give no other"),
    ],
)
def test_sim_faults_image_options_need_each_other(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = CliRunner().invoke(
        app, ["sim", "faults", "l4-dev", *args, "--state-dir", str(tmp_path)]
    )
    assert result.exit_code != 0
    assert message in result.output
