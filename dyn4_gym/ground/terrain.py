"""Batched terrains for the environments: a registry of terrain kinds, each drawn per row.

An environment row's ground is drawn at every reset by a *terrain kind*: a name, a frozen config
dataclass (its defaults, and a ``validate(path)`` that raises ``ConfigError`` with the dotted
path) and a ``draw(config, ctx)`` that turns the row's seeded uniforms ``ctx.u (B, n)`` and its
course into a batched ground sampler (queries ``(B, *rest, 2)``). Select a kind by name in the
env's config, ``gym.make("Dyn4Humvee-v1", ground={"kind": "grid", "heights": ...})``; add one from
outside the package with :func:`register_terrain` (MuJoCo Playground registers its randomizers
the same way).

A batched ground is a dataclass whose tensor fields lead with the batch ``B`` (so resets,
selects and ``detach`` are one tree map, :mod:`dyn4_gym._tree`); a class attribute ``SHARED``
names fields that all rows share (a grid's map). Any other ``Ground`` (a plain sampler) is shared
by all rows as it is.

Built-in kinds:

- ``"rough"`` (:class:`RoughConfig`, the default): rolling hills, friction discs near the course,
  bumps on it.
- ``"grid"`` (:class:`GridConfig`): a user's height and/or friction arrays, bilinear, the same
  for every row, laid in the world frame (the course starts at the origin heading +X).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Callable

import numpy as np
import torch

from .._checks import ConfigError, check_int_range, check_range
from ..model.constants import PATCH_EDGE
from ..model.packed import TERRAIN_FIELDS
from .samplers import Flat, Grid, Ground, bump_height, bump_slope, patch_cover

__all__ = ["Terrain", "DrawContext", "GroundKernel", "TerrainKind", "TERRAIN_KINDS", "register_terrain", "RoughConfig", "GridConfig",
           "terrain_config", "MAX_SLOPE", "check_slope"]


@dataclass(frozen=True, eq=False)
class Terrain(Ground):
    """The rough kind's batched ground: per-row hills ``(B, K)``, friction patches ``(B, P)``, bumps ``(B, Q)``."""

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
    patch_edge: float = PATCH_EDGE  # [m] width of a patch's tanh edge

    @staticmethod
    def _b(t: torch.Tensor, xy: torch.Tensor) -> torch.Tensor:
        """``(B, K)`` -> ``(B, 1, ..., 1, K)`` against a query ``(B, *rest, 2)``."""
        return t.reshape(t.shape[0], *([1] * (xy.ndim - 2)), *t.shape[1:])

    def height(self, xy):
        X, Y = xy[..., 0:1], xy[..., 1:2]
        b = self._b
        arg = X * b(self.wave_kx, xy) + Y * b(self.wave_ky, xy) + b(self.wave_phase, xy)
        h = (b(self.wave_amp, xy) * torch.sin(arg)).sum(-1)
        return h + bump_height(X, Y, b(self.bump_x, xy), b(self.bump_y, xy), b(self.bump_h, xy), b(self.bump_r, xy)).sum(-1)

    def height_gradient(self, xy):
        """Exact: the hills' ``amp cos(arg) (kx, ky)`` from the same phases, plus the bumps'."""
        X, Y = xy[..., 0:1], xy[..., 1:2]
        b = self._b
        kx, ky = b(self.wave_kx, xy), b(self.wave_ky, xy)
        c = b(self.wave_amp, xy) * torch.cos(X * kx + Y * ky + b(self.wave_phase, xy))
        gx, gy = bump_slope(X, Y, b(self.bump_x, xy), b(self.bump_y, xy), b(self.bump_h, xy), b(self.bump_r, xy))
        return (c * kx).sum(-1) + gx.sum(-1), (c * ky).sum(-1) + gy.sum(-1)

    def friction(self, xy):
        X, Y = xy[..., 0], xy[..., 1]
        mu = self._b(self.base_mu, xy).expand_as(X)
        for j in range(self.patch_x.shape[1]):  # a few patches, in order; never a loop over rows
            cover = patch_cover(X, Y, self._b(self.patch_x[:, j], xy), self._b(self.patch_y[:, j], xy),
                                self._b(self.patch_r[:, j], xy), self.patch_edge)
            mu = mu + cover * (self._b(self.patch_mu[:, j], xy) - mu)
        return mu


