"""``python -m modelfleet.cli``: the same as the ``modelfleet`` console script."""

from modelfleet.cli.main import run

run()
