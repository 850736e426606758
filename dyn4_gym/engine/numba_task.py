"""The whole env step in Numba: the CPU engine of the numpy faces (docs/env.md, "Engines").

The same task as :class:`dyn4_gym.envs.core.TaskCore` (the torch reference), row by row, in
float64: resets (the row's counter-based stream, its course, its rough terrain, the settled rest
state), the plant's substeps with the books (:func:`numba_plant.substep_row`), the course
projection and the progress cap, corridor and roll checks at every substep, the built-in reward
terms and the non-finite guard, and the observation. One kernel call per env step, parallel over
rows (``prange``) from ``TASK_PARALLEL_FROM`` rows; per-row scratch is allocated once per call, never
per substep.

The state is a :class:`NumbaState` of numpy arrays, stepped in place. tests/test_engine.py holds
this engine to the torch one: the same seed and actions give the same observations, rewards and
terminations over 1,000 steps with resets.

Nothing compiles at import; the first call compiles (cached on disk by Numba, so a second
process loads it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from .numba_plant import (_NS, BOOK_ORDER, N_SCRATCH, corner_sum, ground_under_row, height_at, loads_row,
                          serial_and_parallel, solve_sym3, substep_row)
from .numba_powertrain import N_PT_LINES, POWERTRAIN_LINES, RPM, drive_substep_row

__all__ = ["NumbaTask", "NumbaState", "TERM_ORDER", "INFO_COLUMNS", "FLAG_COLUMNS", "TERRAIN_FIELDS", "reset_rows", "observe",
           "step"]

# the built-in reward terms, in the kernel's order (rewards.DEFAULT_WEIGHTS has the same order)
TERM_ORDER = ("progress", "speed", "cross_track", "heading", "energy", "fuel", "tire_slip", "damper", "comfort",
              "action_rate", "termination")
# the float columns of one step's packed info (the powertrain's lines last, 0 for action="accel"),
# then its bool columns
INFO_COLUMNS = (TERM_ORDER + BOOK_ORDER + ("progress_info", "distance", "s", "cross_track_info", "heading_error")
                + tuple("pt_" + n for n in POWERTRAIN_LINES))
FLAG_COLUMNS = ("terminated", "truncated", "success", "out_of_corridor", "rollover", "nonfinite")
TERRAIN_FIELDS = ("wave_kx", "wave_ky", "wave_amp", "wave_phase", "base_mu", "patch_x", "patch_y", "patch_r",
                  "patch_mu", "bump_x", "bump_y", "bump_h", "bump_r")
_NT, _NB = len(TERM_ORDER), len(BOOK_ORDER)
_NPT = N_PT_LINES
_OPT = _NT + _NB + 5  # first powertrain column
_MASK = 0xFFFFFFFF
OBS_CLIP = 10.0


@dataclass
class NumbaState:
    """The batch's state as numpy arrays (the fields of :class:`TaskState`), stepped in place."""

    x: np.ndarray  # (B, 14) float64
    terrain: tuple  # TERRAIN_FIELDS arrays, (B,) or (B, K), then the patch edge [m]
    course_xy: np.ndarray  # (B, N, 2)
    course_heading: np.ndarray  # (B, N)
    idx: np.ndarray  # (B,) int64
    s: np.ndarray  # (B,)
    t: np.ndarray  # (B,) int64
    prev_action: np.ndarray  # (B, 2), (B, 3) for action="driver"
    target_speed: np.ndarray  # (B,)
    key: np.ndarray  # (B,) int64
    episode: np.ndarray  # (B,) int64
    pt: np.ndarray  # (B, 3) powertrain state (omega_e, gear, t_shift)
    P: np.ndarray  # (B, n) each row's packed parameters (numba_plant.pack_params): the task's, or its draw

    @property
    def batch_size(self) -> int:
        return self.x.shape[0]

    def copy(self) -> "NumbaState":
        return NumbaState(**{k: (tuple(a.copy() if isinstance(a, np.ndarray) else a for a in v) if k == "terrain"
                                 else v.copy()) for k, v in self.__dict__.items()})


