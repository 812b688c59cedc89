"""A ``modelfleet`` verb that talks only to Temporal starts without loading the worker's SDKs
(the Kubernetes client, the cloud SDKs, the activities): each would add to every command's
start-up, which users (and the kubectl-style tests, which run the CLI dozens of times) pay on
every call. Checked in one fresh interpreter: after the verbs have run, nothing heavy is loaded;
then importing the worker's runner loads every name checked (so the check cannot pass because a
name is wrong)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

HEAVY = ("kubernetes", "google.cloud", "boto3", "botocore", "modelfleet.activities")
# Nothing listens on port 1: each verb fails to connect, after importing all it needs.
VERBS = [["get", "deployments"], ["describe", "deployment", "x"], ["delete", "md", "x"]]

_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from typer.testing import CliRunner
    from modelfleet.cli.main import app

    def heavy():
        return sorted(
            h for h in {heavy!r} if any(n == h or n.startswith(h + ".") for n in sys.modules)
        )

    codes = [CliRunner().invoke(app, [*verb, "--address", "127.0.0.1:1"]).exit_code
             for verb in {verbs!r}]
    after_verbs = heavy()
    import modelfleet.worker.runner
    print(json.dumps({{"codes": codes, "after_verbs": after_verbs, "after_runner": heavy()}}))
    """
)


def test_get_describe_and_delete_load_no_worker_sdk() -> None:
    script = _SCRIPT.format(heavy=HEAVY, verbs=VERBS)
    # Not check=True: how the interpreter exits afterwards (the SDKs' threads at shutdown) is
    # not what this test is about; the line printed before it is.
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    lines = done.stdout.splitlines()
    assert lines, f"no report (exit {done.returncode}): {done.stderr[-2000:]}"
    found = json.loads(lines[-1])
    assert all(code != 0 for code in found["codes"]), found  # each verb ran, and failed to connect
    assert found["after_verbs"] == [], f"modelfleet verbs loaded {found['after_verbs']}"
    assert found["after_runner"] == sorted(HEAVY)