# the kernels take the rough kind's fields in the model layer's order (model/packed.py)
assert tuple(f.name for f in fields(Terrain) if f.name != "patch_edge") == TERRAIN_FIELDS


@dataclass(frozen=True)
class DrawContext:
    """What a terrain kind may use to draw ``B`` rows."""

    u: torch.Tensor  # (B, n) the rows' seeded uniforms in [0, 1), n = kind.n_uniforms(config)
    course_xy: torch.Tensor  # (B, N, 2) [m] the rows' centre lines
    course_heading: torch.Tensor  # (B, N) [rad]
    spacing: float  # [m] between centre-line points
    half_width: float  # [m] corridor half-width
    lead_in: float  # [m] straight start of the course

    @property
    def batch(self) -> int:
        return self.course_xy.shape[0]

    def on_course(self, frac: torch.Tensor, lo: float = 0.0, offset: torch.Tensor | None = None) -> torch.Tensor:
        """World points ``(B, k, 2)`` at course fractions ``frac (B, k)`` past ``lo`` metres, moved
        ``offset`` [m] (left +) off the centre line."""
        n = self.course_xy.shape[1]
        j = (lo / self.spacing + frac * (n - 1 - lo / self.spacing)).long().clamp(0, n - 1)
        pts = torch.gather(self.course_xy, 1, j.unsqueeze(-1).expand(*j.shape, 2))
        if offset is None:
            return pts
        th = torch.gather(self.course_heading, 1, j)
        return torch.stack((pts[..., 0] - offset * torch.sin(th), pts[..., 1] + offset * torch.cos(th)), -1)


@dataclass(frozen=True)
class GroundKernel:
    """A terrain kind's ground for the Numba engine (docs/engines.md, "Adding a terrain kind").

    - ``sample``: a Numba ``@njit`` function ``sample(b, X, Y, T, slope_step) -> (mu, h, dh/dX,
      dh/dY)``: friction, height [m] and world-frame slopes of row ``b``'s ground at world point
      ``(X, Y)`` [m], from the packed ground ``T``. ``slope_step`` is 0 where no slopes are needed;
      otherwise return the torch ground's ``height_gradient``, or, where it has none, central
      differences of the height over ``slope_step`` [m] (the torch plant's, corners.ground_under).
      It must give what the kind's torch ``Ground`` gives at the same point.
    - ``pack(ground, batch) -> tuple``: the kind's drawn ``Ground`` for ``batch`` rows as float64
      arrays (and plain floats), row ``b``'s data at index ``b`` of each array's first axis.
    - ``unpack(T) -> Ground``: the torch ground back, for rendering and inspection.
    - ``shared``: the ground is the same for every row and episode (the draw reads neither
      uniforms nor the course): packed once, ``b`` ignored, no per-row copy.
    - ``cache``: keep the kernels compiled with this sampler in Numba's disk cache. Only for a
      sampler that never changes under the same name (Numba checks only the kernels' own source
      files, so an edited sampler would run stale); False compiles once per process (~20 s).
    """

    sample: Callable
    pack: Callable
    unpack: Callable
    shared: bool = False
    cache: bool = False


@dataclass(frozen=True)
class TerrainKind:
    """A registered terrain kind: ``draw(config, ctx) -> batched Ground`` from ``n_uniforms(config)``
    draws per row; with ``kernel`` (:class:`GroundKernel`) it also runs on the Numba engine."""

    name: str
    config: type
    draw: Callable
    n_uniforms: Callable = field(default=None)  # None: no draws (a module-level function, so envs pickle)
    kernel: GroundKernel | None = None  # None: the torch engine only (unless it is a built-in kind)

    def __post_init__(self):
        if self.n_uniforms is None:
            object.__setattr__(self, "n_uniforms", _no_uniforms)


