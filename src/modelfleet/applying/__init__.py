"""How a validated resource reaches its workflow, shared by the two front doors: the CLI's
``apply``/``delete`` and the Kubernetes controller. Update-with-start of the kind's workflow (or
an Update of the Fleet or the endpoint directory), so applying twice is idempotent.

This layer may touch: the Temporal client, the API models, the workflows' handles and inputs,
the worker's tuning. It may not: print, parse command lines (no typer/rich), or read files.
"""
