"""A counter-based random number generator, vectorised over environments.

Each environment row draws from its own stream ``(key, episode)``, so a row's episode is the same
whatever the batch around it: the vector env's row ``i`` seeded with ``s + i`` equals a single env
seeded with ``s + i``. Both the key and the episode counter enter with all 64 bits: the stream
is two 32-bit words, each a chain of Chris Wellons' ``lowbias32`` hash over the four 32-bit
halves (each step a bijection, so two pairs that differ in any bit give different words), and
each uniform takes 53 bits from both words. The hashes run on int64 tensors with the
multiplications split into 16-bit halves so no product overflows.
"""

from __future__ import annotations

import torch

from .model.constants import DRAW_SALT, HASH_MASK, HASH_MUL, STREAM_SALTS

__all__ = ["hash32", "uniform", "key_of_seed"]

_MASK = HASH_MASK


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """``(x * c) mod 2^32`` for ``0 <= x, c < 2^32`` without int64 overflow."""
    lo = x & 0xFFFF
    hi = x >> 16
    return (lo * c + (((hi * c) & 0xFFFF) << 16)) & _MASK


def hash32(x: torch.Tensor) -> torch.Tensor:
    """``lowbias32``: a 32-bit integer hash with good avalanche, elementwise on int64 tensors."""
    x = x & _MASK
    x = x ^ (x >> 16)
    x = _mul32(x, HASH_MUL[0])
    x = x ^ (x >> 15)
    x = _mul32(x, HASH_MUL[1])
    return x ^ (x >> 16)


def key_of_seed(seed: int) -> int:
    """The int64 stream key of a seed in ``[0, 2^64)`` (two's complement above ``2^63``)."""
    return seed - (1 << 64) if seed >= (1 << 63) else seed


def _stream(words, salt: int) -> torch.Tensor:
    h = hash32(words[0] ^ salt)
    for w in words[1:]:
        h = hash32(h ^ w)
    return h


def uniform(key: torch.Tensor, episode: torch.Tensor, n: int, dtype=torch.float64) -> torch.Tensor:
    """``(B, n)`` uniforms in ``(0, 1)`` for rows with stream ``key (B,)`` at ``episode (B,)`` (int64)."""
    words = (key & _MASK, (key >> 32) & _MASK, episode & _MASK, (episode >> 32) & _MASK)
    a = _stream(words, STREAM_SALTS[0]).unsqueeze(-1)
    b = _stream(words, STREAM_SALTS[1]).unsqueeze(-1)
    idx = torch.arange(n, dtype=torch.int64, device=key.device)
    x1 = hash32(hash32(a + idx) ^ b)
    x2 = hash32(hash32(b + idx + DRAW_SALT) ^ a)
    bits = (x1 >> 5) * (1 << 26) + (x2 >> 6)  # 27 + 26 = 53 bits
    return ((bits.to(torch.float64) + 0.5) / float(1 << 53)).to(dtype)
