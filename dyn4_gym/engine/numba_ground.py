"""The built-in terrain kinds' ground for the kernels, and how a kind reaches them.

Every kernel samples the ground through one function on the packed ground ``T``, bound into the
kernels at compile time (numba_powertrain.with_sampler):
``sampler(b, X, Y, T, slope_step) -> (mu, h [m], dh/dX, dh/dY)`` at world point ``(X, Y)`` of row
``b``, the slopes in the world frame. ``slope_step`` is 0 where the plant needs no slopes, and
otherwise the torch plant's central-difference step ``SLOPE_STEP L`` [m] (corners.ground_under):
a sampler whose torch ground has an exact ``height_gradient`` returns that gradient, one without
takes central differences over that step, so the two engines agree to rounding.

A terrain kind runs in the kernels when it has a :class:`~dyn4_gym.ground.terrain.GroundKernel`:
its own (``TerrainKind(..., kernel=GroundKernel(sample, pack, unpack))``, docs/engines.md) or one
of the built-ins here, found by the kind's draw function (:func:`ground_kernel`), so a kind
re-registered under a built-in name with another draw is not mistaken for the built-in.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from numba import njit

from .._checks import GroundKernelError
from ..ground.samplers import Flat, Grid
from ..ground.terrain import GroundKernel, Terrain, draw_grid, draw_rough
from ..model.constants import DEFAULT_MU
from ..model.packed import TERRAIN_FIELDS
from .numba_plant import pack_terrain, rough_ground

__all__ = ["grid_ground", "pack_grid", "unpack_grid", "unpack_terrain", "ROUGH_KERNEL", "GRID_KERNEL",
           "ground_kernel"]


def unpack_terrain(T: tuple) -> Terrain:
    """The rough kind's packed ground as a torch :class:`Terrain` sharing memory."""
    t = torch.from_numpy
    return Terrain(**{n: t(a) for n, a in zip(TERRAIN_FIELDS, T)}, patch_edge=T[-1])


# ------------------------------------------------------------------------------ the grid kind
# T = (heights (nx, ny), mu (nx, ny), consts): one map for every row. Without a height map the
# heights are a 2 x 2 table of zeros (bilinear interpolation of zeros is exactly 0); without a
# friction map the friction is the constant consts[MU] (the draw's Flat(base_mu) + Grid).
_OX, _OY, _SPACING, _MU, _USE_MU_MAP = range(5)


def pack_grid(g, batch: int) -> tuple:
    """The grid kind's ground (``Grid``, or ``Flat(mu) + Grid`` without a friction map) for the kernels."""
    flat = None
    if not isinstance(g, Grid):  # Flat(base_mu) + Grid, as draw_grid builds it
        flat, g = g.layers
    heights = np.zeros((2, 2)) if g.heights is None else g.heights.detach().cpu().numpy().astype(np.float64)
    mu = np.zeros((2, 2)) if g.mu is None else g.mu.detach().cpu().numpy().astype(np.float64)
    consts = np.array([g.origin[0], g.origin[1], g.spacing, flat.mu if flat is not None else np.nan,
                       float(g.mu is not None)])
    return np.ascontiguousarray(heights), np.ascontiguousarray(mu), consts


def unpack_grid(T: tuple):
    """The torch ground of :func:`pack_grid`'s arrays (the same one draw_grid builds)."""
    heights, mu, c = T
    use_map = bool(c[_USE_MU_MAP])
    grid = Grid(heights=torch.from_numpy(heights), mu=torch.from_numpy(mu) if use_map else None,
                origin=(c[_OX], c[_OY]), spacing=c[_SPACING])
    return grid if use_map else Flat(mu=float(c[_MU])) + grid


@njit(cache=True, error_model="numpy", inline="always")
def _bilinear(table, gx, gy):
    """Grid._interp at grid coordinates ``(gx, gy)``: the edge values hold outside, the same
    operations in the same order as the torch sampler."""
    nx, ny = table.shape
    gx = min(max(gx, 0.0), nx - 1.0)
    gy = min(max(gy, 0.0), ny - 1.0)
    i0 = min(int(math.floor(gx)), nx - 2)
    j0 = min(int(math.floor(gy)), ny - 2)
    fx, fy = gx - i0, gy - j0
    return ((1 - fx) * (1 - fy) * table[i0, j0] + fx * (1 - fy) * table[i0 + 1, j0]
            + (1 - fx) * fy * table[i0, j0 + 1] + fx * fy * table[i0 + 1, j0 + 1])


@njit(cache=True, error_model="numpy", inline="always")
def _grid_height(X, Y, T):
    heights, _, c = T
    return _bilinear(heights, (X - c[_OX]) / c[_SPACING], (Y - c[_OY]) / c[_SPACING])


