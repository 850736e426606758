"""The four-wheel plant's substep in Numba: the forward engine for CPU (docs/plant.md, "The step").

The same equations as :func:`dyn4_gym.plant.dyn4_step` (the torch reference), stage by stage and
in the same order, compiled with ``@njit(cache=True, error_model="numpy")`` and parallel over rows (``prange``), in
float64 with no allocation per wheel. :func:`dyn4_step_np` steps a batch of states on the batched
terrain of the ``"rough"`` kind (hills, friction discs, bumps; ``Flat`` is the kind with no hills,
patches or bumps) and returns the next states and every books line. tests/test_engine.py holds
the two engines together (1e-12 relative, float64) and to the golden file.

Nothing compiles at import; the first call compiles (cached on disk by Numba for the next
process).
"""

from __future__ import annotations

import dataclasses
import math
import types

import numpy as np

from numba import njit, prange

from ..plant.corners import FLOOR_SHARE, SLOPE_STEP
from ..plant.planar import N_SECANT
from ..plant.tire import A_BLEND

__all__ = ["PARAM_NAMES", "pack_params", "pack_terrain", "dyn4_step_np", "BOOK_ORDER"]

# scalar parameters in the packed vector, then the nine per-wheel ones (4 each)
PARAM_NAMES = ("m", "Iz", "h", "g", "eps_load", "delta_max", "a_drive", "a_brake", "power", "tau_steer",
               "tau_drive", "c_drag", "f_roll", "v_lat", "v_roll", "Ix", "Iy", "L")
WHEEL_NAMES = ("x_w", "y_w", "Fz0", "B", "C", "E", "drive_share", "k", "damp")
_NS = len(PARAM_NAMES)
BOOK_ORDER = ("dH", "supplied", "dissipated", "tire", "damper", "drag", "lever", "grade", "ground", "limiter",
              "external", "residual")
DEFAULT_MU = 0.8


def pack_params(p) -> tuple:
    """``(vector (18 + 36,), grade_force, passive)`` of a :class:`Dyn4Params` with scalar fields."""
    vals = []
    for n in PARAM_NAMES:
        v = np.asarray((p.lf + p.lr) if n == "L" else getattr(p, n), dtype=np.float64)
        if v.ndim != 0:
            raise ValueError(f"the numba engine needs scalar parameters; {n} has shape {v.shape}")
        vals.append(float(v))
    for n in WHEEL_NAMES:
        v = np.asarray(getattr(p, n).detach().cpu(), dtype=np.float64)
        if v.shape != (4,):
            raise ValueError(f"the numba engine needs per-wheel parameters of shape (4,); {n} has {v.shape}")
        vals.extend(v.tolist())
    return np.asarray(vals, dtype=np.float64), bool(p.grade_force), p.damper == "passive"


def unpack_params(P: np.ndarray, base):
    """The rows' :class:`Dyn4Params` from packed rows ``P (B, n)`` (:func:`pack_params`'s layout),
    over ``base`` for the flags and the dtype: the inverse the torch view of a Numba state needs."""
    import torch

    def t(a):
        return torch.as_tensor(np.ascontiguousarray(a), dtype=base.m.dtype)

    vals = {n: t(P[:, j]) for j, n in enumerate(PARAM_NAMES) if n != "L"}
    vals.update({n: t(P[:, _NS + 4 * j:_NS + 4 * j + 4]) for j, n in enumerate(WHEEL_NAMES)})
    vals.update(lf=vals["x_w"][:, 0], lr=-vals["x_w"][:, 2])
    return dataclasses.replace(base, **vals)


def pack_terrain(t, batch: int) -> tuple:
    """The rough kind's :class:`Terrain` (or a ``Flat``) as float64 arrays for the kernel."""
    from ..ground import Flat, Terrain

    if isinstance(t, Flat):
        if t.height0 != 0.0:
            raise ValueError("the numba engine's Flat ground sits at height 0")
        z = np.zeros((batch, 0))
        return (z, z, z, z, np.full(batch, t.mu), z, z, z, z, z, z, z, z, 0.5)
    names = [f.name for f in dataclasses.fields(Terrain) if f.name != "patch_edge"]  # the kernel's argument order
    arrs = tuple(np.ascontiguousarray(getattr(t, n).detach().cpu().numpy(), dtype=np.float64) for n in names)
    return arrs + (float(t.patch_edge),)


