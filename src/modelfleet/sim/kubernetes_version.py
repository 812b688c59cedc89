"""The Kubernetes version the simulated clusters report, from ``/version`` and every kubelet.

One constant, so ``kubectl version`` and ``kubectl get nodes`` agree as on a real cluster.
"""

from __future__ import annotations

KUBERNETES_VERSION = "v1.34.0"
