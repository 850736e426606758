"""A counter-based random number generator, vectorised over environments.

Each environment row draws from its own stream ``(key, episode, index)``, so a row's episode is
the same whatever the batch around it: the vector env's row ``i`` seeded with ``s + i`` equals a
single env seeded with ``s + i``. The hash is Chris Wellons' ``lowbias32`` on 32-bit words held
in int64 tensors, with the multiplications split into 16-bit halves so no product overflows.
"""

from __future__ import annotations

import torch

__all__ = ["hash32", "uniform"]

_MASK = 0xFFFFFFFF


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """``(x * c) mod 2^32`` for ``0 <= x, c < 2^32`` without int64 overflow."""
    lo = x & 0xFFFF
    hi = x >> 16
    return (lo * c + (((hi * c) & 0xFFFF) << 16)) & _MASK


def hash32(x: torch.Tensor) -> torch.Tensor:
    """``lowbias32``: a 32-bit integer hash with good avalanche, elementwise on int64 tensors."""
    x = x & _MASK
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def uniform(key: torch.Tensor, episode: torch.Tensor, n: int, dtype=torch.float64) -> torch.Tensor:
    """``(B, n)`` uniforms in ``[0, 1)`` for rows with stream ``key (B,)`` at ``episode (B,)``."""
    idx = torch.arange(n, dtype=torch.int64, device=key.device)
    h = hash32(hash32(key ^ hash32(episode + 0x5BD1E995)).unsqueeze(-1) + idx)
    h = hash32(h ^ 0x27D4EB2F)
    return ((h.to(torch.float64) + 0.5) / 4294967296.0).to(dtype)
