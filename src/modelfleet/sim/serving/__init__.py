"""Simulated serving: engines that answer OpenAI-compatible HTTP and a gateway that routes to them.

Every Ready engine pod of a simulated cluster listens on a real loopback port per served container
port; the cluster's Gateway address (in its status) really listens and implements the parts of the
Gateway API and Inference Extension that modelfleet's manifests use.

Development/test emulator only: product code never imports ``modelfleet.sim``. This package binds
loopback ports only and reads the cluster's in-process store; it never contacts another host
except the backends an HTTPRoute names (as a real gateway would).
"""

from __future__ import annotations

from modelfleet.sim.serving.engine import EngineProfile
from modelfleet.sim.serving.plane import ServingPlane

__all__ = ["EngineProfile", "ServingPlane"]
