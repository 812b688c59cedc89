"""Test files in the order that ends a ``-n N --dist loadfile`` run soonest: slowest first, a
pytest plugin loaded by ``tests/conftest.py``.

xdist hands out whole files in collection order (its own reordering, most tests first, is turned
off here): with the long integration files first, whichever process is free takes the next
longest, and the many short files fill the end, so all finish within a short file of each
other (longest-processing-time-first). The order inside a file is kept.

The seconds come from ``tests/file_durations.json`` (a measured run's per-file totals: set-up,
call and teardown); a file it does not list counts by its directory. Stale numbers cost only
balance, but that can be minutes: three slow unit files missing from the list ran last and made
one run 1.5 minutes longer than the next. To measure again::

    make durations     # the suite with --junitxml, then this module rewrites the JSON
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

DURATIONS_FILE = Path(__file__).with_name("file_durations.json")
# Seconds assumed for a file the durations file does not list, by its directory.
DEFAULT_SECONDS = {
    "integration": 30.0,
    "kubectl": 10.0,
    "harness": 60.0,
    "workflow": 3.0,
    "replay": 1.0,
}
FALLBACK_SECONDS = 0.5


def file_seconds() -> dict[str, float]:
    try:
        data = json.loads(DURATIONS_FILE.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.get("files", {}).items()}


def default_seconds(path: str) -> float:
    for part in path.split("/")[:-1]:
        if part in DEFAULT_SECONDS:
            return DEFAULT_SECONDS[part]
    return FALLBACK_SECONDS


def _file_of(item: pytest.Item, rootdir: Path) -> str:
    path = Path(str(item.path))
    try:
        return path.relative_to(rootdir).as_posix()
    except ValueError:
        return path.as_posix()


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    # xdist's "most tests per file first" would undo the order below.
    if getattr(config.option, "loadscopereorder", None) is not None:
        config.option.loadscopereorder = False


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seconds = file_seconds()
    first_seen: dict[str, int] = {}
    for item in items:
        first_seen.setdefault(_file_of(item, config.rootpath), len(first_seen))

    def key(item: pytest.Item) -> tuple[float, int]:
        path = _file_of(item, config.rootpath)
        return (-seconds.get(path, default_seconds(path)), first_seen[path])

    items.sort(key=key)  # stable: a file's own order stays


def junit_file_seconds(junit_xml: Path) -> Counter[str]:
    """Per test file, the seconds of its test cases in a junit XML report (``--junitxml``;
    a case's time is its set-up, call and teardown)."""
    totals: Counter[str] = Counter()
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        parts = case.get("classname", "").split(".")
        # "tests.integration.test_x", or "tests.integration.test_x.TestClass"
        for end in range(len(parts), 0, -1):
            if parts[end - 1].startswith("test_"):
                totals["/".join(parts[:end]) + ".py"] += float(case.get("time", "0"))
                break
    return totals


def main(argv: list[str]) -> None:
    """``python tests/file_order.py REPORT.xml``: rewrite the durations file from a report."""
    totals = junit_file_seconds(Path(argv[1]))
    files = {f: round(s, 1) for f, s in sorted(totals.items(), key=lambda kv: -kv[1]) if s >= 1}
    DURATIONS_FILE.write_text(
        json.dumps(
            {
                "about": "per test file, seconds (set-up + call + teardown) in a measured "
                "run; tests/file_order.py orders files slowest first by these, files not "
                "listed count by directory",
                "files": files,
            },
            indent=1,
        )
        + "\n"
    )
    print(f"{DURATIONS_FILE}: {len(files)} files, {sum(files.values()):.0f} s in all")


if __name__ == "__main__":
    main(sys.argv)