class NumbaTask:
    """A :class:`TaskCore`'s task packed for the kernels: parameters, config constants, weights.

    Raises ``ValueError`` for what the kernels do not model (a ground kind other than
    ``"rough"``, batched parameters).
    """

    def __init__(self, core):
        import torch

        from ..ground.terrain import RoughConfig
        from ..envs.core import obs_scale
        from ..plant.powertrain import powertrain_at
        from .numba_plant import pack_params
        from .numba_powertrain import pack_powertrain

        cfg = core.cfg
        g = cfg.ground
        if type(g) is not RoughConfig:
            raise ValueError(f"the numba engine models the 'rough' ground kind, not {g.kind!r}")
        self.core = core
        self.P, self.grade, self.passive = pack_params(core.p)
        self.driver, self.n_action, self.n_obs = core.driver, core.n_action, len(core.obs_names)
        self.Q, self.maps = pack_powertrain(core.pt)
        c = cfg.course
        self.hdt, self.n_sub, self.spacing = float(cfg.hdt), int(cfg.substeps), float(c.spacing)
        self.n_points = int(round(c.length / c.spacing)) + 1
        self.shape = dict(n_hills=g.n_hills, n_patches=g.n_patches, n_bumps=g.n_bumps)
        self.patch_edge = 0.5  # Terrain.patch_edge
        # the progress cap per step per m/s of target speed [s] (inf: uncapped)
        cap = math.inf if cfg.progress_cap is None else cfg.progress_cap * cfg.control_dt
        self.step_consts = np.array([c.spacing, c.half_width, c.goal_margin, cfg.roll_limit, cfg.episode_steps, cap])
        i0, frac, s0 = core.start_index()  # the start pose (TaskCore.new_state)
        self.reset_course = np.array([c.spacing, c.lat_accel, c.wavelength_min, c.wavelength_max, c.lead_in,
                                      c.half_width, c.n_waves, i0, frac, s0, cfg.start_offset, cfg.start_heading,
                                      c.centre_line is not None], dtype=np.float64)
        # a given centre line, resampled as the torch engine does (course.centre_line_course)
        if c.centre_line is not None:
            from ..envs.course import centre_line_course

            self.line_xy, self.line_heading = (np.ascontiguousarray(a) for a in centre_line_course(c.centre_line,
                                                                                                   c.spacing))
        else:
            self.line_xy, self.line_heading = np.zeros((0, 2)), np.zeros(0)
        self.reset_ground = np.array([g.hills_amplitude, g.hills_wavelength_min, g.hills_wavelength_max, g.base_mu,
                                      g.patch_mu_min, g.patch_mu_max, g.patch_radius_min, g.patch_radius_max,
                                      g.bump_height_min, g.bump_height_max, g.bump_radius], dtype=np.float64)
        self.vt = float(cfg.target_speed)
        self.v0 = float(cfg.target_speed if cfg.start_speed is None else cfg.start_speed)
        self.ahead = np.asarray(c.preview, dtype=np.float64)
        self.scales = np.array([obs_scale(n, float(core.p.delta_max), c.half_width) for n in core.obs_names])
        # every row starts at the same speed, so in the same powertrain state
        self.pt0 = powertrain_at(core.pt, torch.tensor(self.v0, dtype=torch.float64)).numpy()
        # the kernel's built-in terms, weighted; a name the user re-registered is evaluated in
        # torch after the kernel (with the other custom terms), so its built-in weight here is 0
        from ..envs.rewards import REWARD_TERMS_BUILTIN

        self.weights = np.array([core.weights[n] if core.terms.get(n) is REWARD_TERMS_BUILTIN[n] else 0.0
                                 for n in TERM_ORDER])
        self.custom = {n: t for n, t in core.terms.items() if REWARD_TERMS_BUILTIN.get(n) is not t}

    def empty_state(self, B: int) -> NumbaState:
        z = np.zeros
        sh = self.shape
        terrain = tuple(z((B, sh[k])) for k in ("n_hills",) * 4) + (z(B),) + tuple(
            z((B, sh["n_patches"])) for _ in range(4)) + tuple(z((B, sh["n_bumps"])) for _ in range(4))
        return NumbaState(x=z((B, 14)), terrain=terrain + (self.patch_edge,), course_xy=z((B, self.n_points, 2)),
                          course_heading=z((B, self.n_points)), idx=z(B, dtype=np.int64), s=z(B),
                          t=z(B, dtype=np.int64), prev_action=z((B, self.n_action)), target_speed=z(B),
                          key=z(B, dtype=np.int64), episode=z(B, dtype=np.int64), pt=z((B, 3)),
                          P=np.tile(self.P, (B, 1)))

    def row_params(self, keys: np.ndarray, episodes: np.ndarray) -> np.ndarray:
        """``(n, len(P))``: the packed parameters of rows reset with these streams, drawn as
        ``TaskCore.row_params`` draws them (float64 uniforms, the stream's last draws)."""
        import torch

        from .. import _rng
        from .._tree import tree_map
        from .numba_plant import pack_params

        n_course, n_ground, n_vehicle = self.core.uniform_counts()
        u = _rng.uniform(torch.as_tensor(keys), torch.as_tensor(episodes), n_course + n_ground + n_vehicle,
                         dtype=torch.float64)
        p = self.core.row_params(u[:, n_course + n_ground:])
        return np.stack([pack_params(tree_map(lambda t, i=i: t[i], p))[0] for i in range(len(keys))])


