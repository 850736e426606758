"""A batched ground sampler: each environment row has its own hills, friction patches and bumps.

Shapes: every tensor leads with the batch ``B``; queries are ``(B, *rest, 2)`` (the plant asks
for ``(B, 4, 2)`` wheel points). The formulas are the single samplers' (samplers.py): plane sine
waves for hills, ``tanh``-edged friction discs laid in order over a base friction, and
``height (1 - d^2 / r^2)^2`` bumps. Built by the environments from seeded draws; resets replace
rows by ``torch.where``, so no tensor in a graph is written in place.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from .samplers import Ground

__all__ = ["Terrain"]


@dataclass(frozen=True)
class Terrain(Ground):
    """Per-row hills ``(B, K)``, friction patches ``(B, P)`` and bumps ``(B, Q)``."""

    wave_kx: torch.Tensor  # (B, K) [rad/m]
    wave_ky: torch.Tensor  # (B, K)
    wave_amp: torch.Tensor  # (B, K) [m]
    wave_phase: torch.Tensor  # (B, K) [rad]
    base_mu: torch.Tensor  # (B,)
    patch_x: torch.Tensor  # (B, P) [m]
    patch_y: torch.Tensor  # (B, P)
    patch_r: torch.Tensor  # (B, P) [m]
    patch_mu: torch.Tensor  # (B, P)
    bump_x: torch.Tensor  # (B, Q) [m]
    bump_y: torch.Tensor  # (B, Q)
    bump_h: torch.Tensor  # (B, Q) [m]
    bump_r: torch.Tensor  # (B, Q) [m]
    patch_edge: float = 0.5  # [m] width of a patch's tanh edge

    def _b(self, t: torch.Tensor, xy: torch.Tensor) -> torch.Tensor:
        """``(B, K)`` -> ``(B, 1, ..., 1, K)`` against a query ``(B, *rest, 2)``."""
        return t.reshape(t.shape[0], *([1] * (xy.ndim - 2)), *t.shape[1:])

    def height(self, xy):
        X, Y = xy[..., 0:1], xy[..., 1:2]
        arg = X * self._b(self.wave_kx, xy) + Y * self._b(self.wave_ky, xy) + self._b(self.wave_phase, xy)
        h = (self._b(self.wave_amp, xy) * torch.sin(arg)).sum(-1)
        r2 = self._b(self.bump_r, xy) ** 2
        d2 = ((X - self._b(self.bump_x, xy)) ** 2 + (Y - self._b(self.bump_y, xy)) ** 2) / r2
        return h + (self._b(self.bump_h, xy) * (1.0 - d2.clamp_max(1.0)) ** 2).sum(-1)

    def friction(self, xy):
        X, Y = xy[..., 0], xy[..., 1]
        mu = self._b(self.base_mu, xy).expand_as(X)
        for j in range(self.patch_x.shape[1]):  # a few patches, in order; never a loop over rows
            px, py = self._b(self.patch_x[:, j], xy), self._b(self.patch_y[:, j], xy)
            r = self._b(self.patch_r[:, j], xy)
            d2 = (X - px) ** 2 + (Y - py) ** 2
            cover = 0.5 * (1.0 - torch.tanh((d2 - r * r) / (2.0 * r * self.patch_edge)))
            mu = mu + cover * (self._b(self.patch_mu[:, j], xy) - mu)
        return mu

    def detach(self) -> "Terrain":
        """The same terrain with its tensors cut from the autograd graph."""
        return Terrain(**{f.name: (getattr(self, f.name).detach() if isinstance(getattr(self, f.name), torch.Tensor)
                                   else getattr(self, f.name)) for f in fields(self)})

    def select(self, mask: torch.Tensor, other: "Terrain") -> "Terrain":
        """Rows of ``other`` where ``mask (B,)`` is true, of ``self`` elsewhere."""
        out = {}
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if isinstance(a, torch.Tensor):
                m = mask.reshape(-1, *([1] * (a.ndim - 1)))
                out[f.name] = torch.where(m, b, a)
            else:
                out[f.name] = a
        return Terrain(**out)
