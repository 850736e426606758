"""A minimum-curvature racing line inside a course's corridor (issue 44).

The line is the centre line moved sideways along its normals, ``P_i = C_i + n_i N_i``, with the
offsets ``n`` [m] (left +) chosen to minimise the line's squared curvature, approximated as the
squared second difference of its points, ``sum_i |P_{i-1} - 2 P_i + P_{i+1}|^2``, within
``|n_i| <= bound``. That is the quadratic programme of Heilmeier et al., "Minimum curvature
trajectory planning and control for an autonomous race car" (Vehicle System Dynamics 58(10),
2020; TUM's global race trajectory optimisation), written with finite differences in place of
their cubic splines: on a centre line sampled every metre the two agree to the sampling.
The objective is quadratic in ``n`` (``|A n + b|^2``), the bounds a box, so the programme is
convex; it is solved here exactly by the primal active-set method (:func:`solve_box_qp`;
tests/test_racing_line.py checks its KKT conditions).

Everything here is plain numpy on one course; :class:`dyn4_gym.agents.race.RacingLine` plans a
batch with it and tracks the line.
"""

from __future__ import annotations

import numpy as np

__all__ = ["normals", "curvature_system", "solve_box_qp", "min_curvature_offsets", "line_geometry"]


def normals(heading: np.ndarray) -> np.ndarray:
    """Unit left normals ``(N, 2)`` of a line with headings ``heading (N,)`` [rad, CCW from +X]."""
    h = np.asarray(heading, dtype=np.float64)
    return np.stack((-np.sin(h), np.cos(h)), -1)


