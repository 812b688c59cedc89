"""The Kubernetes API server emulator: one aiohttp process serving many simulated clusters.

Development/test emulator only: product code never imports ``modelfleet.sim``. See
``src/modelfleet/sim/README.md`` for the module map.
"""
