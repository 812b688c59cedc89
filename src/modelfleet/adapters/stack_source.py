"""Fetch pinned release manifests for the serving stack with ``httpx`` from an http(s) base URL,
or read them from a local directory (air-gapped installs, tests). The only module that imports
httpx. Returns parsed YAML documents; never applies anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import yaml


class StackSourceError(Exception):
    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


def fetch_manifests(source: str, path: str, *, timeout: float = 30.0) -> list[dict[str, Any]]:
    """The documents of ``<source>/<path>``, CustomResourceDefinitions first."""
    if source.startswith(("http://", "https://")):
        url = source.rstrip("/") + "/" + path.lstrip("/")
        try:
            response = httpx.get(url, timeout=timeout, follow_redirects=True)
        except httpx.HTTPError as exc:
            raise StackSourceError(f"{url}: {type(exc).__name__}", retryable=True) from None
        if response.status_code >= 500:
            raise StackSourceError(f"{url}: HTTP {response.status_code}", retryable=True)
        if response.status_code != 200:
            raise StackSourceError(f"{url}: HTTP {response.status_code}", retryable=False)
        text = response.text
    else:
        file = Path(source) / path
        if not file.is_file():
            raise StackSourceError(f"{file}: no such file", retryable=False)
        text = file.read_text()
    try:
        docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    except yaml.YAMLError as exc:
        raise StackSourceError(f"{path}: not YAML ({exc})", retryable=False) from None
    return sorted(docs, key=lambda d: d.get("kind") != "CustomResourceDefinition")