def _no_uniforms(config) -> int:
    return 0


TERRAIN_KINDS: dict[str, TerrainKind] = {}


def register_terrain(kind: TerrainKind, overwrite: bool = False) -> TerrainKind:
    """Make a terrain kind selectable by name (``ground={"kind": name, ...}``) in every env.

    ``kind.config`` must be a frozen dataclass with a ``kind`` field defaulting to ``kind.name``
    and a ``validate(path)`` method.
    """
    if not isinstance(kind, TerrainKind):
        raise TypeError("register_terrain takes a TerrainKind(name, config, draw, n_uniforms, kernel)")
    if kind.name in TERRAIN_KINDS and not overwrite:
        raise ValueError(f"a terrain kind named {kind.name!r} exists; pass overwrite=True to replace it")
    if getattr(kind.config(), "kind", None) != kind.name:
        raise ValueError(f"{kind.config.__name__}.kind must default to {kind.name!r}")
    TERRAIN_KINDS[kind.name] = kind
    return kind


# The steepest ground a built-in kind may draw: slope 2 (63 deg), past anything a wheeled vehicle
# drives (the Humvee's published grade is 60 %, slope 0.6). Steeper configs leave the plant's
# domain (20 m hills at a 1 m wavelength paid -5.5e7 a step) and are refused; up to slope 2 random
# driving at 5 and 20 m/s never paid worse than the termination penalty and a little more
# (measured: -20 to -21 a step at slopes 1 to 3). A registered kind's config may say how steep
# it gets with a ``max_slope()`` method, and is held to the same bound.
MAX_SLOPE = 2.0


def check_slope(path: str, config) -> None:
    """``ConfigError`` where ``config.max_slope()`` (if the kind has one) exceeds :data:`MAX_SLOPE`."""
    slope = getattr(config, "max_slope", None)
    if slope is None:
        return
    m = float(slope())
    if not m <= MAX_SLOPE:
        raise ConfigError(f"{path} draws ground as steep as slope {m:.3g} (rise over run); the plant is "
                          f"validated to slope {MAX_SLOPE:g} (63 deg): make it gentler (lower heights, longer "
                          "wavelengths, wider bumps)")


def terrain_config(kind: str, path: str):
    """The default config of terrain kind ``kind`` (ConfigError if it is not registered)."""
    if not isinstance(kind, str) or kind not in TERRAIN_KINDS:
        raise ConfigError(f"{path}.kind must be a registered terrain kind (known: {sorted(TERRAIN_KINDS)}), got {kind!r}")
    return TERRAIN_KINDS[kind].config()


