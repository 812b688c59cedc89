"""A ``modelfleet`` verb that talks only to Temporal starts without loading the worker's SDKs
(the Kubernetes client, the cloud SDKs, the activities): each would add to every command's
start-up, which users (and the kubectl-style tests, which run the CLI dozens of times) pay on
every call. Checked in a fresh interpreter, after the CLI has parsed its arguments."""

from __future__ import annotations

import subprocess
import sys
import textwrap

HEAVY = ("kubernetes", "google.cloud", "boto3", "botocore", "azure", "modelfleet.activities")

_SCRIPT = textwrap.dedent(
    """
    import sys
    from typer.testing import CliRunner
    from modelfleet.cli.main import app

    result = CliRunner().invoke(app, {args!r})
    heavy = sorted(
        {{name for name in sys.modules for h in {heavy!r} if name == h or name.startswith(h + ".")}}
    )
    print(result.exit_code, *(h for h in {heavy!r} if any(n.startswith(h) for n in heavy)))
    """
)


def _loaded(*args: str) -> list[str]:
    script = _SCRIPT.format(args=list(args), heavy=HEAVY)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    return done.stdout.split()


def test_get_and_describe_load_no_worker_sdk() -> None:
    # Nothing listens on port 1: the verb fails to connect, after importing all it needs.
    for verb in (["get", "deployments"], ["describe", "deployment", "x"], ["delete", "md", "x"]):
        code, *heavy = _loaded(*verb, "--address", "127.0.0.1:1")
        assert code != "0", verb
        assert heavy == [], f"modelfleet {' '.join(verb)} loaded {heavy}"


def test_the_names_checked_are_what_the_worker_loads() -> None:
    """Else the guard above would pass whatever the CLI imports."""
    script = "import sys, modelfleet.worker.runner; print(*sorted(sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = done.stdout.split()
    for heavy in ("kubernetes", "google.cloud", "boto3", "botocore", "modelfleet.activities"):
        assert any(name == heavy or name.startswith(heavy + ".") for name in loaded), heavy
