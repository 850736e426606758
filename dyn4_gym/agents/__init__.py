"""Controllers and trainers for the environments."""

from .classical import PurePursuit, PurePursuitParams
from .shac import SHAC, SHACConfig

__all__ = ["PurePursuit", "PurePursuitParams", "SHAC", "SHACConfig"]
