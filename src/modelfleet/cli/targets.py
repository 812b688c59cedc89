"""What a command line names, kubectl style: ``KIND [NAME...]`` or ``KIND/NAME...``, and which
namespace applies when ``-n`` is not given (``MODELFLEET_NAMESPACE``, then the config file's
``namespace:``, then ``default``; the choice is reported so nobody wonders where a name went).

Pure apart from reading the environment and the config file. No Temporal (but for shell
completion of ``-n``, in cli.completion).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
import yaml

from modelfleet.api.meta import API_GROUP
from modelfleet.cli.errors import UsageError

ENV_NAMESPACE = "MODELFLEET_NAMESPACE"
ENV_CONFIG = "MODELFLEET_CONFIG"
DEFAULT_CONFIG = Path("~/.config/modelfleet/config.yaml")


def _complete_namespace(ctx: typer.Context, incomplete: str) -> list[str]:
    # Imported here: this module talks to no Temporal except when a shell completes ``-n``.
    from modelfleet.cli.completion import complete_namespaces

    return complete_namespaces(ctx, incomplete)


NsOption = Annotated[
    str | None,
    typer.Option(
        "--namespace",
        "-n",
        autocompletion=_complete_namespace,
        help="Namespace of namespaced resources (default: $MODELFLEET_NAMESPACE, the config "
        "file's namespace, or 'default').",
        show_default=False,
    ),
]


@dataclass(frozen=True)
class Namespace:
    """The namespace a command works in and where that choice came from."""

    name: str
    source: str

    @property
    def explicit(self) -> bool:
        return self.source == "-n"

    def described(self) -> str:
        """``namespace 'ml' (from MODELFLEET_NAMESPACE)`` for messages."""
        if self.explicit:
            return f"namespace {self.name!r}"
        return f"namespace {self.name!r} ({self.source}; pass -n NAMESPACE or -A for all)"


def config_path() -> Path:
    return Path(os.environ.get(ENV_CONFIG) or DEFAULT_CONFIG).expanduser()


def _read_config(path: Path) -> dict[str, object]:
    """The config file's mapping; none there is an empty one, an unreadable one a usage error."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError:
        raise UsageError(f"{_config_origin(path)}: not UTF-8 text (a binary file?)") from None
    except OSError as e:
        raise UsageError(f"{_config_origin(path)}: cannot read it: {e.strerror or e}") from None
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as e:
        reason = " ".join(str(e).split())
        raise UsageError(f"{_config_origin(path)}: not valid YAML: {reason}") from None
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise UsageError(
            f"{_config_origin(path)}: expected a YAML mapping (namespace: NAME), "
            f"found {'a list' if isinstance(config, list) else 'a single value'}"
        )
    return config


def _config_origin(path: Path) -> str:
    """``config file /x.yaml (from MODELFLEET_CONFIG)``, so the reader knows what to fix."""
    named = f" (from {ENV_CONFIG})" if os.environ.get(ENV_CONFIG) else ""
    return f"config file {path}{named}"


def resolve_namespace(flag: str | None) -> Namespace:
    """``-n`` wins, then the environment, then the config file, then ``default``."""
    if flag:
        return Namespace(flag, "-n")
    env = os.environ.get(ENV_NAMESPACE)
    if env:
        return Namespace(env, f"from {ENV_NAMESPACE}")
    path = config_path()
    config = _read_config(path)
    configured = config.get("namespace")
    if isinstance(configured, str) and configured:
        return Namespace(configured, f"from {path}")
    return Namespace("default", "the default namespace")


def kind_of(word: str) -> str:
    """The kind a CLI word names: ``md``, ``deployments``, ``ModelDeployment`` or the
    ``-o name`` form ``modeldeployment.modelfleet.dev`` (the kind registry's words)."""
    from modelfleet.cli.kinds import resolve  # the registry imports the readers that use this

    return resolve(word)


@dataclass(frozen=True)
class Target:
    kind: str
    name: str | None  # None: every resource of the kind


def parse_targets(args: list[str]) -> list[Target]:
    """``KIND``, ``KIND NAME...`` or ``KIND/NAME...`` (kubectl's two forms, not mixed);
    ``KIND,KIND... [NAME...]`` names several kinds (each NAME in each of them)."""
    if not args:
        from modelfleet.cli.kinds import listed

        raise UsageError(f"name a kind to act on (one of: {listed(short=True)})")
    if "/" in args[0]:
        targets = []
        for arg in args:
            kind, sep, name = arg.partition("/")
            if not sep or not kind or not name or "/" in name:
                raise UsageError(f"{arg!r}: use KIND/NAME for every argument once one is KIND/NAME")
            targets.append(Target(kind_of(kind), name))
        return targets
    words = args[0].split(",")
    if not all(words):
        raise UsageError(f"{args[0]!r}: an empty kind in a comma-separated list")
    kinds = list(dict.fromkeys(kind_of(word) for word in words))
    for name in args[1:]:
        if "/" in name:
            raise UsageError(f"{name!r}: give either KIND NAME... or KIND/NAME..., not both")
    if not args[1:]:
        return [Target(kind, None) for kind in kinds]
    return [Target(kind, name) for kind in kinds for name in args[1:]]


def single_target(args: list[str], verb: str) -> Target:
    """Exactly one named resource (``describe``, ``scale``...)."""
    targets = parse_targets(args)
    if len(targets) != 1 or targets[0].name is None:
        raise UsageError(f"{verb} needs exactly one resource: KIND NAME or KIND/NAME")
    return targets[0]


def resource_name(kind: str, name: str) -> str:
    """kubectl's ``-o name`` form, e.g. ``modeldeployment.modelfleet.dev/qwen3-8b``."""
    return f"{kind.lower()}.{API_GROUP}/{name}"


def require_orchestrated(kind: str) -> None:
    """Kinds that something runs for (or holds) are read; the others only validate."""
    from modelfleet.cli.kinds import spec_of

    if spec_of(kind).fetch is None:
        raise UsageError(f"{kind} is not orchestrated yet: nothing of that kind runs")


def is_namespaced(kind: str) -> bool:
    from modelfleet.cli.kinds import spec_of

    return spec_of(kind).namespaced
