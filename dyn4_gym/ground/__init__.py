"""Ground samplers: friction and height under any world point.

A sampler maps world points ``xy`` of shape ``(..., 2)`` [m] to ``(mu, height)`` of shape
``(...)``: ``mu`` the tire-road peak friction coefficient (the tire's ``D = mu Fz``), ``height``
[m] up. Every sampler is torch code, so the terrain's gradient flows into the query points (and
into the sampler's own tensors). Samplers compose with ``+``: heights add, and each operand that
sets friction (``Flat``, ``MuSplit``, ``Grid`` with a friction map, any sampler given ``mu=``)
replaces the friction of those to its left, except a ``MuPatch``, which replaces it only inside
its disc. Where no operand sets it, ``mu`` is 0.8, the Humvee tire's dry value.

>>> g = Hills() + MuSplit(mu_left=0.8, mu_right=0.3) + Bump(x=10.0, y=0.9)

The environments draw a batched ground per row from a registered *terrain kind* (terrain.py):
``"rough"`` by default, ``"grid"`` from a user's arrays, and any kind added with
:func:`register_terrain` (with a :class:`GroundKernel`, it runs on the Numba engine too).
"""

from .samplers import DEFAULT_MU, Bump, Compose, Flat, Grid, Ground, Hills, MuPatch, MuSplit, Ramp
from .terrain import (TERRAIN_KINDS, DrawContext, GridConfig, GroundKernel, RoughConfig, Terrain, TerrainKind,
                      register_terrain, terrain_config)

__all__ = ["DEFAULT_MU", "Ground", "Flat", "MuSplit", "MuPatch", "Bump", "Hills", "Ramp", "Grid", "Compose", "Terrain",
           "TERRAIN_KINDS", "DrawContext", "GridConfig", "GroundKernel", "RoughConfig", "TerrainKind", "register_terrain",
           "terrain_config"]
