"""The workflow types a worker registers: one per entity package, found rather than listed.

An entity package is a subpackage of ``modelfleet`` with a ``workflow`` module; every
``@workflow.defn`` class that module defines is registered. A new entity is picked up by being
written (its package, its API model and its kind spec in ``cli.kinds`` are all a new kind
touches). Imports only entity workflow modules; reads the package directory, never imports the
shared layers (``sim`` among them) to look for workflows.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import modelfleet

__all__ = ["entity_workflows"]


def entity_workflows() -> list[type]:
    """The workflow classes of every entity package, by package name."""
    found: list[type] = []
    for package in sorted(pkgutil.iter_modules(modelfleet.__path__), key=lambda m: m.name):
        where = Path(getattr(package.module_finder, "path", ""), package.name)
        if not package.ispkg or not (where / "workflow.py").is_file():
            continue
        name = f"modelfleet.{package.name}.workflow"
        module = importlib.import_module(name)
        found.extend(
            obj
            for obj in vars(module).values()
            if isinstance(obj, type)
            and obj.__module__ == name
            and hasattr(obj, "__temporal_workflow_definition")
        )
    return found
