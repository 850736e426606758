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
from .numba_plant import (N_DW, STAGE_WRITES, Substep, books_row, forces_row, frames_row, grade_row, ground_row,
                          lags_row, loads_row, longitudinal_row, planar_row, pose_row, rest_row, vertical_row)
from .numba_powertrain import N_PF, forces_row as pt_forces_row, select_gear_row
from .numba_task import _NT, _project, _uniforms, terms_row

__all__ = ["STAGES", "stage", "forces", "books", "gear", "powertrain_forces", "rest", "project", "uniforms", "terms"]


def _face(fn):
    """The batch face of the stage ``fn(m, x, y, W, D)``: ``(P, T, hdt, grade, passive, drv, X, Y,
    W, D) -> (Y, W, D)``, each row's stage run on copies of ``Y (B, n)``, ``W (B, N_SCRATCH, 4)``
    and ``D (B, N_SD)``."""

    @njit(error_model="numpy")
    def face(P, T, hdt, grade, passive, drv, X, Y, W, D):
        Y, W, D = Y.copy(), W.copy(), D.copy()
        for b in range(X.shape[0]):
            fn(Substep(b, P, T, hdt, grade, passive, drv, False), X[b], Y[b], W[b], D[b])
        return Y, W, D

    return face


# every stage of the substep by its name in numba_plant.STAGE_WRITES, and stages 2-3 as the substep calls them
STAGES = {"ground": ground_row, "lags": lags_row, "loads": loads_row, "frames": frames_row,
          "longitudinal": longitudinal_row, "grade": grade_row, "planar": planar_row, "vertical": vertical_row,
          "pose": pose_row}
assert set(STAGES) | {"books"} == set(STAGE_WRITES)
_FACES = {name: _face(fn) for name, fn in STAGES.items()}
forces = _face(forces_row)


def stage(name: str, P, T, hdt, grade, passive, drv, X, Y, W, D):
    """Run the stage ``name`` (:data:`STAGES`) over a batch: ``(Y, W, D)``, copies."""
    return _FACES[name](P, T, hdt, grade, passive, drv, X, Y, W, D)


@njit(error_model="numpy")
def books(P, T, hdt, grade, passive, drv, X, Y, W, D):
    """The books of ``X -> Y`` from the step's forces (``W``) and data (``D``): ``((B, N_BOOKS),
    (B, N_DW), W)`` (``W[MU1..SBY1]``: the ground at ``Y``); the lines start as NaN."""
    W = W.copy()
    bk = np.full((X.shape[0], N_BOOKS), np.nan)
    dw = np.full((X.shape[0], N_DW), np.nan)
    for b in range(X.shape[0]):
        books_row(Substep(b, P, T, hdt, grade, passive, drv, True), X[b], Y[b], W[b], D[b], bk[b], dw[b])
    return bk, dw, W


@njit(error_model="numpy")
def gear(S, DIRECTION, VX, Q, hdt):
    """The powertrain's stage 1 (numba_powertrain.select_gear_row) on a copy of the states ``S (B, N_PT)``."""
    S = S.copy()
    for b in range(S.shape[0]):
        select_gear_row(S[b], DIRECTION[b], VX[b], Q, hdt)
    return S


@njit(error_model="numpy")
def powertrain_forces(S, THROTTLE, BRAKE, VX, Q, maps):
    """The powertrain's stages 2-4 (numba_powertrain.forces_row): ``(B, N_PF)`` (numba_powertrain.PF),
    starting as NaN so an entry the stage leaves unwritten shows."""
    out = np.full((S.shape[0], N_PF), np.nan)
    for b in range(S.shape[0]):
        pt_forces_row(S[b], THROTTLE[b], BRAKE[b], VX[b], Q, maps, out[b])
    return out


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
