"""The endpoint picker's ``EndpointPickerConfig`` (llm-d router): the building blocks shared by
both serving modes, the Unified profile, and the KV block size the prefix-cache plugins need.

Pure: returns plain dicts and their YAML text. The disaggregated (PrefillDecode) profile set lives
in ``prefill_decode`` next to the rest of the P/D plumbing.
"""

from __future__ import annotations

import hashlib
from typing import Any

import yaml

from modelfleet.api.deployments import PlacedEngine
from modelfleet.rendering.args import int_flag
from modelfleet.rendering.engines import serving_member
from modelfleet.rendering.facts import ClusterFacts

CONFIG_KIND = "EndpointPickerConfig"
CONFIG_API_VERSION = "llm-d.ai/v1alpha1"
LEGACY_CONFIG_API_VERSION = "inference.networking.x-k8s.io/v1alpha1"
# The ConfigMap key, and so the file name the EPP reads.
CONFIG_KEY = "epp-config.yaml"

DEFAULT_BLOCK_SIZE = 16
# vLLM calls the KV block size --block-size, SGLang calls it --page-size.
BLOCK_SIZE_FLAGS = ("--block-size", "--page-size")

PREFIX_PRODUCER = "approx-prefix-cache-producer"
PREFIX_SCORER = "prefix-cache-scorer"
QUEUE_SCORER = "queue-scorer"
PICKER = "max-score-picker"
SINGLE_PROFILE_HANDLER = "single-profile-handler"
PREFIX_WEIGHT = 2
QUEUE_WEIGHT = 1


def config_api_version(facts: ClusterFacts) -> str:
    return LEGACY_CONFIG_API_VERSION if facts.legacy_epp_api_group else CONFIG_API_VERSION


def kv_block_size(engine: PlacedEngine) -> int:
    """The engine's KV block size in tokens, read from its serving container's flags.

    Best effort: the EPP hashes prompts in blocks of this size to guess which pod holds a prefix,
    so a wrong value degrades routing quietly instead of failing. Absent or unparsable values
    fall back to the engines' common default.
    """
    container = serving_member(engine).container
    return int_flag(container, BLOCK_SIZE_FLAGS, DEFAULT_BLOCK_SIZE, low=1, high=1 << 20)


def plugin(plugin_type: str, parameters: dict[str, Any] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": plugin_type}
    if parameters is not None:
        entry["parameters"] = parameters
    return entry


def scoring_plugins(block_size: int) -> list[dict[str, Any]]:
    """Prefix-cache and queue scoring, and the picker, common to every profile."""
    return [
        # Declared explicitly, with auto-tuning off, so that the block size below is the one in
        # force: an implicit producer would silently run on the EPP's own defaults.
        plugin(
            PREFIX_PRODUCER,
            {
                "autoTune": False,
                "blockSizeTokens": block_size,
                "maxPrefixBlocksToMatch": 256,
                "lruCapacityPerServer": 31250,
            },
        ),
        plugin(PREFIX_SCORER),
        plugin(QUEUE_SCORER),
        plugin(PICKER),
    ]


def scheduling_profile(name: str, *leading: str) -> dict[str, Any]:
    """A profile running ``leading`` plugins (filters) then the shared picker and scorers."""
    refs: list[dict[str, Any]] = [{"pluginRef": ref} for ref in (*leading, PICKER)]
    refs.append({"pluginRef": PREFIX_SCORER, "weight": PREFIX_WEIGHT})
    refs.append({"pluginRef": QUEUE_SCORER, "weight": QUEUE_WEIGHT})
    return {"name": name, "plugins": refs}


def unified_config(block_size: int, api_version: str) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": CONFIG_KIND,
        # The EPP needs exactly one profile handler; naming it keeps the config self-contained.
        "plugins": [*scoring_plugins(block_size), plugin(SINGLE_PROFILE_HANDLER)],
        "schedulingProfiles": [scheduling_profile("default")],
    }


def config_text(config: dict[str, Any]) -> str:
    """The YAML the EPP reads; key order is the builders' order, so equal configs give equal
    text and the checksum below is stable."""
    return yaml.safe_dump(config, sort_keys=False, default_flow_style=False)


def config_checksum(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