@njit(cache=True, error_model="numpy", inline="always")
def _atanc(x, atan_x):
    """``atan(x) / x`` (a series near 0), from ``atan_x = atan(x)`` already at hand."""
    if abs(x) < 1e-4:
        x2 = x * x
        return 1.0 - x2 / 3.0 + x2 * x2 / 5.0
    return atan_x / x


@njit(cache=True, error_model="numpy", inline="always")
def _sinc(x):
    y = x / math.pi  # torch.sinc(x / pi), as the torch plant computes it
    if y == 0.0:
        return 1.0
    t = math.pi * y
    return math.sin(t) / t


@njit(cache=True, error_model="numpy", inline="always")
def _softplus_floor(x, scale):
    z = x / scale
    sp = z if z > 20.0 else math.log1p(math.exp(z))
    return scale * max(sp, 1e-6)


@njit(cache=True, error_model="numpy", inline="always")
def _softcap(x, limit):
    width = 0.1
    s = x / limit
    a = abs(s)
    if a <= 1.0 - width:
        return x
    f = 1.0 if a >= 1.0 + width else 1.0 - (1.0 + width - a) ** 2 / (4.0 * width)
    sg = 1.0 if x > 0 else (-1.0 if x < 0 else 0.0)
    return sg * limit * f


@njit(cache=True, error_model="numpy", inline="always")
def _ellipse(r2):
    eps = 0.02
    rem = max(1.0 - r2, 0.0)
    e2 = eps * eps
    return (math.sqrt(rem + e2) - eps) / ((1.0 + e2) ** 0.5 - eps)


@njit(cache=True, error_model="numpy", inline="always")
def _secant(w, u, D, B, C, E, v_lat):
    ubar = math.sqrt(u * u + v_lat * v_lat)
    ratio = w / ubar
    alpha = math.atan(ratio)
    ba = B * alpha
    atan_ba = math.atan(ba)
    psi = ba - E * (ba - atan_ba)
    phi = math.atan(psi)
    psi_over_alpha = B * (1.0 - E) + E * B * _atanc(ba, atan_ba)
    alpha_over_w = _atanc(ratio, alpha) / ubar
    return D * _sinc(C * phi) * C * _atanc(psi, phi) * psi_over_alpha * alpha_over_w


@njit(cache=True, error_model="numpy", inline="always")
def height_at(b, X, Y, T):
    """The height [m] of row ``b``'s rough terrain ``T`` (:func:`pack_terrain`) at world point ``(X, Y)``."""
    kx, ky, amp, ph, base_mu, px, py, pr, pmu, bx, by, bh, br, edge = T
    h = 0.0
    for k in range(kx.shape[1]):
        h += amp[b, k] * math.sin(X * kx[b, k] + Y * ky[b, k] + ph[b, k])
    hb = 0.0
    for q in range(bx.shape[1]):
        d2 = ((X - bx[b, q]) ** 2 + (Y - by[b, q]) ** 2) / br[b, q] ** 2
        if d2 < 1.0:  # outside, the bump adds exactly 0
            hb += bh[b, q] * (1.0 - d2) ** 2
    return h + hb


@njit(cache=True, error_model="numpy", inline="always")
def ground_at(b, X, Y, T):
    """``(mu, h)`` of row ``b``'s rough terrain ``T`` at world point ``(X, Y)``."""
    kx, ky, amp, ph, base_mu, px, py, pr, pmu, bx, by, bh, br, edge = T
    mu = base_mu[b]
    for j in range(px.shape[1]):
        r = pr[b, j]
        d2 = (X - px[b, j]) ** 2 + (Y - py[b, j]) ** 2
        z = (d2 - r * r) / (2.0 * r * edge)
        if z > 22.0:  # tanh is exactly 1 there: the disc covers nothing
            continue
        cover = 0.5 * (1.0 - (-1.0 if z < -22.0 else math.tanh(z)))
        mu = mu + cover * (pmu[b, j] - mu)
    return DEFAULT_MU + 1.0 * (mu - DEFAULT_MU), height_at(b, X, Y, T)