# ------------------------------------------------------------------------------------ random streams
@njit(cache=True, error_model="numpy", inline="always")
def _hash32(x):
    # _rng.hash32 (lowbias32); int64 products wrap, and only their low 32 bits are kept
    x = x & _MASK
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & _MASK
    x = x ^ (x >> 15)
    x = (x * 0x846CA68B) & _MASK
    return x ^ (x >> 16)


@njit(cache=True, error_model="numpy")
def _uniforms(key, episode, out):
    """_rng.uniform for one row: ``out[:]`` in (0, 1) from the stream ``(key, episode)``."""
    w0, w1, w2, w3 = key & _MASK, (key >> 32) & _MASK, episode & _MASK, (episode >> 32) & _MASK
    a = _hash32(_hash32(_hash32(_hash32(w0 ^ 0x9E3779B9) ^ w1) ^ w2) ^ w3)
    b = _hash32(_hash32(_hash32(_hash32(w0 ^ 0x85EBCA6B) ^ w1) ^ w2) ^ w3)
    for i in range(out.shape[0]):
        x1 = _hash32(_hash32(a + i) ^ b)
        x2 = _hash32(_hash32(b + i + 0x632BE5AB) ^ a)
        bits = (x1 >> 5) * (1 << 26) + (x2 >> 6)
        out[i] = (float(bits) + 0.5) / float(1 << 53)


# ------------------------------------------------------------------------------------------ resets
@njit(cache=True, error_model="numpy")
def _on_course(cxy, ch, b, frac, lo, spacing, offset):
    """DrawContext.on_course for one point of row ``b``."""
    n = cxy.shape[1]
    j = int(lo / spacing + frac * (n - 1 - lo / spacing))
    j = min(max(j, 0), n - 1)
    th = ch[b, j]
    return cxy[b, j, 0] - offset * math.sin(th), cxy[b, j, 1] + offset * math.cos(th)