def curvature_system(xy: np.ndarray, normal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(H, f)`` of the line's curvature objective ``|A n + b|^2 = n' H n + 2 f' n + const``:
    ``A`` stacks the second differences of the points' x and y along the offsets ``n``, ``b`` the
    centre line's own. ``xy (N, 2)`` [m], ``normal (N, 2)`` unit; ``N >= 3``."""
    c = np.asarray(xy, dtype=np.float64)
    nrm = np.asarray(normal, dtype=np.float64)
    n = c.shape[0]
    if n < 3 or c.shape != (n, 2) or nrm.shape != (n, 2):
        raise ValueError(f"curvature_system needs (N, 2) points and normals with N >= 3, got {c.shape}, {nrm.shape}")
    d2 = np.zeros((n - 2, n))
    i = np.arange(n - 2)
    d2[i, i], d2[i, i + 1], d2[i, i + 2] = 1.0, -2.0, 1.0
    a = np.concatenate((d2 * nrm[:, 0], d2 * nrm[:, 1]))  # columns scaled: D2 diag(N_x), D2 diag(N_y)
    b = np.concatenate((d2 @ c[:, 0], d2 @ c[:, 1]))
    return a.T @ a, a.T @ b


def solve_box_qp(h: np.ndarray, f: np.ndarray, lo, hi, ridge: float = 1e-10, tol: float = 1e-10,
                 max_iter: int = 5_000) -> np.ndarray:
    """``argmin 0.5 x' H x + f' x`` subject to ``lo <= x <= hi`` (``H`` symmetric positive
    semi-definite), by the primal active-set method for convex quadratic programmes (Nocedal and
    Wright, "Numerical Optimization", 2nd ed., algorithm 16.3), which ends in finitely many steps
    at the exact minimiser. It starts from :func:`_active_set_guess`, with the bounds it touches
    as the working set, then steps on the free entries, adding a bound that
    blocks a step and dropping one whose multiplier has the wrong sign. A ridge of ``ridge`` times
    ``H``'s largest diagonal entry makes the minimiser unique where the objective leaves an entry
    free (on a straight, the smallest offsets win)."""
    h = np.asarray(h, dtype=np.float64)
    f = np.asarray(f, dtype=np.float64)
    lo = np.broadcast_to(np.asarray(lo, dtype=np.float64), f.shape)
    hi = np.broadcast_to(np.asarray(hi, dtype=np.float64), f.shape)
    if np.any(lo > hi) or not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        raise ValueError("solve_box_qp: the bounds must be finite with lo <= hi")
    scale = float(np.max(np.diag(h)))
    if not np.isfinite(scale) or scale <= 0.0:
        raise ValueError("solve_box_qp: H needs a positive, finite diagonal")
    h = h / scale + ridge * np.eye(f.size)
    f = f / scale
    pinned = lo == hi
    x = _active_set_guess(h, f, lo, hi)
    g = h @ x + f
    # the working set: +1 an upper bound held, -1 a lower one, 0 free
    side = np.where(pinned | ((x >= hi) & (g <= 0)), 1, np.where((x <= lo) & (g >= 0), -1, 0))
    stationary = False  # x minimises the objective over the free entries (after a full step)
    for _ in range(max_iter):
        free = side == 0
        g = h @ x + f
        if stationary or not free.any():
            # multipliers of the working set: >= 0 where the bound rightly holds the entry
            lam = np.where(side > 0, -g, g)
            lam[free | pinned] = np.inf
            worst = int(np.argmin(lam))
            if lam[worst] >= -tol:
                return x
            side[worst] = 0  # this bound holds the entry back the wrong way: let it go
            stationary = False
            continue
        p = np.zeros_like(x)
        p[free] = np.linalg.solve(h[np.ix_(free, free)], -g[free])
        with np.errstate(divide="ignore", invalid="ignore"):
            room = np.where(p > 0, (hi - x) / p, np.where(p < 0, (lo - x) / p, np.inf))
        room[~free] = np.inf
        block = int(np.argmin(room))
        alpha = min(1.0, float(room[block]))
        x = np.clip(x + alpha * p, lo, hi)
        stationary = alpha >= 1.0
        if not stationary:
            side[block] = 1 if p[block] > 0 else -1
            x[block] = hi[block] if p[block] > 0 else lo[block]
    raise RuntimeError(f"solve_box_qp did not finish in {max_iter} active-set steps")


def _active_set_guess(h, f, lo, hi, passes: int = 30) -> np.ndarray:
    """A feasible start near the minimiser: a few passes of the primal-dual active set strategy
    (Hintermueller, Ito and Kunisch, SIAM J. Optim. 13(3), 2002), which guesses the bounds that
    hold all at once (where the primal method adds them one by one) but may cycle on a matrix
    like this one, so it only starts the exact method; clipped into the box."""
    x = np.clip(np.linalg.solve(h, -f), lo, hi)
    lam = -(h @ x + f)
    last = None
    for _ in range(passes):
        up = lam + (x - hi) > 0
        low = (lam + (x - lo) < 0) & ~up
        key = (up.tobytes(), low.tobytes())
        if key == last:
            break
        last = key
        free = ~(up | low)
        x = np.where(up, hi, np.where(low, lo, 0.0))
        if free.any():
            x[free] = np.linalg.solve(h[np.ix_(free, free)], -f[free] - h[np.ix_(free, ~free)] @ x[~free])
        lam = np.where(free, 0.0, -(h @ x + f))
    return np.clip(x, lo, hi)


def min_curvature_offsets(xy: np.ndarray, heading: np.ndarray, bound, fix_start: bool = True) -> np.ndarray:
    """The offsets ``n (N,)`` [m, left +] of the minimum-curvature line inside ``|n| <= bound``
    (a scalar or ``(N,)`` [m]; or ``(N, 2)``: ``-bound[:, 0] <= n <= bound[:, 1]``, the room
    right and left of each point) from the centre line ``xy (N, 2)`` with headings ``heading
    (N,)``. ``fix_start`` holds the first point on the centre line, where the car starts."""
    h, f = curvature_system(xy, normals(heading))
    n = h.shape[0]
    bound = np.asarray(bound, dtype=np.float64)
    bound = (bound if bound.shape == (n, 2) else np.broadcast_to(bound[..., None], (n, 2))).copy()
    if np.any(bound < 0) or not np.all(np.isfinite(bound)):
        raise ValueError("min_curvature_offsets: the bound must be finite and >= 0")
    lo, hi = -bound[:, 0], bound[:, 1].copy()
    if fix_start:
        lo[0] = hi[0] = 0.0
    return solve_box_qp(h, f, lo, hi)


def line_geometry(xy: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A polyline's cumulative arc length ``(N,)`` [m], its segment lengths ``(N - 1,)`` [m] and
    its signed curvature ``(N,)`` [1/m] at each point: the turn between the point's two segments
    over their mean length (the neighbour's at the ends)."""
    p = np.asarray(xy, dtype=np.float64)
    d = np.diff(p, axis=0)
    ds = np.hypot(d[:, 0], d[:, 1])
    heading = np.unwrap(np.arctan2(d[:, 1], d[:, 0]))
    k = np.diff(heading) / (0.5 * (ds[1:] + ds[:-1]))
    kappa = np.concatenate(([k[0]], k, [k[-1]]))
    return np.concatenate(([0.0], np.cumsum(ds))), ds, kappa
