"""Ground sampler implementations (see the package docstring for the interface)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ..model.constants import DEFAULT_MU


__all__ = ["DEFAULT_MU", "Ground", "Flat", "MuSplit", "MuPatch", "Bump", "Hills", "Ramp", "Grid", "Compose",
           "bump_height", "patch_cover"]


def bump_height(X, Y, x0, y0, height, radius):
    """``height (1 - d^2 / radius^2)^2`` inside ``d < radius`` of ``(x0, y0)``, else 0 [m].

    The polynomial in ``d^2`` is C1 at its edge and has no ``sqrt`` at its top. All arguments
    broadcast (the single :class:`Bump` and the batched terrains share this formula).
    """
    d2 = ((X - x0) ** 2 + (Y - y0) ** 2) / radius**2
    return height * (1.0 - d2.clamp_max(1.0)) ** 2


def bump_slope(X, Y, x0, y0, height, radius):
    """The gradient ``(dh/dX, dh/dY)`` of :func:`bump_height`: ``-4 height (1 - d^2/r^2) (X - x0, Y - y0) / r^2``
    inside the disc, 0 outside (where the polynomial's slope meets 0: it is C1)."""
    dx, dy = X - x0, Y - y0
    f = -4.0 * height * (1.0 - ((dx**2 + dy**2) / radius**2).clamp_max(1.0)) / radius**2
    return f * dx, f * dy


def patch_cover(X, Y, x0, y0, radius, width):
    """How much a friction disc covers a point, 0..1: a ``tanh`` edge about ``width`` [m] wide
    at ``radius`` from ``(x0, y0)``, smooth in ``d^2`` (no ``sqrt`` at the centre)."""
    d2 = (X - x0) ** 2 + (Y - y0) ** 2
    return 0.5 * (1.0 - torch.tanh((d2 - radius * radius) / (2.0 * radius * width)))


def _check_xy(xy: torch.Tensor) -> None:
    if not isinstance(xy, torch.Tensor) or xy.shape[-1:] != (2,):
        raise ValueError(f"ground samplers take world points of shape (..., 2), got {getattr(xy, 'shape', type(xy))}")


def _positive(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and 0 < value < math.inf):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")


def _finite(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value)):
        raise ValueError(f"{name} must be a finite number, got {value!r}")