def _reset_rows_py(rows, keys, episodes, PP, C, LXY, LH, G, v0, vt, pt0, X, T, CXY, CH, IDX, S, TT, PREV, VT, KEY, EP,
                   PTS):
    """New episodes on ``rows``: course (C; the given line ``LXY``, ``LH`` where ``C[12]``), rough
    terrain (G), settled rest state at speed ``v0``."""
    kx, ky, amp, ph, base_mu, px, py, pr, pmu, bx, by, bh, br, edge = T
    spacing, lat_accel, wl_min, wl_max, lead_in, half_width = C[0], C[1], C[2], C[3], C[4], C[5]
    nw = int(C[6])
    n = CXY.shape[1]
    nh, npch, nb = kx.shape[1], px.shape[1], bx.shape[1]
    nc = 3 * nw
    nu = nc + 4 * (nh + npch + nb)
    two_pi = 2 * math.pi
    for r in prange(rows.shape[0]):
        b = rows[r]
        u = np.empty(nu)
        _uniforms(keys[r], episodes[r], u)
        # course (course.make_courses)
        km = lat_accel / (vt * vt)
        asum = 0.0
        for k in range(nw):
            asum += 0.5 + 0.5 * u[k]
        kap = np.empty(n)
        for i in range(n):
            s = i * spacing
            w = 0.0
            for k in range(nw):
                lam = wl_min + (wl_max - wl_min) * u[nw + k]
                w += (0.5 + 0.5 * u[k]) * math.sin(two_pi * s / lam + two_pi * u[2 * nw + k])
            f = 1.0 if lead_in <= 0 else min(max(s / lead_in, 0.0), 1.0)
            f = f * f * (3 - 2 * f)
            kap[i] = km * w / asum * f
        CH[b, 0] = 0.0
        CXY[b, 0, 0] = 0.0
        CXY[b, 0, 1] = 0.0
        for i in range(1, n):
            CH[b, i] = CH[b, i - 1] + 0.5 * (kap[i] + kap[i - 1]) * spacing
            mid = 0.5 * (CH[b, i] + CH[b, i - 1])
            CXY[b, i, 0] = CXY[b, i - 1, 0] + math.cos(mid) * spacing
            CXY[b, i, 1] = CXY[b, i - 1, 1] + math.sin(mid) * spacing
        if C[12] != 0.0:  # a given centre line replaces the drawn one (its uniforms still drawn)
            for i in range(n):
                CXY[b, i, 0], CXY[b, i, 1], CH[b, i] = LXY[i, 0], LXY[i, 1], LH[i]
        # terrain (terrain.draw_rough)
        o = nc
        for k in range(nh):
            lam = G[1] + (G[2] - G[1]) * u[o + 4 * k]
            ang = two_pi * u[o + 4 * k + 1]
            kx[b, k] = two_pi / lam * math.cos(ang)
            ky[b, k] = two_pi / lam * math.sin(ang)
            amp[b, k] = G[0] / max(nh, 1) * (0.5 + u[o + 4 * k + 2])
            ph[b, k] = two_pi * u[o + 4 * k + 3]
        base_mu[b] = G[3]
        o = nc + 4 * nh
        for j in range(npch):
            px[b, j], py[b, j] = _on_course(CXY, CH, b, u[o + 4 * j], 0.0, spacing,
                                            (u[o + 4 * j + 1] - 0.5) * 2 * half_width)
            pr[b, j] = G[6] + (G[7] - G[6]) * u[o + 4 * j + 2]
            pmu[b, j] = G[4] + (G[5] - G[4]) * u[o + 4 * j + 3]
        o = nc + 4 * (nh + npch)
        for q in range(nb):
            bx[b, q], by[b, q] = _on_course(CXY, CH, b, u[o + 4 * q], lead_in, spacing, (u[o + 4 * q + 1] - 0.5) * 2.0)
            bh[b, q] = G[8] + (G[9] - G[8]) * u[o + 4 * q + 2]
            br[b, q] = G[10]
        # the start pose (TaskCore.new_state): on segment i0 of the course, moved off it
        i0, frac, s0, off, dpsi = int(C[7]), C[8], C[9], C[10], C[11]
        posx = CXY[b, i0, 0] + frac * (CXY[b, i0 + 1, 0] - CXY[b, i0, 0])
        posy = CXY[b, i0, 1] + frac * (CXY[b, i0 + 1, 1] - CXY[b, i0, 1])
        th = CH[b, i0] + frac * (CH[b, i0 + 1] - CH[b, i0])
        X0, Y0, psi0 = posx - off * math.sin(th), posy + off * math.cos(th), th + dpsi
        cp, sp = math.cos(psi0), math.sin(psi0)
        # settled rest state there (dyn4.dyn4_rest), then the start speed
        P = PP[b]  # the row's parameters
        xw, yw, kk = P[_NS:_NS + 4], P[_NS + 4:_NS + 8], P[_NS + 28:_NS + 32]
        K0, K1, K2, K3, K4, K5 = corner_sum(kk, xw, yw)
        r0 = r1 = r2 = 0.0
        for i in range(4):
            hg = height_at(b, X0 + cp * xw[i] - sp * yw[i], Y0 + sp * xw[i] + cp * yw[i], T)
            kh = kk[i] * hg
            r0 += kh
            r1 += kh * yw[i]
            r2 -= kh * xw[i]
        reg = 1e-12 * (K0 + K3 + K5)
        q0, q1, q2 = solve_sym3(K0 + reg, K1, K2, K3 + reg, K4, K5 + reg, r0, r1, r2)
        for i in range(14):
            X[b, i] = 0.0
        X[b, 0], X[b, 1], X[b, 2] = X0, Y0, psi0
        X[b, 3] = v0
        X[b, 6], X[b, 7], X[b, 8] = q0, q1, q2
        IDX[b] = i0
        S[b] = s0
        TT[b] = 0
        for i in range(PREV.shape[1]):
            PREV[b, i] = 0.0
        for i in range(3):
            PTS[b, i] = pt0[i]
        VT[b] = vt
        KEY[b] = keys[r]
        EP[b] = episodes[r]


