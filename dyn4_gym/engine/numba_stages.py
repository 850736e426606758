"""Each stage of the kernels over a batch, for the stage-by-stage equality tests
(tests/test_engine_stages.py): a drift between the engines names its stage.

Every face here runs one stage function of :mod:`numba_plant` / :mod:`numba_task` (the very
function the kernels inline) on rows whose inputs come from the torch engine's previous stage,
so each stage is compared on its own. The per-wheel scratch travels as ``W (B, N_SCRATCH, 4)``
indexed by :class:`numba_plant.W_`; the faces copy it, so their inputs are never changed.
Serial and uncached on purpose: they are test faces, not a hot path.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..model.books import N_BOOKS
from .numba_plant import (N_DW, books_row, forces_row, frames_row, grade_row, ground_under_row, lags_row,
                          loads_row, longitudinal_row, planar_row, pose_row, rest_row, vertical_row)
from .numba_task import _NT, _project, _uniforms, terms_row

__all__ = ["lags", "ground_under", "loads", "longitudinal", "frames", "forces", "grade", "planar", "vertical",
           "pose", "books", "rest", "project", "uniforms", "terms"]


@njit(error_model="numpy")
def lags(X, U, P, hdt):
    """``(B, 2)``: the lagged ``(delta, a)`` (stage 1)."""
    out = np.empty((X.shape[0], 2))
    for b in range(X.shape[0]):
        out[b, 0], out[b, 1] = lags_row(X[b], U[b, 0], U[b, 1], P, hdt)
    return out


@njit(error_model="numpy")
def ground_under(X, P, slopes, T, W):
    """Stage 2 into a copy of ``W``."""
    W = W.copy()
    for b in range(X.shape[0]):
        ground_under_row(b, X[b, 0], X[b, 1], X[b, 2], P, slopes, T, W[b])
    return W


@njit(error_model="numpy")
def loads(X, P, passive, W):
    """Stage 3's loads from ``W``'s ground into a copy of ``W``."""
    W = W.copy()
    for b in range(X.shape[0]):
        loads_row(X[b], P, passive, W[b])
    return W


@njit(error_model="numpy")
def longitudinal(X, A, P, drv, FD, W):
    """Stage 3's longitudinal forces from ``W``'s loads and friction; ``FD (B, 2)`` the driven forces."""
    W = W.copy()
    for b in range(X.shape[0]):
        longitudinal_row(X[b], A[b], P, drv, FD[b, 0], FD[b, 1], W[b])
    return W


@njit(error_model="numpy")
def frames(D, P, W):
    """Ackermann and the wheel frames at the lagged steer ``D (B,)``."""
    W = W.copy()
    for b in range(D.shape[0]):
        frames_row(D[b], P, W[b])
    return W


@njit(error_model="numpy")
def forces(X, D, A, P, grade, passive, drv, FD, T, W):
    """Stages 2-3 together (what the substep calls)."""
    W = W.copy()
    for b in range(X.shape[0]):
        ground_under_row(b, X[b, 0], X[b, 1], X[b, 2], P, passive or grade, T, W[b])
        forces_row(X[b], D[b], A[b], P, passive, drv, FD[b, 0], FD[b, 1], W[b])
    return W


@njit(error_model="numpy")
def grade(P, passive, hdt, W):
    """``(B, 3)``: the grade force ``(fx, fy, mz)`` from ``W``'s springs, rates and slopes."""
    out = np.empty((W.shape[0], 3))
    for b in range(W.shape[0]):
        out[b, 0], out[b, 1], out[b, 2] = grade_row(P, passive, hdt, W[b])
    return out


@njit(error_model="numpy")
def planar(X, P, hdt, BRAKING, EXT, W, kx):
    """Stages 4-5: ``((B, 5) = (vx+, vy+, r+, vx_free, drag), W)``; ``kx`` the road share
    (numba_plant.road_share)."""
    W = W.copy()
    out = np.empty((X.shape[0], 5))
    for b in range(X.shape[0]):
        r = planar_row(X[b], P, hdt, BRAKING[b], EXT[b, 0], EXT[b, 1], EXT[b, 2], W[b], kx)
        for k in range(5):
            out[b, k] = r[k]
    return out, W