# ---------------------------------------------------------------------------------------- rough
@dataclass(frozen=True)
class RoughConfig:
    """The default terrain: hills, friction patches on the course, bumps."""

    kind: str = "rough"
    base_mu: float = 0.8  # friction outside the patches (Humvee tire, dry road) [0.05, 3]
    hills_amplitude: float = 0.3  # [m] total amplitude of the rolling hills (0: level)
    hills_wavelength_min: float = 30.0  # [m]
    hills_wavelength_max: float = 90.0  # [m]
    n_hills: int = 3
    n_patches: int = 4  # friction discs centred near the course
    patch_mu_min: float = 0.4
    patch_mu_max: float = 1.0
    patch_radius_min: float = 4.0  # [m]
    patch_radius_max: float = 12.0  # [m]
    n_bumps: int = 4  # bumps on the course, within 1 m of its centre line
    bump_height_min: float = 0.04  # [m]
    bump_height_max: float = 0.10  # [m]
    bump_radius: float = 0.5  # [m]

    def validate(self, path: str) -> None:
        check_range(f"{path}.base_mu", self.base_mu, 0.05, 3.0)
        check_range(f"{path}.hills_amplitude", self.hills_amplitude, 0.0, 20.0)
        for name in ("hills_wavelength_min", "hills_wavelength_max"):
            check_range(f"{path}.{name}", getattr(self, name), 1.0, 1e5)
        for name in ("patch_mu_min", "patch_mu_max"):
            check_range(f"{path}.{name}", getattr(self, name), 0.05, 3.0)
        for name in ("patch_radius_min", "patch_radius_max"):
            check_range(f"{path}.{name}", getattr(self, name), 0.1, 1000.0)
        for name in ("bump_height_min", "bump_height_max"):
            check_range(f"{path}.{name}", getattr(self, name), 0.0, 1.0)
        check_range(f"{path}.bump_radius", self.bump_radius, 0.05, 50.0)
        for name in ("n_hills", "n_patches", "n_bumps"):
            check_int_range(f"{path}.{name}", getattr(self, name), 0, 64)
        for lo, hi in (("hills_wavelength_min", "hills_wavelength_max"), ("patch_mu_min", "patch_mu_max"),
                       ("patch_radius_min", "patch_radius_max"), ("bump_height_min", "bump_height_max")):
            if getattr(self, hi) < getattr(self, lo):
                raise ConfigError(f"{path}.{hi} must be >= {path}.{lo}")
        check_slope(path, self)

    @property
    def level(self) -> bool:
        """Whether every draw is level ground of friction ``base_mu``: no hill height, no friction
        patches, no bumps (the Flat tasks'; the kernels then skip sampling, engine.numba_plant.level_ground)."""
        return (self.n_hills == 0 or self.hills_amplitude == 0.0) and self.n_patches == 0 and self.n_bumps == 0

    def max_slope(self) -> float:
        """An upper bound of the ground's slope: the hills' (each component's amplitude is at most
        1.5 x its share, its slope amplitude x 2 pi / wavelength) plus a bump's, whose steepest
        slope is ``8 / (3 sqrt 3) h / r`` (the profile ``h (1 - d^2 / r^2)^2`` at ``d = r / sqrt 3``)."""
        hills = 1.5 * self.hills_amplitude * 2.0 * math.pi / self.hills_wavelength_min if self.n_hills else 0.0
        bumps = 8.0 / (3.0 * math.sqrt(3.0)) * self.bump_height_max / self.bump_radius if self.n_bumps else 0.0
        return hills + bumps


def _rough_uniforms(g: RoughConfig) -> int:
    return 4 * (g.n_hills + g.n_patches + g.n_bumps)


def draw_rough(g: RoughConfig, ctx: DrawContext) -> Terrain:
    """Hills (plane waves: direction, wavelength, amplitude, phase), discs of friction whose
    centres sit within a half-width of the course, and bumps within 1 m of its centre line."""
    B = ctx.batch
    dt, dev = ctx.course_xy.dtype, ctx.course_xy.device
    nh, npch, nb = 4 * g.n_hills, 4 * g.n_patches, 4 * g.n_bumps
    h = ctx.u[:, :nh].reshape(B, g.n_hills, 4)
    pt = ctx.u[:, nh:nh + npch].reshape(B, g.n_patches, 4)
    bt = ctx.u[:, nh + npch:nh + npch + nb].reshape(B, g.n_bumps, 4)
    lam = g.hills_wavelength_min + (g.hills_wavelength_max - g.hills_wavelength_min) * h[..., 0]
    ang = 2 * math.pi * h[..., 1]
    amp = g.hills_amplitude / max(g.n_hills, 1) * (0.5 + h[..., 2])
    ppts = ctx.on_course(pt[..., 0], 0.0, (pt[..., 1] - 0.5) * 2 * ctx.half_width)
    bpts = ctx.on_course(bt[..., 0], ctx.lead_in, (bt[..., 1] - 0.5) * 2.0)
    return Terrain(
        wave_kx=2 * math.pi / lam * torch.cos(ang), wave_ky=2 * math.pi / lam * torch.sin(ang),
        wave_amp=amp, wave_phase=2 * math.pi * h[..., 3],
        base_mu=torch.full((B,), g.base_mu, dtype=dt, device=dev),
        patch_x=ppts[..., 0], patch_y=ppts[..., 1],
        patch_r=g.patch_radius_min + (g.patch_radius_max - g.patch_radius_min) * pt[..., 2],
        patch_mu=g.patch_mu_min + (g.patch_mu_max - g.patch_mu_min) * pt[..., 3],
        bump_x=bpts[..., 0], bump_y=bpts[..., 1],
        bump_h=g.bump_height_min + (g.bump_height_max - g.bump_height_min) * bt[..., 2],
        bump_r=torch.full((B, g.n_bumps), g.bump_radius, dtype=dt, device=dev),
    )