# ------------------------------------------------------------------------------- course and observe
@njit(cache=True, error_model="numpy", inline="always")
def _project(cxy, ch, b, idx, px, py, spacing):
    """course.project for row ``b``: ``(j, s, e, course heading)`` near segment ``idx``."""
    n = cxy.shape[1]
    best = math.inf
    j = min(max(idx - 2, 0), n - 2)
    for off in range(-2, 7):
        c = min(max(idx + off, 0), n - 2)
        p0x, p0y = cxy[b, c, 0], cxy[b, c, 1]
        dx, dy = cxy[b, c + 1, 0] - p0x, cxy[b, c + 1, 1] - p0y
        rx, ry = px - p0x, py - p0y
        lam = min(max((rx * dx + ry * dy) / (dx * dx + dy * dy), 0.0), 1.0)
        ex, ey = rx - lam * dx, ry - lam * dy
        d2 = ex * ex + ey * ey
        if d2 < best:  # the first minimum, as argmin
            best = d2
            j = c
    p0x, p0y = cxy[b, j, 0], cxy[b, j, 1]
    dx, dy = cxy[b, j + 1, 0] - p0x, cxy[b, j + 1, 1] - p0y
    rx, ry = px - p0x, py - p0y
    dd = dx * dx + dy * dy
    lam_free = (rx * dx + ry * dy) / dd
    lam = min(max(lam_free, 0.0), 1.0)
    cross = dx * ry - dy * rx
    if lam_free > 0.0 and lam_free < 1.0:
        e = cross / math.sqrt(dd)
    else:  # past an end: the distance to it, signed by side (course.project)
        fx, fy = rx - lam * dx, ry - lam * dy
        dist = math.sqrt(fx * fx + fy * fy)
        e = dist if cross >= 0 else -dist
    h0, h1 = ch[b, j], ch[b, j + 1]
    return j, (j + lam) * spacing, e, h0 + lam * (h1 - h0)


@njit(cache=True, error_model="numpy", inline="always")
def _wrap(a):
    return math.atan2(math.sin(a), math.cos(a))


@njit(cache=True, error_model="numpy")
def _observe_row(b, x, pts, P, grade, passive, T, CXY, CH, idx, s, vt, ahead, scales, spacing, W, out):
    """TaskCore.observe for row ``b`` into ``out (30,)`` (float32); ``(32,)`` with the powertrain's
    engine speed and gear (``action="driver"``, ``pts`` its state)."""
    Fz0 = P[_NS + 8:_NS + 12]
    mu_g, hg, sbx, sby, rate, hdot, spring, Fz = W[0], W[1], W[2], W[3], W[4], W[5], W[6], W[7]
    ground_under_row(b, x[0], x[1], x[2], P, passive or grade, T, mu_g, hg, sbx, sby)
    loads_row(x, P, passive, hg, sbx, sby, rate, hdot, spring, Fz)
    _, _, e, th = _project(CXY, CH, b, idx, x[0], x[1], spacing)
    no = out.shape[0]
    raw = np.empty(no)
    raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6] = x[3], x[4], x[5], x[7], x[8], x[10], x[11]
    raw[7], raw[8] = x[12], x[13]
    for i in range(4):
        raw[9 + i] = Fz[i] / Fz0[i] - 1.0
        raw[13 + i] = mu_g[i]
    raw[17], raw[18], raw[19] = e, _wrap(x[2] - th), vt
    n = CXY.shape[1]
    c, sn = math.cos(x[2]), math.sin(x[2])
    for k in range(5):
        st = min(max(s + ahead[k], 0.0), (n - 1) * spacing)
        f = st / spacing
        j = min(max(int(math.floor(f)), 0), n - 2)
        lam = f - j
        qx = CXY[b, j, 0] + lam * (CXY[b, j + 1, 0] - CXY[b, j, 0])
        qy = CXY[b, j, 1] + lam * (CXY[b, j + 1, 1] - CXY[b, j, 1])
        rx, ry = qx - x[0], qy - x[1]
        raw[20 + 2 * k] = c * rx + sn * ry
        raw[21 + 2 * k] = -sn * rx + c * ry
    if no > 30:
        raw[30], raw[31] = pts[0] * RPM, pts[1]
    for i in range(no):
        v = raw[i] / (P[5] if i == 7 else scales[i])  # the steer entry: the row's own max steer
        if v != v:
            v = 0.0
        out[i] = min(max(v, -OBS_CLIP), OBS_CLIP)