@njit(error_model="numpy")
def vertical(X, P, hdt, W):
    """Stage 6: the next states' ``z .. thetad`` (the other entries copied from ``X``)."""
    Y = X.copy()
    for b in range(X.shape[0]):
        vertical_row(X[b], P, hdt, W[b], Y[b])
    return Y


@njit(error_model="numpy")
def pose(X, hdt, TW, DA):
    """Stage 7 from the new twist ``TW (B, 3)`` and the lags ``DA (B, 2)``."""
    Y = X.copy()
    for b in range(X.shape[0]):
        pose_row(X[b], hdt, TW[b, 0], TW[b, 1], TW[b, 2], DA[b, 0], DA[b, 1], Y[b])
    return Y


@njit(error_model="numpy")
def books(X, Y, P, grade, passive, drv, FD, hdt, PL, GR, FE, FZS, T, W):
    """The books of ``X -> Y`` from the step's forces (``W``), ``PL (B, 2) = (vx_free, drag)``,
    the grade force ``GR (B, 3)``, the external port ``FE (B, 3)`` and the loads' sum and
    ``sign(vx)`` ``FZS (B, 2)``: ``((B, N_BOOKS), (B, N_DW), W)`` (``W[MU1..SBY1]``: the ground at
    ``Y``)."""
    W = W.copy()
    bk = np.zeros((X.shape[0], N_BOOKS))
    dw = np.zeros((X.shape[0], N_DW))
    for b in range(X.shape[0]):
        books_row(b, X[b], Y[b], P, grade, passive, drv, FD[b, 0], FD[b, 1], hdt, PL[b, 0], PL[b, 1], GR[b, 0], GR[b, 1],
                  GR[b, 2], FE[b, 0], FE[b, 1], FE[b, 2], FZS[b, 0], FZS[b, 1], T, W[b], bk[b], dw[b])
    return bk, dw, W


@njit(error_model="numpy")
def rest(POSES, P, T, n_state):
    """``(B, n_state)``: the settled rest states at ``POSES (B, 3)`` = ``(X, Y, psi)`` on each row's
    rough ground (the reset's rest stage, :func:`numba_plant.rest_row`); the output starts as NaN,
    so an entry the stage leaves unwritten shows."""
    out = np.full((POSES.shape[0], n_state), np.nan)
    for b in range(POSES.shape[0]):
        rest_row(b, POSES[b, 0], POSES[b, 1], POSES[b, 2], P, T, out[b])
    return out


@njit(error_model="numpy")
def project(CXY, CH, IDX, PXY, spacing):
    """course.project per row: ``(j (B,), (B, 3) = (s, e, heading))``."""
    B = PXY.shape[0]
    j = np.empty(B, dtype=np.int64)
    out = np.empty((B, 3))
    for b in range(B):
        j[b], out[b, 0], out[b, 1], out[b, 2] = _project(CXY, CH, b, IDX[b], PXY[b, 0], PXY[b, 1], spacing)
    return j, out


@njit(error_model="numpy")
def uniforms(KEYS, EPISODES, n):
    """_rng.uniform: ``(B, n)`` from the streams ``(key, episode)``."""
    out = np.empty((KEYS.shape[0], n))
    for b in range(KEYS.shape[0]):
        _uniforms(KEYS[b], EPISODES[b], out[b])
    return out


@njit(error_model="numpy")
def terms(FIG, BOOKS, PTB, driver, PREV):
    """The built-in reward terms ``(B, len(TERM))`` from per-row figures ``FIG (B, N_FIG)``
    (model.task.STEP_FIGURES), the step's books and powertrain lines and the previous actions."""
    out = np.zeros((FIG.shape[0], _NT))
    for b in range(FIG.shape[0]):
        terms_row(out[b], FIG[b], BOOKS[b], PTB[b], PREV[b], driver)
    return out