# ----------------------------------------------------------------------------------------- grid
@dataclass(frozen=True)
class GridConfig:
    """A user's maps: ``heights`` [m] and/or ``mu`` as ``(nx, ny)`` arrays (nested lists or
    numpy), node ``(i, j)`` at ``origin + (i, j) * spacing`` [m] in the world frame; the edge
    values hold outside. Where ``mu`` is None the friction is ``base_mu``."""

    kind: str = "grid"
    heights: object = None
    mu: object = None
    origin: tuple = (-20.0, -200.0)  # [m]
    spacing: float = 1.0  # [m]
    base_mu: float = 0.8

    def __post_init__(self):
        # the config keeps its own read-only copies: writing into the caller's arrays later
        # changes neither this config's episodes nor what it was validated with
        for name in ("heights", "mu"):
            a = getattr(self, name)
            if a is None:
                continue
            try:
                arr = np.array(a, dtype=np.float64, copy=True)
            except (TypeError, ValueError, OverflowError):
                continue  # validate() says what is wrong with it
            arr.flags.writeable = False
            object.__setattr__(self, name, arr)

    def max_slope(self) -> float:
        """An upper bound of the bilinear map's slope: the largest node-to-node differences along
        each axis, combined, over the spacing (0 without heights)."""
        if self.heights is None:
            return 0.0
        h = np.asarray(self.heights, dtype=np.float64)
        gx = np.abs(np.diff(h, axis=0)).max() / self.spacing
        gy = np.abs(np.diff(h, axis=1)).max() / self.spacing
        return float(math.hypot(gx, gy))

    def validate(self, path: str) -> None:
        check_range(f"{path}.spacing", self.spacing, 0.01, 1000.0)
        check_range(f"{path}.base_mu", self.base_mu, 0.05, 3.0)
        if not (isinstance(self.origin, (tuple, list)) and len(self.origin) == 2):
            raise ConfigError(f"{path}.origin must be two numbers, got {self.origin!r}")
        for i, v in enumerate(self.origin):
            check_range(f"{path}.origin[{i}]", v, -1e7, 1e7)
        for name in ("heights", "mu"):
            a = getattr(self, name)
            if a is None:
                continue
            try:
                arr = np.asarray(a, dtype=np.float64)
            except (TypeError, ValueError):
                raise ConfigError(f"{path}.{name} must be a 2-D array of numbers") from None
            if arr.ndim != 2 or min(arr.shape) < 2:
                raise ConfigError(f"{path}.{name} must be a 2-D array of at least 2 x 2 nodes, got shape {arr.shape}")
            if not np.isfinite(arr).all():
                raise ConfigError(f"{path}.{name} must be finite")
            if name == "heights" and not (np.abs(arr) <= 1e4).all():
                raise ConfigError(f"{path}.heights must lie within +-1e4 m")
            if name == "mu" and not ((arr >= 0.05) & (arr <= 3.0)).all():
                raise ConfigError(f"{path}.mu must lie in [0.05, 3] everywhere")
        if self.heights is None and self.mu is None:
            raise ConfigError(f"{path} needs heights, mu, or both")
        check_slope(path, self)


def draw_grid(g: GridConfig, ctx: DrawContext) -> Ground:
    grid = Grid(heights=None if g.heights is None else np.array(g.heights, dtype=np.float64),  # writable copies
                mu=None if g.mu is None else np.array(g.mu, dtype=np.float64), origin=g.origin, spacing=g.spacing)
    return grid if g.mu is not None else Flat(mu=g.base_mu) + grid


register_terrain(TerrainKind("rough", RoughConfig, draw_rough, _rough_uniforms))
register_terrain(TerrainKind("grid", GridConfig, draw_grid))