@njit(cache=True, error_model="numpy", inline="always")
def ground_under_row(b, Xp, Yp, psi, P, slopes, T, mu_g, hg, sbx, sby):
    """corners.ground_under for one row: friction, height and body-frame slopes under the wheels."""
    xw, yw = P[_NS:_NS + 4], P[_NS + 4:_NS + 8]
    c_psi, s_psi = math.cos(psi), math.sin(psi)
    e = SLOPE_STEP * P[17]
    for i in range(4):
        wx = Xp + c_psi * xw[i] - s_psi * yw[i]
        wy = Yp + s_psi * xw[i] + c_psi * yw[i]
        mu_g[i], hg[i] = ground_at(b, wx, wy, T)
        sbx[i] = 0.0
        sby[i] = 0.0
        if slopes:
            h1 = height_at(b, wx + e, wy, T)
            h2 = height_at(b, wx - e, wy, T)
            h3 = height_at(b, wx, wy + e, T)
            h4 = height_at(b, wx, wy - e, T)
            hx = (h1 - h2) / (2 * e)
            hy = (h3 - h4) / (2 * e)
            sbx[i] = c_psi * hx + s_psi * hy
            sby[i] = -s_psi * hx + c_psi * hy


@njit(cache=True, error_model="numpy", inline="always")
def loads_row(x, P, passive, hg, sbx, sby, rate, hdot, spring, Fz):
    """Corner rates, ground rates, spring forces and floored loads (corners.forces_at, stage 3)."""
    xw, yw, Fz0 = P[_NS:_NS + 4], P[_NS + 4:_NS + 8], P[_NS + 8:_NS + 12]
    kk, cc = P[_NS + 28:_NS + 32], P[_NS + 32:_NS + 36]
    vx, vy, r = x[3], x[4], x[5]
    for i in range(4):
        rate[i] = x[9] + yw[i] * x[10] - xw[i] * x[11]
        hdot[i] = sbx[i] * (vx - r * yw[i]) + sby[i] * (vy + r * xw[i]) if passive else 0.0
        spring[i] = Fz0[i] + kk[i] * (hg[i] - (x[6] + yw[i] * x[7] - xw[i] * x[8]))
        Fz[i] = _softplus_floor(spring[i] - cc[i] * (rate[i] - hdot[i]), FLOOR_SHARE * Fz0[i])


N_SCRATCH = 22  # per-wheel scratch rows of one substep


@njit(cache=True, error_model="numpy", inline="always")
def solve_sym3(a00, a01, a02, a11, a12, a22, b0, b1, b2):
    """The symmetric 3x3 system ``A x = b`` by cofactors (dyn4._solve_sym3, term for term)."""
    c00 = a11 * a22 - a12 * a12
    c01 = a02 * a12 - a01 * a22
    c02 = a01 * a12 - a02 * a11
    c11 = a00 * a22 - a02 * a02
    c12 = a01 * a02 - a00 * a12
    c22 = a00 * a11 - a01 * a01
    det = a00 * c00 + a01 * c01 + a02 * c02
    return ((c00 * b0 + c01 * b1 + c02 * b2) / det, (c01 * b0 + c11 * b1 + c12 * b2) / det,
            (c02 * b0 + c12 * b1 + c22 * b2) / det)


@njit(cache=True, error_model="numpy", inline="always")
def corner_sum(w, xw, yw):
    """``(zz, zp, zt, pp, pt, tt)`` of ``sum_i w_i a_i a_i^T``, ``a_i = (1, y_i, -x_i)`` (corners.corner_sum)."""
    s0 = s1 = s2 = s3 = s4 = s5 = 0.0
    for i in range(4):
        s0 += w[i]
        s1 += w[i] * yw[i]
        s2 -= w[i] * xw[i]
        s3 += w[i] * yw[i] * yw[i]
        s4 -= w[i] * xw[i] * yw[i]
        s5 += w[i] * xw[i] * xw[i]
    return s0, s1, s2, s3, s4, s5


