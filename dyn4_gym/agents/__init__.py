"""Controllers and trainers for the environments."""

from .classical import PurePursuit, PurePursuitParams

__all__ = ["PurePursuit", "PurePursuitParams"]
