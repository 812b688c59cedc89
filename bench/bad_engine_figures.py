"""How a bad engine is contained under load, with the product's DEFAULT knobs (issue 27, item 5):
the figures ``docs/operations.md`` ("Measured under load") quotes. The scenario is the
integration tests' (``tests/integration/bad_engines.py``; ``test_bad_engine_figures``,
``test_bad_engine_sigkill`` and ``test_bad_engine_good_image`` run it with ``TEST_KNOBS``,
``minReadySeconds`` 20 s and a slow crasher serving 100 s, in less time); here with
``DEFAULT_KNOBS``: ``minReadySeconds`` 30 s (the product's default) and the slow crasher
serving 150 s after each start. Batches (``--batch``):

- ``changes`` (default): every case of ``CASES`` and the dark cluster, concurrently (about four
  minutes: the slow crasher sets the pace);
- ``sigkill``: the crash loop, rejected arguments, the unpullable image, the 5xx image and a good
  image, the worker SIGKILLed once in the middle of every roll;
- ``good``: a good image on its own.

Printed: one table row per case (requests, failed, failed share, min serving (floor),
rollback from the failure's first sign), then the bounds: at most 1% failed, never below the
floor, rolled back within 60 s of the failure's first sign, the dark cluster out of rotation
within 30 s. Exits 1 when a bound is missed. Loopback only.

    .venv/bin/python bench/bad_engine_figures.py [--batch changes|sigkill|good]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from bad_engines import (  # noqa: E402
    DEFAULT_KNOBS,
    GOOD_CASE,
    KILLED_CASES,
    MAX_FAILED_SHARE,
    MOVED_WITHIN,
    ROLLBACK_WITHIN,
    Case,
    Figures,
    OneKill,
    cases,
    check_figures,
    figures_env,
    run_change,
    run_dark,
)


async def main(batch: str) -> int:
    knobs = DEFAULT_KNOBS
    with tempfile.TemporaryDirectory(prefix="bench-bad-engines-") as tmp:
        async with figures_env(Path(tmp), knobs) as env:
            named: list[Case | None]
            if batch == "changes":
                named = [*cases(knobs), None]
                runs = [run_change(env, c, knobs=knobs) for c in cases(knobs)]
                runs.append(run_dark(env, knobs))
            elif batch == "sigkill":
                named = list(KILLED_CASES)
                kill = OneKill(env, len(KILLED_CASES))
                runs = [run_change(env, c, kill, knobs) for c in KILLED_CASES]
            else:
                named = [GOOD_CASE]
                runs = [run_change(env, GOOD_CASE, knobs=knobs)]
            results = await asyncio.gather(*runs, return_exceptions=True)
    print(
        f"\nminReadySeconds {knobs.min_ready_seconds} s, slow crasher serving "
        f"{knobs.slow_crash_after:g} s after each start\n"
        "| case | requests | failed | failed share | min serving (floor) | rollback | note |\n"
        "| --- | --- | --- | --- | --- | --- | --- |"
    )
    missed: list[str] = []
    for case, result in zip(named, results, strict=True):
        name = case.name if case is not None else "dark-cluster"
        try:
            figures: Figures = check_figures(result, case)
            if case is None and (figures.visible_at is None or figures.visible_at > MOVED_WITHIN):
                raise AssertionError(f"not out of rotation within {MOVED_WITHIN:g} s")
        except BaseException as exc:  # every case is reported, then the verdict
            missed.append(f"{name}: {type(exc).__name__}: {str(exc)[:300]}")
    print(
        f"\nbounds: at most {100 * MAX_FAILED_SHARE:g}% failed, never below the floor, rolled "
        f"back within {ROLLBACK_WITHIN:g} s of the failure's first sign, the dark cluster out "
        f"of rotation within {MOVED_WITHIN:g} s"
    )
    for m in missed:
        print(f"MISSED: {m}")
    return 1 if missed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", choices=["changes", "sigkill", "good"], default="changes")
    sys.exit(asyncio.run(main(parser.parse_args().batch)))