@njit(cache=True, error_model="numpy", inline="always")
def _energy(x, P, hg):
    m, Iz, g, Ix, Iy = P[0], P[1], P[3], P[15], P[16]
    xw, yw, Fz0, kk = P[_NS:_NS + 4], P[_NS + 4:_NS + 8], P[_NS + 8:_NS + 12], P[_NS + 28:_NS + 32]
    vx, vy, r, zd, pd, td = x[3], x[4], x[5], x[9], x[10], x[11]
    kin = 0.5 * (m * (vx * vx + vy * vy + zd * zd) + Iz * r * r + Ix * pd * pd + Iy * td * td)
    pot = 0.0
    for i in range(4):
        sp = Fz0[i] + kk[i] * (hg[i] - (x[6] + yw[i] * x[7] - xw[i] * x[8]))
        pot += 0.5 * sp * sp / kk[i]
    return kin + pot + m * g * x[6]


@njit(cache=True, error_model="numpy")
def substep_row(x, d_in, a_in, P, grade, passive, hdt, want_books, b, T, y, bk, W, fe0, fe1, fe2, drv, fd, fb, dwork):
    """One substep of row ``b``: state ``x (14,)``, input ``(d_in, a_in)`` and external force
    ``(fe0, fe1, fe2)`` = (Fx, Fy, Mz) -> ``y (14,)`` and, with ``want_books``, the books ``bk``
    (``BOOK_ORDER``). ``W (N_SCRATCH, 4)`` is scratch, so nothing is allocated here.

    ``drv``: driven by a powertrain's forces ``(fd, fb)`` [N] instead of ``a_in``
    (:func:`dyn4_gym.plant.dyn4.dyn4_drive_step`); with ``want_books`` its ``DriveWork``
    ``(drive, brakes, wheelspin, v_drive)`` goes to ``dwork (4,)``."""
    m, Iz, h, g, eps_load = P[0], P[1], P[2], P[3], P[4]
    delta_max, a_drive, a_brake, power = P[5], P[6], P[7], P[8]
    tau_s, tau_d, c_drag, f_roll, v_lat, v_roll, Ix, Iy, L = (P[9], P[10], P[11], P[12], P[13], P[14], P[15],
                                                              P[16], P[17])
    xw, yw, Fz0 = P[_NS:_NS + 4], P[_NS + 4:_NS + 8], P[_NS + 8:_NS + 12]
    Bt, Ct, Et = P[_NS + 12:_NS + 16], P[_NS + 16:_NS + 20], P[_NS + 20:_NS + 24]
    share_d, kk, cc = P[_NS + 24:_NS + 28], P[_NS + 28:_NS + 32], P[_NS + 32:_NS + 36]
    # 1. lags
    d_cmd = min(max(d_in, -delta_max), delta_max)
    a_cmd = min(max(a_in, -a_brake), a_drive)
    dec_s = math.exp(-hdt / tau_s) if tau_s > 0 else 0.0
    dec_d = math.exp(-hdt / tau_d) if tau_d > 0 else 0.0
    delta = d_cmd + (x[12] - d_cmd) * dec_s
    a = a_cmd + (x[13] - a_cmd) * dec_d
    Xp, Yp, psi, vx, vy, r = x[0], x[1], x[2], x[3], x[4], x[5]
    sgn = 1.0 if vx > 0 else (-1.0 if vx < 0 else 0.0)
    if drv:
        a = (fd - sgn * fb) / m
        braking = fb > abs(fd)
    else:
        braking = a < 0
    # 2. ground under the wheels (and its slopes); 3. loads
    mu_g, hg, sbx, sby, rate, hdot, spring, Fz = W[0], W[1], W[2], W[3], W[4], W[5], W[6], W[7]
    ground_under_row(b, Xp, Yp, psi, P, passive or grade, T, mu_g, hg, sbx, sby)
    loads_row(x, P, passive, hg, sbx, sby, rate, hdot, spring, Fz)
    fz_sum = Fz[0] + Fz[1] + Fz[2] + Fz[3]
    if a >= 0:
        total = m * a / (1.0 + (m * a * vx / power) ** 4) ** 0.25
    else:
        total = m * a * sgn
    s = min(max((a + A_BLEND) / (2 * A_BLEND), 0.0), 1.0)
    s = s * s * (3.0 - 2.0 * s)
    Fx, Dp = W[8], W[9]
    for i in range(4):
        factor = 1.0 - eps_load * (Fz[i] - Fz0[i]) / Fz0[i]
        mu_i = mu_g[i] * (0.2 + _softplus_floor(factor - 0.2, 0.02))
        sl = Fz[i] / fz_sum
        share = sl + s * (share_d[i] - sl)
        limit = mu_i * Fz[i]
        if drv:  # tire.driven_forces: drive by the differentials' shares, brakes by load
            Fx[i] = _softcap(fd * share_d[i] - fb * sl * sgn, limit)
        else:
            Fx[i] = _softcap(total * share, limit)
        Dp[i] = limit * _ellipse((Fx[i] / limit) ** 2)
    # Ackermann and the wheel frames
    cd, sd, g0, g1, g2, n0, n1, n2 = W[10], W[11], W[12], W[13], W[14], W[15], W[16], W[17]
    for i in range(4):
        dw = math.atan2(L * math.sin(delta), L * math.cos(delta) - yw[i] * math.sin(delta)) if i < 2 else 0.0
        cd[i], sd[i] = math.cos(dw), math.sin(dw)
        g0[i], g1[i], g2[i] = cd[i], sd[i], xw[i] * sd[i] - yw[i] * cd[i]
        n0[i], n1[i], n2[i] = -sd[i], cd[i], xw[i] * cd[i] + yw[i] * sd[i]
    # grade force (opt-in), then the external port's force (dyn4_step's f_ext)
    gr0 = gr1 = gr2 = 0.0
    if grade:
        for i in range(4):
            normal = spring[i] - 0.5 * hdt * kk[i] * rate[i]
            if passive:
                normal = normal - cc[i] * (rate[i] - hdot[i])
            fxi, fyi = -normal * sbx[i], -normal * sby[i]
            gr0 += fxi
            gr1 += fyi
            gr2 += xw[i] * fyi - yw[i] * fxi
    ext0, ext1, ext2 = gr0 + fe0, gr1 + fe1, gr2 + fe2
    # 4. vx explicit, with the speed clamp
    S, Fy0 = W[18], W[19]
    fx_body = 0.0
    for i in range(4):
        w = n0[i] * vx + n1[i] * vy + n2[i] * r
        uu = g0[i] * vx + g1[i] * vy + g2[i] * r
        S[i] = _secant(w, uu, Dp[i], Bt[i], Ct[i], Et[i], v_lat)
        Fy0[i] = -S[i] * w
        fx_body += Fx[i] * g0[i] + Fy0[i] * n0[i]
    drag = c_drag * vx * abs(vx) + f_roll * math.tanh(vx / v_roll)
    vx_free = vx + hdt * ((fx_body - drag + ext0) / m + r * vy)
    vx1 = 0.0 if (braking and vx * vx_free <= 0) else vx_free
    # 5. (vy, r) implicit with the secants
    fx_gy = ext1
    fx_gr = ext2
    for i in range(4):
        fx_gy += Fx[i] * g1[i]
        fx_gr += Fx[i] * g2[i]
    vy1 = vy
    r1 = r
    for it in range(N_SECANT + 1):
        if it > 0:
            for i in range(4):
                w = n0[i] * vx1 + n1[i] * vy1 + n2[i] * r1
                uu = g0[i] * vx1 + g1[i] * vy1 + g2[i] * r1
                S[i] = _secant(w, uu, Dp[i], Bt[i], Ct[i], Et[i], v_lat)
        Pp = Qq = Cc = S10 = S20 = 0.0
        for i in range(4):
            Pp += S[i] * n1[i] * n1[i]
            Qq += S[i] * n2[i] * n2[i]
            Cc += S[i] * n1[i] * n2[i]
            S10 += S[i] * n1[i] * n0[i]
            S20 += S[i] * n2[i] * n0[i]
        a00 = m + hdt * Pp
        a01 = hdt * (m * vx1 + Cc)
        a10 = hdt * Cc
        a11 = Iz + hdt * Qq
        b0 = m * vy + hdt * (fx_gy - vx1 * S10)
        b1 = Iz * r + hdt * (fx_gr - vx1 * S20)
        det = a00 * a11 - a01 * a10
        vy1 = (a11 * b0 - a01 * b1) / det
        r1 = (a00 * b1 - a10 * b0) / det
    Fy = W[20]
    fx_b = fy_b = 0.0
    for i in range(4):
        Fy[i] = -S[i] * (n0[i] * vx1 + n1[i] * vy1 + n2[i] * r1)
        fx_b += Fx[i] * cd[i] - Fy[i] * sd[i]
        fy_b += Fx[i] * sd[i] + Fy[i] * cd[i]
    # 6. vertical: midpoint springs, backward-Euler dampers
    K0, K1, K2, K3, K4, K5 = corner_sum(kk, xw, yw)
    D0, D1, D2, D3, D4, D5 = corner_sum(cc, xw, yw)
    fz = fphi = fth = 0.0
    for i in range(4):
        sp = spring[i] - 0.25 * hdt * kk[i] * rate[i] + cc[i] * hdot[i]
        fz += sp
        fphi += sp * yw[i]
        fth -= sp * xw[i]
    h2 = 0.25 * hdt * hdt
    A00 = hdt * D0 + h2 * K0 + m
    A01 = hdt * D1 + h2 * K1
    A02 = hdt * D2 + h2 * K2
    A11 = hdt * D3 + h2 * K3 + Ix
    A12 = hdt * D4 + h2 * K4
    A22 = hdt * D5 + h2 * K5 + Iy
    bb0 = m * x[9] + hdt * (fz - m * g)
    bb1 = Ix * x[10] + hdt * (fphi + h * fy_b)
    bb2 = Iy * x[11] + hdt * (fth - h * fx_b)
    qd0, qd1, qd2 = solve_sym3(A00, A01, A02, A11, A12, A22, bb0, bb1, bb2)
    y[6] = x[6] + 0.5 * hdt * (x[9] + qd0)
    y[7] = x[7] + 0.5 * hdt * (x[10] + qd1)
    y[8] = x[8] + 0.5 * hdt * (x[11] + qd2)
    y[9], y[10], y[11] = qd0, qd1, qd2
    # 7. pose
    psi_m = psi + 0.5 * hdt * r1
    cm, sm = math.cos(psi_m), math.sin(psi_m)
    y[0] = Xp + hdt * (vx1 * cm - vy1 * sm)
    y[1] = Yp + hdt * (vx1 * sm + vy1 * cm)
    y[2] = psi + hdt * r1
    y[3], y[4], y[5] = vx1, vy1, r1
    y[12], y[13] = delta, a
    if not want_books:
        return
    # books (docs/plant.md, "The books")
    vxm, vym, rm = 0.5 * (vx + vx1), 0.5 * (vy + vy1), 0.5 * (r + r1)
    pdm, tdm = 0.5 * (x[10] + qd1), 0.5 * (x[11] + qd2)
    supplied = tire = lever = damper = through = 0.0
    v_drive = w_brake = w_spin = 0.0
    for i in range(4):
        yi = g0[i] * vxm + g1[i] * vym + g2[i] * rm + h * (sd[i] * pdm - cd[i] * tdm)
        supplied += Fx[i] * yi
        if drv:
            di, bi = fd * share_d[i], fb * (Fz[i] / fz_sum) * sgn
            v_drive += share_d[i] * yi
            w_brake += bi * yi
            w_spin += (di - bi - Fx[i]) * yi
        tire += Fy0[i] * n0[i] * vxm + Fy[i] * (n1[i] * vym + n2[i] * rm)
        lever += Fy[i] * h * (cd[i] * pdm + sd[i] * tdm)
        rel1 = qd0 + yw[i] * qd1 - xw[i] * qd2 - hdot[i]
        relm = (0.5 * (x[9] + qd0) + yw[i] * pdm - xw[i] * tdm) - hdot[i]
        damper += cc[i] * rel1 * relm
        through += cc[i] * rel1 * hdot[i]
    supplied *= hdt
    tire *= -hdt
    lever *= hdt
    damper *= hdt
    through *= -hdt
    dragw = hdt * drag * vxm
    gradew = hdt * (gr0 * vxm + gr1 * vym + gr2 * rm) if grade else 0.0
    external = hdt * (fe0 * vxm + fe1 * vym + fe2 * rm)
    limiter = m * (vx1 - vx_free) * vxm
    H0 = _energy(x, P, hg)
    H1_old = _energy(y, P, hg)
    hg1 = W[21]
    c1, s1 = math.cos(y[2]), math.sin(y[2])
    for i in range(4):
        wx = y[0] + c1 * xw[i] - s1 * yw[i]
        wy = y[1] + s1 * xw[i] + c1 * yw[i]
        hg1[i] = height_at(b, wx, wy, T)
    H1 = _energy(y, P, hg1)
    ground = H1 - H1_old + through
    dH = H1 - H0
    dissipated = tire + damper + dragw
    residual = dH - (supplied - dissipated + lever + gradew + ground + limiter + external)
    bk[0], bk[1], bk[2], bk[3], bk[4], bk[5] = dH, supplied, dissipated, tire, damper, dragw
    bk[6], bk[7], bk[8], bk[9], bk[10], bk[11] = lever, gradew, ground, limiter, external, residual
    if drv:
        dwork[0], dwork[1], dwork[2], dwork[3] = hdt * fd * v_drive, hdt * w_brake, hdt * w_spin, v_drive


