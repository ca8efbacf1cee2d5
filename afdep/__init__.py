"""afdep: expert-parallel MoE dispatch and combine for attention-FFN
disaggregation inside one NVLink domain. See docs/architecture.md.

The GPU-facing names load on first use, so tools that only compile kernels
(`python -m tools.build`, the fault engine's build stage) never import torch."""

from afdep.config import Settings, ConfigError
from afdep.jit import source_digest

__all__ = [
    "Buffer",
    "CollectBatch",
    "Settings",
    "ConfigError",
    "FfnBatch",
    "InvalidRouteError",
    "source_digest",
    "validate",
]
__version__ = "0.1.0"

_LAZY = {
    "Buffer": "afdep.buffer",
    "CollectBatch": "afdep.buffer",
    "FfnBatch": "afdep.buffer",
    "InvalidRouteError": "afdep.routes",
    "validate": "afdep.routes",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'afdep' has no attribute {name!r}")