def _observe_py(rows, PP, grade, passive, T, CXY, CH, X, PTS, IDX, S, VT, ahead, scales, spacing, OBS):
    for r in prange(rows.shape[0]):
        b = rows[r]
        W = np.empty((N_SCRATCH, 4))
        _observe_row(b, X[b], PTS[b], PP[b], grade, passive, T, CXY, CH, IDX[b], S[b], VT[b], ahead, scales, spacing, W,
                     OBS[r])


# ------------------------------------------------------------------------------------------- step
def _step_py(A, active, PP, grade, passive, hdt, n_sub, T, C, weights, ahead, scales, driver, Q, maps, X, CXY, CH, IDX,
             S, TT, PREV, VT, PTS, OBS, REW, INFO, FLAGS):
    """TaskCore.step for every active row, in place; inactive rows are left as they are, their
    outputs zero (the caller resets them). ``driver``: actions are (steer, throttle, brake) through
    the powertrain (``Q``, ``maps``; state ``PTS``)."""
    spacing, half_width, goal_margin, roll_limit, episode_steps, cap = C[0], C[1], C[2], C[3], C[4], C[5]
    n = CXY.shape[1]
    length = (n - 1) * spacing
    for b in prange(X.shape[0]):
        info, flags = INFO[b], FLAGS[b]
        P = PP[b]  # the row's parameters
        delta_max, a_drive, a_brake = P[5], P[6], P[7]
        weight = P[0] * P[3]  # m g
        if not active[b]:
            REW[b] = 0.0
            info[:] = 0.0
            flags[:] = False
            continue
        W = np.empty((N_SCRATCH, 4))
        buf = np.empty((2, 14))
        bk = np.zeros(_NB)
        dw = np.empty(4)
        pbk = np.zeros(_NPT)
        pf = np.empty(8)
        sbuf = np.empty((2, 3))
        books = info[_NT:_NT + _NB]
        books[:] = 0.0
        ptb = info[_OPT:_OPT + _NPT]
        ptb[:] = 0.0
        a0 = min(max(A[b, 0], -1.0), 1.0)
        if driver:
            a1 = min(max(A[b, 1], 0.0), 1.0)
            a2 = min(max(A[b, 2], 0.0), 1.0)
        else:
            a1 = min(max(A[b, 1], -1.0), 1.0)
            a2 = 0.0
        ud = a0 * delta_max
        ua = a1 * a_drive if a1 >= 0 else a1 * a_brake
        scur, snxt = sbuf[0], sbuf[1]
        for i in range(3):
            scur[i] = PTS[b, i]
        # a row whose state is already non-finite steps from zeros for the bad entries, flagged
        nonfinite = False
        cur = buf[0]
        for i in range(14):
            v = X[b, i]
            if not math.isfinite(v):
                nonfinite = True
                v = 0.0
            cur[i] = v
        nxt = buf[1]
        idx, s_prev = IDX[b], S[b]
        progress = distance = 0.0
        e = th = 0.0
        out = rolled = False
        for _ in range(n_sub):
            finite = True
            if driver:
                for i in range(3):
                    snxt[i] = scur[i]
                drive_substep_row(cur, snxt, a0, a1, a2, 1.0, P, grade, passive, Q, maps, hdt, True, b, T, nxt, bk,
                                  pbk, W, pf, dw)
                for i in range(3):
                    if not math.isfinite(snxt[i]):
                        finite = False
            else:
                substep_row(cur, ud, ua, P, grade, passive, hdt, True, b, T, nxt, bk, W, 0.0, 0.0, 0.0, False, 0.0,
                            0.0, dw)
            for i in range(14):
                if not math.isfinite(nxt[i]):
                    finite = False
            nonfinite = nonfinite or not finite
            if finite:
                dx, dy = nxt[0] - cur[0], nxt[1] - cur[1]
                cur, nxt = nxt, cur
                scur, snxt = snxt, scur
            else:
                dx = dy = 0.0
            idx, s_new, e, th = _project(CXY, CH, b, idx, cur[0], cur[1], spacing)
            # progress: the projection's advance, capped by the distance driven
            d2 = dx * dx + dy * dy
            dist = math.sqrt(d2) if d2 > 0 else 0.0
            progress += max(min(s_new - s_prev, dist), -dist)
            distance += dist
            s_prev = s_new
            out = out or abs(e) > half_width
            rolled = rolled or abs(cur[7]) > roll_limit
            if finite:
                for k in range(_NB):
                    books[k] += bk[k]
                if driver:
                    for k in range(_NPT):
                        ptb[k] += pbk[k]
        success = s_prev >= length - goal_margin
        failed = out or rolled or nonfinite
        terminated = failed or success
        TT[b] += 1
        truncated = TT[b] >= episode_steps and not terminated
        he = _wrap(cur[2] - th)
        vt = VT[b]
        terms = info[:_NT]
        terms[0] = min(progress, cap * vt)  # rewards.progress: paid up to the target speed's distance
        terms[1] = -((cur[3] - vt) / vt) ** 2
        terms[2] = -(e / half_width) ** 2
        terms[3] = -(he ** 2)
        terms[4] = -max(books[1], 0.0) / weight
        terms[5] = -ptb[0] / weight if driver else 0.0
        terms[6] = -books[3] / weight
        terms[7] = -books[4] / weight
        terms[8] = -(cur[10] ** 2 + cur[11] ** 2)
        rate = (a0 - PREV[b, 0]) ** 2 + (a1 - PREV[b, 1]) ** 2
        if driver:
            rate += (a2 - PREV[b, 2]) ** 2
        terms[9] = -rate
        terms[10] = -1.0 if failed else 0.0
        reward = 0.0
        for k in range(_NT):
            reward += weights[k] * terms[k]
        # rewards are finite by construction: a non-finite state or reward ends the episode with
        # the termination penalty alone
        if nonfinite or not math.isfinite(reward):
            for k in range(_NT):
                terms[k] = 0.0
            terms[10] = -1.0
            reward = -weights[10]
            nonfinite = terminated = failed = True
            truncated = False
            progress = 0.0
            books[:] = 0.0
            ptb[:] = 0.0
        REW[b] = reward
        o = _NT + _NB
        info[o], info[o + 1], info[o + 2] = progress, distance, s_prev
        info[o + 3] = e if math.isfinite(e) else (0.0 if e != e else (1.7976931348623157e308 if e > 0
                                                                      else -1.7976931348623157e308))
        info[o + 4] = he
        flags[0], flags[1], flags[2] = terminated, truncated, success and not failed
        flags[3], flags[4], flags[5] = out, rolled, nonfinite
        for i in range(14):
            X[b, i] = cur[i]
        IDX[b], S[b] = idx, s_prev
        PREV[b, 0], PREV[b, 1] = a0, a1
        if driver:
            PREV[b, 2] = a2
        for i in range(3):
            PTS[b, i] = scur[i]
        _observe_row(b, cur, scur, P, grade, passive, T, CXY, CH, idx, s_prev, vt, ahead, scales, spacing, W, OBS[b])