def _step_rows_py(X0, U, FE, P, grade, passive, hdt, want_books, T, X1, BK):
    for b in prange(X0.shape[0]):
        W = np.empty((N_SCRATCH, 4))
        dw = np.empty(4)
        substep_row(X0[b], U[b, 0], U[b, 1], P, grade, passive, hdt, want_books, b, T, X1[b], BK[b], W, FE[b, 0],
                    FE[b, 1], FE[b, 2], False, 0.0, 0.0, dw)


def serial_and_parallel(fn):
    """One serial and one row-parallel (``prange``) build of ``fn``: a thread pool's start costs
    more than a small batch's whole step. The parallel build compiles a renamed copy, because
    Numba's disk cache keys a function by its name and would hand the serial build to both."""
    twin = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__ + "_parallel", fn.__defaults__,
                              fn.__closure__)
    twin.__qualname__ = fn.__qualname__ + "_parallel"
    return njit(cache=True, error_model="numpy")(fn), njit(cache=True, error_model="numpy", parallel=True)(twin)


_step_rows_serial, _step_rows_parallel = serial_and_parallel(_step_rows_py)
PARALLEL_FROM = 256  # rows


def dyn4_step_np(x, u, packed, terrain, hdt: float = 0.01, books: bool = False, f_ext=None):
    """One substep on the CPU engine: ``x (B, 14)``, ``u (B, 2)`` float64 arrays, ``packed`` from
    :func:`pack_params`, ``terrain`` from :func:`pack_terrain`, ``f_ext (B, 3)`` the external
    port's ``(Fx, Fy, Mz)`` (None: zero). Returns ``x+ (B, 14)`` and, with ``books``,
    ``(B, len(BOOK_ORDER))`` lines in ``BOOK_ORDER``."""
    P, grade, passive = packed
    x = np.ascontiguousarray(x, dtype=np.float64)
    u = np.ascontiguousarray(u, dtype=np.float64)
    fe = np.zeros((x.shape[0], 3)) if f_ext is None else np.ascontiguousarray(
        np.broadcast_to(np.asarray(f_ext, dtype=np.float64), (x.shape[0], 3)))
    if x.ndim != 2 or x.shape[1] != 14 or u.shape != (x.shape[0], 2):
        raise ValueError(f"dyn4_step_np needs x (B, 14) and u (B, 2), got {x.shape} and {u.shape}")
    out = np.empty_like(x)
    bk = np.zeros((x.shape[0], len(BOOK_ORDER)))
    kernel = _step_rows_parallel if x.shape[0] >= PARALLEL_FROM else _step_rows_serial
    kernel(x, u, fe, P, grade, passive, float(hdt), books, tuple(terrain), out, bk)
    return (out, bk) if books else out
