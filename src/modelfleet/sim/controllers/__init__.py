"""The controllers of a simulated cluster (Deployment, LeaderWorkerSet, scheduler with DRA,
kubelet, gateway), run by :class:`.controller_manager.WorkloadSimulator` on the store's event loop.

Development/test emulator only: product code never imports ``modelfleet.sim``. See
``src/modelfleet/sim/README.md`` for the module map and where a new controller goes.
"""