_KERNELS = {name: serial_and_parallel(fn)
            for name, fn in (("step", _step_py), ("observe", _observe_py), ("reset", _reset_rows_py))}


# An env step is heavy (~35 us a row), so threads pay from 2 rows (measured on 2 cores, same
# states: 4 rows 21k -> 61k rows/s, 16 rows 22k -> 71k). One row stays serial: single envs in
# subprocesses (AsyncVectorEnv, SubprocVecEnv) never start OpenMP, which is not fork-safe.
TASK_PARALLEL_FROM = 2


def _kernel(name: str, rows: int):
    serial, parallel = _KERNELS[name]
    return parallel if rows >= TASK_PARALLEL_FROM else serial


def _check_rows(name: str, rows: np.ndarray, B: int) -> None:
    """The kernels index the state by these rows unchecked: each must be a row of the batch."""
    if rows.ndim != 1 or (rows.size and (rows.min() < 0 or rows.max() >= B)):
        raise ValueError(f"{name}: rows must be a 1-D array of indices in [0, {B}), got shape {rows.shape}")


def _check_shape(name: str, a: np.ndarray, shape: tuple) -> None:
    if a.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {a.shape}")


# The entries below are the only way into the task kernels, and each checks every array it
# hands them (the kernels run without bounds checks, so a wrong shape would read past an array).
def reset_rows(k, st: NumbaState, rows: np.ndarray, keys: np.ndarray, episodes: np.ndarray) -> None:
    """New episodes on ``rows`` (int64) of ``st`` from streams ``keys`` / ``episodes``, in place.
    ``k`` is the packed task (:class:`dyn4_gym.engine.task.NumbaTask`)."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    _check_rows("reset_rows", rows, st.batch_size)
    keys, episodes = np.asarray(keys), np.asarray(episodes)
    _check_shape("reset_rows: keys", keys, rows.shape)
    _check_shape("reset_rows: episodes", episodes, rows.shape)
    if rows.size == 0:
        return
    if k.core.ranges:  # domain randomisation: the rows' own parameters, drawn from their streams
        st.P[rows] = k.row_params(keys, episodes)
    _kernel("reset", rows.size)(rows, np.ascontiguousarray(keys, dtype=np.int64),
                                np.ascontiguousarray(episodes, dtype=np.int64), st.P, k.reset_course, k.line_xy,
                                k.line_heading, k.reset_ground,
                                k.v0, k.vt, k.pt0, st.x, st.terrain, st.course_xy, st.course_heading, st.idx, st.s,
                                st.t, st.prev_action, st.target_speed, st.key, st.episode, st.pt)


def observe(k, st: NumbaState, rows: np.ndarray | None = None) -> np.ndarray:
    """The observation ``(len(rows), k.n_obs)`` float32 of ``rows`` (default: every row)."""
    rows = np.arange(st.batch_size) if rows is None else np.ascontiguousarray(rows, dtype=np.int64)
    _check_rows("observe", rows, st.batch_size)
    obs = np.empty((rows.size, k.n_obs), dtype=np.float32)
    _kernel("observe", rows.size)(rows, st.P, k.grade, k.passive, st.terrain, st.course_xy, st.course_heading, st.x,
                                  st.pt, st.idx, st.s, st.target_speed, k.ahead, k.scales, k.spacing, obs)
    return obs


def step(k, st: NumbaState, actions: np.ndarray, active: np.ndarray):
    """One env step of the active rows, in place. Returns ``(obs (B, k.n_obs) float32, reward (B,),
    info (B, len(INFO_COLUMNS)), flags (B, len(FLAG_COLUMNS)) bool)``."""
    B = st.batch_size
    _check_shape("step: actions", actions, (B, k.n_action))
    _check_shape("step: active", active, (B,))
    if actions.dtype != np.float64 or active.dtype != np.bool_:
        raise ValueError(f"step: actions must be float64 and active bool, got {actions.dtype} and {active.dtype}")
    obs = np.zeros((B, k.n_obs), dtype=np.float32)
    rew = np.empty(B)
    info = np.empty((B, len(INFO_COLUMNS)))
    flags = np.empty((B, len(FLAG_COLUMNS)), dtype=np.bool_)
    _kernel("step", B)(actions, active, st.P, k.grade, k.passive, k.hdt, k.n_sub, st.terrain, k.step_consts,
                       k.weights, k.ahead, k.scales, k.driver, k.Q, k.maps, st.x, st.course_xy, st.course_heading,
                       st.idx, st.s, st.t, st.prev_action, st.target_speed, st.pt, obs, rew, info, flags)
    return obs, rew, info, flags
