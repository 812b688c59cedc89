"""Odd and empty input through the real CLI (a subprocess each): a binary file, a YAML alias
used inside its own anchor, nesting deeper than any manifest, a comment-only file and an empty
standard input are invalid input for ``apply``, ``validate`` and ``diff``: exit 2, one error line
naming the file (and line where known) and why, no traceback and no Python type name. ``-f DIR``
never enters hidden folders, ``__pycache__`` or ``node_modules``, and says on stderr how many
files it read. None of these reaches a server: the manifests are refused first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from modelfleet.api.loading import load_paths

SRC = Path(__file__).resolve().parents[2] / "src"
QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
EXIT_INVALID = 2
# Nothing listens here: a verb that got past loading would fail to connect, not exit 2.
NO_SERVER = "127.0.0.1:9"


def _cli(
    *args: str, stdin: bytes = b"", cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
        "MODELFLEET_TEMPORAL_ADDRESS": NO_SERVER,
        "COLUMNS": "300",
    }
    env.pop("MODELFLEET_DEBUG", None)
    done = subprocess.run(
        [sys.executable, "-m", "modelfleet.cli", *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
        env=env,
        cwd=cwd,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def _assert_invalid(done: subprocess.CompletedProcess[str], where: str, reason: str) -> None:
    out = done.stdout + done.stderr
    assert done.returncode == EXIT_INVALID, out
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out
    assert where in errors[0], errors[0]
    assert reason in errors[0], errors[0]
    assert "Traceback" not in out
    for python_name in ("UnicodeDecodeError", "RecursionError", "Error:", "unexpected"):
        assert python_name not in errors[0], errors[0]


ODD = {
    # name: (content, where the error points, what it says)
    "binary.yaml": (b"kind: x\n" + bytes(range(0x80, 0x100)), "binary.yaml:2:", "not a UTF-8"),
    "alias.yaml": (
        b"apiVersion: modelfleet.dev/v1alpha1\nkind: ModelDeployment\nmetadata: {name: x}\n"
        b"spec: &a {replicas: *a}\n",
        "alias.yaml:4:",
        "alias *a is used inside its own anchor",
    ),
    "flow.yaml": (b"[" * 5000 + b"]" * 5000, "flow.yaml:1:", "nested more than"),
    "block.yaml": (
        "\n".join("  " * i + "a:" for i in range(400)).encode() + b" 1\n",
        "block.yaml:101:",
        "nested more than",
    ),
    "comments.yaml": (b"# nothing here\n\n# still nothing\n---\n", "comments.yaml", "no documents"),
}


@pytest.mark.parametrize("verb", ["apply", "validate", "diff"])
@pytest.mark.parametrize("name", sorted(ODD))
def test_odd_files_are_invalid_input(tmp_path: Path, verb: str, name: str) -> None:
    content, where, reason = ODD[name]
    (tmp_path / name).write_bytes(content)
    _assert_invalid(_cli(verb, "-f", str(tmp_path / name)), where, reason)


@pytest.mark.parametrize("verb", ["apply", "validate", "diff"])
def test_empty_stdin_is_invalid_input(verb: str) -> None:
    _assert_invalid(_cli(verb, "-f", "-", stdin=b""), "<stdin>", "no documents")


def test_binary_stdin_is_invalid_input() -> None:
    _assert_invalid(_cli("validate", "-f", "-", stdin=b"\xff\xfe\x00"), "<stdin>:1:", "UTF-8")


def test_a_directory_walk_skips_hidden_and_tool_folders_and_says_what_it_read(
    tmp_path: Path,
) -> None:
    # Another project's virtualenv, a VCS folder, caches: YAML that is not ours, and broken.
    for folder in (".venv/lib/site", ".git", "node_modules/pkg", "sub/__pycache__", ".hidden"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "junk.yaml").write_bytes(b"\xff not yaml: [")
    (tmp_path / "sub").mkdir(exist_ok=True)
    (tmp_path / "classes.yaml").write_text((QUICKSTART / "classes.yaml").read_text())
    (tmp_path / "sub" / "clusters.yml").write_text((QUICKSTART / "clusters.yaml").read_text())
    done = _cli("validate", "-f", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"read 2 files from {tmp_path}" in done.stderr
    assert "read" not in done.stdout.split("valid.")[-1]
    assert "junk" not in done.stdout + done.stderr


def test_the_directory_named_itself_may_be_hidden(tmp_path: Path) -> None:
    hidden = tmp_path / ".manifests"
    hidden.mkdir()
    (hidden / "classes.yaml").write_text((QUICKSTART / "classes.yaml").read_text())
    result = load_paths([str(hidden)])
    assert not result.errors
    assert result.directories == {str(hidden): 1}


def test_one_empty_file_among_others_is_fine(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text((QUICKSTART / "classes.yaml").read_text())
    (tmp_path / "b.yaml").write_text("# placeholder\n")
    assert not load_paths([str(tmp_path)]).errors


@pytest.mark.parametrize("verb", [["worker"], ["controller", "--kubeconfig", "nowhere.yaml"]])
def test_an_unknown_log_level_is_a_usage_error_before_anything_starts(verb: list[str]) -> None:
    done = _cli(*verb, "--log-level", "loud")
    assert done.returncode == EXIT_INVALID, done.stderr
    assert "--log-level" in done.stderr
    assert "expected one of debug, info, warning, error" in done.stderr
    assert "Traceback" not in done.stderr
