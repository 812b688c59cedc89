"""What a simulated container answers to ``kubectl exec``: a small, documented set of commands
emulated from the simulation's own state (the container has no processes to run).

Emulated (argv[0] may also be an absolute path under ``/bin``, ``/usr/bin``, ``/usr/local/bin``,
``/sbin`` or ``/usr/sbin``):

- ``echo [-n] ARGS``, ``true``, ``false``, ``hostname`` (``-i``: the pod IP);
- ``env`` and ``printenv [NAME...]``: the container's environment (see :class:`Container`);
- ``cat /etc/hostname``, and ``cat`` without files (copies stdin);
- ``nvidia-smi -L`` (``--list-gpus``): the GPUs the pod's DRA allocation gave the container; a
  container without GPUs has no ``nvidia-smi`` (the NVIDIA runtime injects it with the devices);
- ``curl [-s] [-S] [-f] http://localhost:<port>/<path>``: a GET to the pod's own simulated
  engine on that port (the pod IP works too); no engine there is curl's exit 7;
- ``sh -c SCRIPT`` / ``bash -c SCRIPT`` (and ``sh`` reading its script from stdin): commands
  separated by ``;``, ``&&``, ``||`` or newlines, with quoting, ``$NAME``/``${NAME}``/``$?``
  expansion, ``>&2``/``2>&1``/``>/dev/null`` redirections and the ``exit [N]`` builtin; a
  command the shell cannot find is dash's ``sh: 1: NAME: not found`` (bash: ``bash: line 1:
  NAME: command not found``), status 127.

Any other executable does not exist, as in a minimal image: the runtime fails to start it
(:class:`StartError`, which the exec endpoint reports the way containerd and the API server
do). A known command with options it does not emulate prints why on stderr and exits 2.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure apart from
the two callables a :class:`Container` carries (reading stdin, fetching from the pod's engine).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from modelfleet.sim.apiserver.exec_shell import ShellSyntaxError, UnsupportedError, expand, parse

__all__ = ["Container", "Gpu", "Outcome", "StartError", "run_command"]

_BIN_DIRS = ("/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin")
_LOCAL_HOSTS = ("localhost", "127.0.0.1", "0.0.0.0", "[::1]", "::1")


@dataclass(frozen=True)
class Gpu:
    product: str
    uuid: str


@dataclass
class Container:
    """The exec'd container as the commands see it."""

    hostname: str
    pod_ip: str
    env: Sequence[tuple[str, str]]
    gpus: Sequence[Gpu] = ()
    # Reads all of stdin (empty when the exec has no stdin).
    read_stdin: Callable[[], Awaitable[bytes]] | None = None
    # GET ``path`` from the pod's own port: (HTTP status, body), or None when nothing listens.
    fetch: Callable[[int, str], Awaitable[tuple[int, bytes] | None]] | None = None


@dataclass
class Outcome:
    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    code: int = 0

    def out(self, text: str) -> None:
        self.stdout += text.encode()

    def err(self, text: str) -> None:
        self.stderr += text.encode()


class StartError(Exception):
    """The runtime could not start the process (runc's message, e.g. not in $PATH)."""


async def run_command(argv: Sequence[str], container: Container) -> Outcome:
    """Run ``argv`` as the container's runtime would exec it (no shell unless argv[0] is one)."""
    result = Outcome()
    name = _resolve(argv[0], container)
    if name is None:
        raise StartError(_not_found_message(argv[0]))
    result.code = await _PROGRAMS[name](list(argv[1:]), container, result)
    return result


def _not_found_message(arg0: str) -> str:
    if "/" in arg0:
        return f'exec: "{arg0}": stat {arg0}: no such file or directory'
    return f'exec: "{arg0}": executable file not found in $PATH'


def _resolve(arg0: str, container: Container) -> str | None:
    name = arg0
    if "/" in arg0:
        head, _, name = arg0.rpartition("/")
        if head not in _BIN_DIRS:
            return None
    if name == "nvidia-smi" and not container.gpus:
        return None
    return name if name in _PROGRAMS else None


# ---------------------------------------------------------------------------------- programs

Program = Callable[[list[str], Container, Outcome], Awaitable[int]]


async def _echo(args: list[str], _: Container, out: Outcome) -> int:
    newline = True
    if args and args[0] == "-n":
        newline, args = False, args[1:]
    out.out(" ".join(args) + ("\n" if newline else ""))
    return 0


async def _true(_args: list[str], _c: Container, _o: Outcome) -> int:
    return 0


async def _false(_args: list[str], _c: Container, _o: Outcome) -> int:
    return 1


async def _hostname(args: list[str], container: Container, out: Outcome) -> int:
    if not args:
        out.out(container.hostname + "\n")
        return 0
    if args == ["-i"]:
        out.out(container.pod_ip + " \n")
        return 0
    return _not_emulated("hostname", args, out)


async def _env(args: list[str], container: Container, out: Outcome) -> int:
    if args:
        return _not_emulated("env", args, out)
    out.out("".join(f"{k}={v}\n" for k, v in container.env))
    return 0


async def _printenv(args: list[str], container: Container, out: Outcome) -> int:
    env = dict(container.env)
    if not args:
        return await _env([], container, out)
    if any(a.startswith("-") for a in args):
        return _not_emulated("printenv", args, out)
    code = 0
    for name in args:
        if name in env:
            out.out(env[name] + "\n")
        else:
            code = 1
    return code


async def _cat(args: list[str], container: Container, out: Outcome) -> int:
    if not args or args == ["-"]:
        if container.read_stdin is not None:
            out.stdout += await container.read_stdin()
        return 0
    code = 0
    for path in args:
        if path.startswith("-"):
            return _not_emulated("cat", args, out)
        if path == "/etc/hostname":
            out.out(container.hostname + "\n")
        else:
            out.err(f"cat: {path}: No such file or directory\n")
            code = 1
    return code


