"""afdep: expert-parallel MoE dispatch and combine for attention-FFN
disaggregation inside one NVLink domain. See docs/architecture.md."""

from afdep._build import source_digest
from afdep.buffer import Buffer, CollectBatch, FfnBatch
from afdep.config import Config, ConfigError
from afdep.routes import InvalidRouteError, validate

__all__ = [
    "Buffer",
    "CollectBatch",
    "Config",
    "ConfigError",
    "FfnBatch",
    "InvalidRouteError",
    "source_digest",
    "validate",
]
__version__ = "0.1.0"