@njit(cache=True, error_model="numpy", inline="always")
def grid_ground(b, X, Y, T, slope_step):
    """The grid kind's sampler: bilinear height and friction (the same map for every row ``b``);
    Grid has no exact gradient, so the slopes are the torch plant's central differences."""
    _, mu_map, c = T
    if c[_USE_MU_MAP] != 0.0:
        mu = _bilinear(mu_map, (X - c[_OX]) / c[_SPACING], (Y - c[_OY]) / c[_SPACING])
    else:
        mu = c[_MU]
    mu = DEFAULT_MU + 1.0 * (mu - DEFAULT_MU)  # Ground.__call__'s cover blend, cover 1
    h = _grid_height(X, Y, T)
    if slope_step > 0.0:
        hx = (_grid_height(X + slope_step, Y + 0.0, T) - _grid_height(X - slope_step, Y - 0.0, T)) / (2 * slope_step)
        hy = (_grid_height(X + 0.0, Y + slope_step, T) - _grid_height(X - 0.0, Y - slope_step, T)) / (2 * slope_step)
        return mu, h, hx, hy
    return mu, h, 0.0, 0.0


# the built-ins' sources are part of the cache directory's key (engine/__init__.py): cached
ROUGH_KERNEL = GroundKernel(sample=rough_ground, pack=pack_terrain, unpack=unpack_terrain, cache=True)
GRID_KERNEL = GroundKernel(sample=grid_ground, pack=pack_grid, unpack=unpack_grid, shared=True, cache=True)
_BUILT_IN = {draw_rough: ROUGH_KERNEL, draw_grid: GRID_KERNEL}


def ground_kernel(kind) -> GroundKernel | None:
    """The kernels' ground of a registered terrain kind: its own, a built-in's, or None (the
    kind runs only on the torch engine)."""
    return kind.kernel if kind.kernel is not None else _BUILT_IN.get(kind.draw)


def is_built_in(kernel: GroundKernel) -> bool:
    """Whether ``kernel`` is one of the package's own (trusted: tested against torch), not a user's."""
    return kernel is ROUGH_KERNEL or kernel is GRID_KERNEL


@njit(cache=False, error_model="numpy")
def _checked_sample(b, X, Y, T, slope_step):
    """A user's sampler (the global ``user_sample``, bound by :func:`checked_sampler`) with its
    output checked: finite where the point is, or an error (issue 46: a sampler's NaN would
    otherwise end the row as the plant's own non-finite state, and nobody would know why)."""
    mu, h, hx, hy = user_sample(b, X, Y, T, slope_step)  # noqa: F821 (bound by rebuild)
    if math.isfinite(X) and math.isfinite(Y) and not (math.isfinite(mu) and math.isfinite(h)
                                                      and math.isfinite(hx) and math.isfinite(hy)):
        raise FloatingPointError("the ground sampler returned a non-finite value at a finite point")
    return mu, h, hx, hy


_CHECKED: dict = {}


def checked_sampler(kernel: GroundKernel):
    """The kernels' sampler of a ground: a built-in's as it is, a user's wrapped by
    :func:`_checked_sample` (one build per user sampler, so the kernels are built once)."""
    if is_built_in(kernel):
        return kernel.sample
    if kernel.sample not in _CHECKED:
        from .numba_plant import rebuild, sampler_tag

        _CHECKED[kernel.sample] = rebuild(_checked_sample, "_" + sampler_tag(kernel.sample), kernel.cache,
                                          user_sample=kernel.sample)
    return _CHECKED[kernel.sample]


def check_packed(name: str, packed, rows: int, shared: bool) -> tuple:
    """A kind's ``pack(ground, rows)`` output checked before the kernels read it (they run without
    bounds checks): a tuple of float64 arrays whose first axis is ``rows`` (any length when the
    ground is ``shared``) and finite numbers, every value finite. Raises
    :class:`~dyn4_gym._checks.GroundKernelError` naming the kind."""
    where = f"terrain kind {name!r}: GroundKernel.pack"
    if not isinstance(packed, tuple):
        raise GroundKernelError(f"{where} must return a tuple of arrays and numbers, got {type(packed).__name__}")
    for i, a in enumerate(packed):
        if isinstance(a, np.ndarray):
            if a.dtype != np.float64:
                raise GroundKernelError(f"{where}: item {i} must be float64, got {a.dtype}")
            if not shared and (a.ndim == 0 or a.shape[0] != rows):
                raise GroundKernelError(f"{where}: item {i} has shape {a.shape}; its first axis must be the {rows} rows packed")
            if not np.isfinite(a).all():
                raise GroundKernelError(f"{where}: item {i} holds non-finite values")
        elif isinstance(a, bool) or not isinstance(a, (int, float)) or not math.isfinite(a):
            raise GroundKernelError(f"{where}: item {i} must be a float64 array or a finite number, got {a!r}")
    return packed
