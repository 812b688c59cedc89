"""The simulated container's emulated commands (`kubectl exec` runs them): argv as a runtime
execs it, the shell subset of `sh -c`, curl to the pod's own engine, and what is not there."""

from __future__ import annotations

import pytest

from modelfleet.sim.apiserver.exec_commands import (
    Container,
    Gpu,
    Outcome,
    StartError,
    run_command,
)

ENV = (("PATH", "/usr/bin:/bin"), ("HOSTNAME", "web-0"), ("GREETING", "hello  world"))


def _container(**changes: object) -> Container:
    async def fetch(port: int, path: str) -> tuple[int, bytes] | None:
        if port != 8000:
            return None
        return (200, b'{"ok": true}') if path == "/health" else (404, b"nope")

    async def read_stdin() -> bytes:
        return b"from stdin\n"

    base = Container(
        hostname="web-0",
        pod_ip="10.128.0.7",
        env=ENV,
        gpus=(Gpu("NVIDIA L4", "GPU-1"), Gpu("NVIDIA L4", "GPU-2")),
        read_stdin=read_stdin,
        fetch=fetch,
    )
    for key, value in changes.items():
        setattr(base, key, value)
    return base


async def _run(*argv: str, **changes: object) -> Outcome:
    return await run_command(argv, _container(**changes))


def _text(out: Outcome) -> tuple[str, str, int]:
    return out.stdout.decode(), out.stderr.decode(), out.code


async def test_plain_commands() -> None:
    assert _text(await _run("echo", "a", "b")) == ("a b\n", "", 0)
    assert _text(await _run("/bin/echo", "-n", "x")) == ("x", "", 0)
    assert (await _run("true")).code == 0
    assert (await _run("/usr/bin/false")).code == 1
    assert _text(await _run("hostname")) == ("web-0\n", "", 0)
    assert _text(await _run("cat", "/etc/hostname")) == ("web-0\n", "", 0)
    assert _text(await _run("cat")) == ("from stdin\n", "", 0)
    assert _text(await _run("cat", "/etc/shadow")) == (
        "",
        "cat: /etc/shadow: No such file or directory\n",
        1,
    )
    assert _text(await _run("printenv", "GREETING", "NOPE")) == ("hello  world\n", "", 1)
    assert (await _run("env")).stdout.decode().splitlines()[1] == "HOSTNAME=web-0"


async def test_nvidia_smi_lists_the_allocated_gpus_and_is_absent_without_them() -> None:
    listed = await _run("nvidia-smi", "-L")
    assert listed.stdout.decode() == (
        "GPU 0: NVIDIA L4 (UUID: GPU-1)\nGPU 1: NVIDIA L4 (UUID: GPU-2)\n"
    )
    with pytest.raises(StartError, match=r'exec: "nvidia-smi": executable file not found'):
        await _run("nvidia-smi", "-L", gpus=())
    unsupported = await _run("nvidia-smi", "-q")
    assert unsupported.code == 2
    assert "not emulated" in unsupported.stderr.decode()


async def test_missing_executables_fail_to_start_as_runc_says() -> None:
    with pytest.raises(StartError) as exc:
        await _run("ps", "aux")
    assert str(exc.value) == 'exec: "ps": executable file not found in $PATH'
    with pytest.raises(StartError) as exc:
        await _run("/opt/app/run")
    assert str(exc.value) == 'exec: "/opt/app/run": stat /opt/app/run: no such file or directory'


async def test_curl_reaches_only_the_pods_own_ports() -> None:
    assert _text(await _run("curl", "-s", "http://localhost:8000/health")) == (
        '{"ok": true}',
        "",
        0,
    )
    assert (await _run("curl", "-s", "10.128.0.7:8000/health")).code == 0
    assert _text(await _run("curl", "-s", "http://localhost:8000/x")) == ("nope", "", 0)
    assert _text(await _run("curl", "-fsS", "http://localhost:8000/x")) == (
        "",
        "curl: (22) The requested URL returned error: 404\n",
        22,
    )
    assert _text(await _run("curl", "-s", "http://localhost:9000/")) == ("", "", 7)
    refused = await _run("curl", "http://127.0.0.1:9000/")
    assert refused.stderr.decode().startswith("curl: (7) Failed to connect to 127.0.0.1 port 9000")
    assert (await _run("curl", "-sS", "http://other-svc/")).stderr.decode() == (
        "curl: (6) Could not resolve host: other-svc\n"
    )
    usage = await _run("curl", "-X", "POST", "http://localhost:8000/")
    assert (usage.code, usage.stderr.decode().splitlines()[0]) == (2, "curl: option -X: is unknown")


async def test_shell_sequences_quotes_expansion_and_exit() -> None:
    script = "echo $GREETING; echo \"$GREETING\" '$GREETING'; false || echo $?; exit 4"
    assert _text(await _run("sh", "-c", script)) == (
        "hello world\nhello  world $GREETING\n1\n",
        "",
        4,
    )
    assert _text(await _run("sh", "-c", "true && echo ${HOSTNAME}-x && false")) == (
        "web-0-x\n",
        "",
        1,
    )
    assert _text(await _run("sh", "-c", "nope arg; echo after")) == (
        "after\n",
        "sh: 1: nope: not found\n",
        0,
    )
    assert _text(await _run("bash", "-c", "nope")) == (
        "",
        "bash: line 1: nope: command not found\n",
        127,
    )
    assert _text(await _run("sh", "-c", "sh -c 'echo nested'")) == ("nested\n", "", 0)
    # Redirections between the two output streams, and to /dev/null.
    assert _text(await _run("sh", "-c", "echo out; echo err >&2")) == ("out\n", "err\n", 0)
    assert _text(await _run("sh", "-c", "nope 2>&1; cat /x 2>/dev/null")) == (
        "sh: 1: nope: not found\n",
        "",
        1,
    )
    assert _text(await _run("sh", "-c", "echo a 1>&2 2>/dev/null")) == ("", "a\n", 0)
    assert _text(await _run("sh", "-c", "echo a#b # comment")) == ("a#b\n", "", 0)
    # The script from stdin when there is no -c.
    assert _text(await _run("sh", read_stdin=_stdin(b"echo one\necho two\n"))) == (
        "one\ntwo\n",
        "",
        0,
    )


async def test_shell_features_beyond_the_subset_say_so() -> None:
    for script, feature in (
        ("ps | grep x", "pipes"),
        ("echo x > /tmp/f", "redirections to files"),
        ("cat < /etc/hostname", "input redirections"),
        ("echo $(hostname)", "command substitution"),
    ):
        out = await _run("sh", "-c", script)
        assert out.code == 2, script
        assert out.stderr.decode() == f"sh: {feature}: not emulated by the simulated container\n"
    unterminated = await _run("sh", "-c", "echo 'x")
    assert _text(unterminated) == ("", "sh: 1: Syntax error: Unterminated quoted string\n", 2)


def _stdin(data: bytes) -> object:
    async def read() -> bytes:
        return data

    return read
