"""Controllers and trainers for the environments."""

from .classical import PurePursuit, PurePursuitParams
from .pretrained import pretrained
from .shac import SHAC, CheckpointError, SHACConfig, shac_published

__all__ = ["PurePursuit", "PurePursuitParams", "SHAC", "SHACConfig", "shac_published", "CheckpointError", "pretrained"]