async def _nvidia_smi(args: list[str], container: Container, out: Outcome) -> int:
    if args not in (["-L"], ["--list-gpus"]):
        return _not_emulated("nvidia-smi", args, out)
    for index, gpu in enumerate(container.gpus):
        out.out(f"GPU {index}: {gpu.product} (UUID: {gpu.uuid})\n")
    return 0


_CURL_FLAGS = {"s": "silent", "S": "show-error", "f": "fail"}


async def _curl(args: list[str], container: Container, out: Outcome) -> int:
    flags: set[str] = set()
    urls: list[str] = []
    for arg in args:
        if arg.startswith("--"):
            if arg[2:] not in _CURL_FLAGS.values():
                return _curl_usage(f"option {arg}: is unknown", out)
            flags.add(arg[2:])
        elif arg.startswith("-") and len(arg) > 1:
            for letter in arg[1:]:
                if letter not in _CURL_FLAGS:
                    return _curl_usage(f"option -{letter}: is unknown", out)
                flags.add(_CURL_FLAGS[letter])
        else:
            urls.append(arg)
    if len(urls) != 1:
        return _curl_usage("no URL specified!" if not urls else "only one URL is emulated", out)
    show_errors = "silent" not in flags or "show-error" in flags

    def fail(code: int, message: str) -> int:
        if show_errors:
            out.err(f"curl: ({code}) {message}\n")
        return code

    url = urls[0] if "://" in urls[0] else f"http://{urls[0]}"
    parts = urlsplit(url)
    if parts.scheme != "http":
        return fail(1, f'Protocol "{parts.scheme}" not supported')
    host = parts.hostname or ""
    try:
        port = parts.port or 80
    except ValueError:
        return fail(3, "URL rejected: Port number was not a decimal number between 0 and 65535")
    if host not in _LOCAL_HOSTS and host != container.pod_ip:
        return fail(6, f"Could not resolve host: {host}")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    answer = await container.fetch(port, path) if container.fetch is not None else None
    if answer is None:
        return fail(
            7, f"Failed to connect to {host} port {port} after 0 ms: Couldn't connect to server"
        )
    status, body = answer
    if "fail" in flags and status >= 400:
        return fail(22, f"The requested URL returned error: {status}")
    out.stdout += body
    return 0


def _curl_usage(message: str, out: Outcome) -> int:
    out.err(f"curl: {message}\ncurl: try 'curl --help' or 'curl --manual' for more information\n")
    return 2


def _not_emulated(program: str, args: Sequence[str], out: Outcome) -> int:
    out.err(
        f"{program}: {' '.join(args)}: not emulated by the simulated container "
        "(modelfleet.sim emulates a few commands; see its README)\n"
    )
    return 2


# ------------------------------------------------------------------------------------- shell


async def _sh(args: list[str], container: Container, out: Outcome) -> int:
    return await _shell("sh", args, container, out)


async def _bash(args: list[str], container: Container, out: Outcome) -> int:
    return await _shell("bash", args, container, out)


async def _shell(shell: str, args: list[str], container: Container, out: Outcome) -> int:
    if args[:1] == ["-c"]:
        if len(args) < 2:
            out.err(
                "sh: 0: -c requires an argument\n"
                if shell == "sh"
                else "bash: -c: option requires an argument\n"
            )
            return 2
        script = args[1]
    elif not args:
        raw = await container.read_stdin() if container.read_stdin is not None else b""
        script = raw.decode(errors="replace")
    else:
        return _not_emulated(shell, args, out)
    try:
        commands = parse(script)
    except UnsupportedError as exc:
        out.err(f"{shell}: {exc}: not emulated by the simulated container\n")
        return 2
    except ShellSyntaxError as exc:
        out.err(
            f"{shell}: 1: Syntax error: {exc}\n"
            if shell == "sh"
            else f"{shell}: -c: line 1: syntax error: {exc}\n"
        )
        return 2
    status = 0
    env = dict(container.env)
    for words, joiner, redirections in commands:
        if joiner == "&&" and status != 0:
            continue
        if joiner == "||" and status == 0:
            continue
        argv = expand(words, env, status)
        if not argv:
            continue
        if argv[0] == "exit":
            try:
                return int(argv[1]) % 256 if len(argv) > 1 else status
            except ValueError:
                out.err(f"{shell}: 1: exit: Illegal number: {argv[1]}\n")
                return 2
        own = Outcome()
        name = _resolve(argv[0], container)
        if name is None:
            own.err(
                f"sh: 1: {argv[0]}: not found\n"
                if shell == "sh"
                else f"bash: line 1: {argv[0]}: command not found\n"
            )
            status = 127
        else:
            status = await _PROGRAMS[name](argv[1:], container, own)
        _route(own, redirections, out)
    return status


def _route(own: Outcome, redirections: Sequence[tuple[int, str]], out: Outcome) -> None:
    """A command's output to where its redirections send it (in order, as the shell does)."""
    where = {1: "1", 2: "2"}
    for fd, target in redirections:
        where[fd] = where[int(target[1])] if target.startswith("&") else "null"
    for data, fd in ((own.stdout, 1), (own.stderr, 2)):
        if where[fd] == "1":
            out.stdout += data
        elif where[fd] == "2":
            out.stderr += data


_PROGRAMS: dict[str, Program] = {
    "echo": _echo,
    "true": _true,
    "false": _false,
    "hostname": _hostname,
    "env": _env,
    "printenv": _printenv,
    "cat": _cat,
    "nvidia-smi": _nvidia_smi,
    "curl": _curl,
    "sh": _sh,
    "bash": _bash,
}
