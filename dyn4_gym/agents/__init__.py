"""Controllers and trainers for the environments."""

from .classical import PurePursuit, PurePursuitParams
from .shac import SHAC, CheckpointError, SHACConfig

__all__ = ["PurePursuit", "PurePursuitParams", "SHAC", "SHACConfig", "CheckpointError"]