class Ground:
    """Base class: ``ground(xy) -> (mu, height)``; ``a + b`` composes."""

    def height(self, xy: torch.Tensor) -> torch.Tensor:  # (...,) [m]
        return torch.zeros_like(xy[..., 0])

    def friction(self, xy: torch.Tensor) -> torch.Tensor | None:  # (...,) or None: not set here
        return None

    def cover(self, xy: torch.Tensor) -> torch.Tensor | float:
        """Where this layer's friction applies, 0..1 (1 everywhere unless a patch says less)."""
        return 1.0

    def height_gradient(self, xy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The height's exact gradient ``(dh/dX, dh/dY)`` at ``xy`` (world frame), or None: the
        plant then takes central differences of :meth:`height` (plant/corners.ground_under)."""
        return None

    def __call__(self, xy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        _check_xy(xy)
        mu = self.friction(xy)
        base = torch.full_like(xy[..., 0], DEFAULT_MU)
        mu = base if mu is None else base + self.cover(xy) * (mu - base)
        return mu, self.height(xy)

    def __add__(self, other: "Ground") -> "Compose":
        if not isinstance(other, Ground):
            return NotImplemented
        left = self.layers if isinstance(self, Compose) else (self,)
        right = other.layers if isinstance(other, Compose) else (other,)
        return Compose(left + right)


def _mu_or_none(mu: float | None, xy: torch.Tensor) -> torch.Tensor | None:
    return None if mu is None else torch.full_like(xy[..., 0], mu)


@dataclass(frozen=True)
class Compose(Ground):
    """Several layers: heights add; each friction layer overlays those to its left where it covers."""

    layers: tuple = ()

    def __post_init__(self):
        if not self.layers or not all(isinstance(g, Ground) for g in self.layers):
            raise ValueError("Compose needs one or more Ground layers")

    def height(self, xy):
        return sum(g.height(xy) for g in self.layers)

    def friction(self, xy):
        mu = None
        for g in self.layers:
            mu_g = g.friction(xy)
            if mu_g is None:
                continue
            mu = mu_g if mu is None else mu + g.cover(xy) * (mu_g - mu)
        return mu

    def cover(self, xy):
        return 1.0

    def height_gradient(self, xy):
        parts = [g.height_gradient(xy) for g in self.layers]
        if any(q is None for q in parts):
            return None
        return sum(q[0] for q in parts), sum(q[1] for q in parts)


@dataclass(frozen=True)
class Flat(Ground):
    """Level ground at ``height`` [m] with friction ``mu`` everywhere."""

    mu: float = DEFAULT_MU
    height0: float = 0.0

    def __post_init__(self):
        _positive("Flat.mu", self.mu)
        _finite("Flat.height0", self.height0)

    def height(self, xy):
        return torch.full_like(xy[..., 0], self.height0)

    def friction(self, xy):
        return torch.full_like(xy[..., 0], self.mu)

    def height_gradient(self, xy):
        zero = torch.zeros_like(xy[..., 0])
        return zero, zero


@dataclass(frozen=True)
class MuSplit(Ground):
    """``mu_left`` where ``Y > y0``, ``mu_right`` where ``Y < y0``; a ``tanh`` edge of ``width`` [m]."""

    mu_left: float = 0.8
    mu_right: float = 0.3
    y0: float = 0.0
    width: float = 0.02

    def __post_init__(self):
        _positive("MuSplit.mu_left", self.mu_left)
        _positive("MuSplit.mu_right", self.mu_right)
        _finite("MuSplit.y0", self.y0)
        _positive("MuSplit.width", self.width)

    def friction(self, xy):
        s = 0.5 * (1.0 + torch.tanh((xy[..., 1] - self.y0) / self.width))
        return self.mu_right + (self.mu_left - self.mu_right) * s


@dataclass(frozen=True)
class MuPatch(Ground):
    """A disc of friction ``mu`` (centre ``x, y``, ``radius`` [m]) laid over the layers before it.

    Its edge is a ``tanh`` of about ``width`` [m]; outside it the friction below shows through
    (on its own: the default 0.8).
    """

    x: float = 0.0
    y: float = 0.0
    radius: float = 5.0
    mu: float = 0.4
    width: float = 0.2

    def __post_init__(self):
        for n in ("x", "y"):
            _finite(f"MuPatch.{n}", getattr(self, n))
        for n in ("radius", "mu", "width"):
            _positive(f"MuPatch.{n}", getattr(self, n))

    def friction(self, xy):
        return torch.full_like(xy[..., 0], self.mu)

    def cover(self, xy):
        return patch_cover(xy[..., 0], xy[..., 1], self.x, self.y, self.radius, self.width)


@dataclass(frozen=True)
class Bump(Ground):
    """A smooth bump ``height (1 - d^2/radius^2)^2`` for ``d < radius`` around ``(x, y)`` [m].

    The polynomial in ``d^2`` is C1 at its edge and has no ``sqrt`` at its top.
    """

    x: float = 10.0
    y: float = 0.0
    height0: float = 0.10
    radius: float = 0.5
    mu: float | None = None

    def __post_init__(self):
        _finite("Bump.x", self.x)
        _finite("Bump.y", self.y)
        _finite("Bump.height0", self.height0)
        _positive("Bump.radius", self.radius)
        if self.mu is not None:
            _positive("Bump.mu", self.mu)

    def height(self, xy):
        return bump_height(xy[..., 0], xy[..., 1], self.x, self.y, self.height0, self.radius)

    def friction(self, xy):
        return _mu_or_none(self.mu, xy)


@dataclass(frozen=True)
class Hills(Ground):
    """Rolling hills: a sum of ``n_waves`` plane sine waves [m], seeded.

    Wave ``k`` has amplitude ``amplitude / n_waves``, a wavelength drawn in
    ``[wavelength / 2, wavelength * 1.5]``, a random direction and phase (``numpy`` generator
    seeded with ``seed``, so the same arguments give the same hills).
    """

    amplitude: float = 0.5
    wavelength: float = 40.0
    n_waves: int = 3
    seed: int = 0
    mu: float | None = None
    _waves: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        _finite("Hills.amplitude", self.amplitude)
        _positive("Hills.wavelength", self.wavelength)
        if not (isinstance(self.n_waves, int) and self.n_waves >= 1):
            raise ValueError("Hills.n_waves must be a positive int")
        if self.mu is not None:
            _positive("Hills.mu", self.mu)
        rng = np.random.default_rng(self.seed)
        lam = rng.uniform(0.5, 1.5, self.n_waves) * self.wavelength
        ang = rng.uniform(0.0, 2 * np.pi, self.n_waves)
        phase = rng.uniform(0.0, 2 * np.pi, self.n_waves)
        kx, ky = 2 * np.pi / lam * np.cos(ang), 2 * np.pi / lam * np.sin(ang)
        object.__setattr__(self, "_waves", (tuple(kx), tuple(ky), tuple(phase)))

    def height(self, xy):
        kx, ky, ph = (xy.new_tensor(v) for v in self._waves)
        arg = xy[..., 0, None] * kx + xy[..., 1, None] * ky + ph
        return (self.amplitude / self.n_waves) * torch.sin(arg).sum(-1)

    def friction(self, xy):
        return _mu_or_none(self.mu, xy)


@dataclass(frozen=True)
class Ramp(Ground):
    """A constant slope: ``height = slope (X - x0)``, rising along +X."""

    slope: float = 0.05
    x0: float = 0.0
    mu: float | None = None

    def __post_init__(self):
        _finite("Ramp.slope", self.slope)
        _finite("Ramp.x0", self.x0)
        if self.mu is not None:
            _positive("Ramp.mu", self.mu)

    def height(self, xy):
        return self.slope * (xy[..., 0] - self.x0)

    def friction(self, xy):
        return _mu_or_none(self.mu, xy)


class Grid(Ground):
    """Bilinear height and/or friction maps on a regular grid.

    ``heights`` and ``mu`` are arrays (numpy or torch) of shape ``(nx, ny)``: node ``(i, j)`` sits
    at ``origin + (i, j) * spacing`` [m]. Outside the grid the edge values hold. Either map may be
    None (height 0; friction not set). Torch maps keep their autograd graph, so gradients flow
    into them as well as into the query points. Bilinear interpolation has kinks on the grid
    lines: check gradients off the nodes.
    """

    def __init__(self, heights=None, mu=None, origin=(0.0, 0.0), spacing=1.0):
        if heights is None and mu is None:
            raise ValueError("Grid needs a height map, a friction map, or both")
        _positive("Grid.spacing", spacing)
        self.heights = self._as_map("heights", heights)
        self.mu = self._as_map("mu", mu)
        if self.mu is not None and not bool((self.mu > 0).all()):
            raise ValueError("Grid.mu must be positive everywhere")
        self.origin = (float(origin[0]), float(origin[1]))
        self.spacing = float(spacing)

    @staticmethod
    def _as_map(name, a):
        if a is None:
            return None
        t = a if isinstance(a, torch.Tensor) else torch.as_tensor(np.asarray(a, dtype=np.float64))
        if t.ndim != 2 or t.shape[0] < 2 or t.shape[1] < 2:
            raise ValueError(f"Grid.{name} must be a 2-D array of at least 2 x 2 nodes, got shape {tuple(t.shape)}")
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"Grid.{name} must be finite")
        return t

    def _interp(self, table: torch.Tensor, xy: torch.Tensor) -> torch.Tensor:
        table = table.to(dtype=xy.dtype, device=xy.device)
        nx, ny = table.shape
        gx = ((xy[..., 0] - self.origin[0]) / self.spacing).clamp(0.0, nx - 1.0)
        gy = ((xy[..., 1] - self.origin[1]) / self.spacing).clamp(0.0, ny - 1.0)
        i0 = gx.detach().floor().clamp(max=nx - 2).long()
        j0 = gy.detach().floor().clamp(max=ny - 2).long()
        fx, fy = gx - i0, gy - j0
        flat = table.reshape(-1)
        def at(i, j):
            return flat[i * ny + j]
        return ((1 - fx) * (1 - fy) * at(i0, j0) + fx * (1 - fy) * at(i0 + 1, j0)
                + (1 - fx) * fy * at(i0, j0 + 1) + fx * fy * at(i0 + 1, j0 + 1))

    def height(self, xy):
        if self.heights is None:
            return torch.zeros_like(xy[..., 0])
        return self._interp(self.heights, xy)

    def friction(self, xy):
        return None if self.mu is None else self._interp(self.mu, xy)

    def __repr__(self):
        return f"Grid(shape={tuple((self.heights if self.heights is not None else self.mu).shape)}, origin={self.origin}, spacing={self.spacing})"
