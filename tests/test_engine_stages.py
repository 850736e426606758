"""The two engines stage by stage (issue 21): each stage of the Numba substep and task step
(dyn4_gym.engine.numba_stages runs the very functions the kernels inline) against the torch
function of the same stage, fed the torch engine's previous stage, so a drift names its stage.

Float64; relative to each quantity's own scale. The whole-step and whole-episode equalities stay
in tests/test_engine.py and tests/test_engine_env.py.
"""

import numpy as np
import pytest
import torch

from dyn4_gym import _rng
from dyn4_gym.engine import numba_plant as npl
from dyn4_gym.engine import numba_stages as ns
from dyn4_gym.engine.numba_plant import DW, N_SCRATCH, W_
from dyn4_gym.envs.config import EnvConfig
from dyn4_gym.envs.core import TaskCore
from dyn4_gym.envs.course import project
from dyn4_gym.model.books import BOOK_LINES
from dyn4_gym.model.constants import LOCKED
from dyn4_gym.model.state import DYN4 as S
from dyn4_gym.plant import HUMVEE, dyn4_params
from dyn4_gym.plant.corners import ackermann, forces_at, grade_force, ground_under, wheel_points
from dyn4_gym.plant.dyn4 import _vertical, drive_work, dyn4_drive_step, dyn4_step, pose_step, step_normal
from dyn4_gym.plant.energy import step_books
from dyn4_gym.plant.planar import clamp_inputs, lag, planar_step

D = torch.float64
B = 256
TOL = 1e-12


def _close(name, got, ref, tol=TOL):
    got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape, (name, got.shape, ref.shape)
    err = np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1.0))
    assert err <= tol, f"stage {name}: relative error {err:.3g}"


@pytest.fixture(scope="module")
def case():
    """Rows on drawn rough ground (hills, patches, bumps), many past the tires' peak."""
    core = TaskCore(EnvConfig(dtype="float64"))
    st = core.new_state(torch.arange(B), torch.zeros(B, dtype=torch.long))
    gen = torch.Generator().manual_seed(7)
    x = st.x.clone()
    x[:, S.X] += torch.rand(B, generator=gen, dtype=D) * 120
    x[:, S.Y] += torch.randn(B, generator=gen, dtype=D) * 2
    x[:, S.VX] = torch.rand(B, generator=gen, dtype=D) * 22
    x[:, S.VY] = torch.randn(B, generator=gen, dtype=D) * 2.5
    x[:, S.R] = torch.randn(B, generator=gen, dtype=D) * 0.6
    x[:, S.PHI] += torch.randn(B, generator=gen, dtype=D) * 0.05
    x[:, S.ZD:S.THETAD + 1] = torch.randn(B, 3, generator=gen, dtype=D) * 0.25
    x[:, S.DELTA] = torch.randn(B, generator=gen, dtype=D) * 0.3
    x[:, S.A] = torch.randn(B, generator=gen, dtype=D) * 4
    x[: B // 8, S.VX] = torch.rand(B // 8, generator=gen, dtype=D) * 0.3  # creeping
    u = torch.stack((torch.randn(B, generator=gen, dtype=D) * 0.4, torch.randn(B, generator=gen, dtype=D) * 6), -1)
    drive = torch.stack((torch.randn(B, generator=gen, dtype=D) * 8e3, torch.rand(B, generator=gen, dtype=D) * 2e4), -1)
    return dict(x=x, u=u, drive=drive, g=st.terrain, T=npl.pack_terrain(st.terrain, B))


def _W(f, pl=None, hg1=None):
    """The kernels' per-wheel scratch ``(B, N_SCRATCH, 4)`` filled from the torch stages' outputs."""
    W = np.zeros((B, N_SCRATCH, 4))
    rows = {W_.MU: f.ground.mu, W_.HG: f.ground.h, W_.SBX: f.ground.bx, W_.SBY: f.ground.by, W_.RATE: f.rate,
            W_.HDOT: f.hdot, W_.SPRING: f.spring, W_.FZ: f.Fz, W_.FX: f.Fx, W_.DP: f.D, W_.LOCK: f.lock,
            W_.LIMIT: f.limit, W_.KLAT: f.k_lat}
    if pl is not None:
        rows.update({W_.COSD: pl.cosd, W_.SIND: pl.sind, W_.G0: pl.gv[0], W_.G1: pl.gv[1], W_.G2: pl.gv[2],
                     W_.N0: pl.nv[0], W_.N1: pl.nv[1], W_.N2: pl.nv[2], W_.SEC: pl.S, W_.FY0: pl.Fy0, W_.FY: pl.Fy})
    if hg1 is not None:
        rows[W_.HG1] = hg1
    for k, v in rows.items():
        W[:, k, :] = torch.broadcast_to(v, (B, 4)).numpy()
    return W


def _params(grade, damper):
    return dyn4_params(HUMVEE, dtype=D, grade_force=grade, damper=damper)


@pytest.mark.parametrize("grade,damper", [(False, "passive"), (True, "passive"), (True, "skyhook")])
def test_each_substep_stage_equals_torch(case, grade, damper):
    x, u, g, T = case["x"], case["u"], case["g"], case["T"]
    p = _params(grade, damper)
    P, _, passive = npl.pack_params(p)
    hdt = 0.01
    slopes = passive or grade
    # 1. lags
    d_cmd, a_cmd = clamp_inputs(u, p)
    delta, a = lag(x[:, S.DELTA], d_cmd, p.tau_steer, hdt), lag(x[:, S.A], a_cmd, p.tau_drive, hdt)
    _close("lags", ns.lags(x.numpy(), u.numpy(), P, hdt), torch.stack((delta, a), -1))
    # 2. the ground under the wheels
    gu = ground_under(x, p, g, slopes=slopes)
    W0 = np.zeros((B, N_SCRATCH, 4))
    W2 = ns.ground_under(x.numpy(), P, slopes, T, W0)
    for row, ref in ((W_.MU, gu.mu), (W_.HG, gu.h), (W_.SBX, gu.bx), (W_.SBY, gu.by)):
        _close(f"ground_under ({row.name})", W2[:, row], ref)
    # 3. loads, then the longitudinal forces, then the frames: each from torch's previous stage
    f = forces_at(x, delta, a, p, g)
    W3 = ns.loads(x.numpy(), P, passive, _W(f))
    for row, ref in ((W_.RATE, f.rate), (W_.HDOT, f.hdot), (W_.SPRING, f.spring), (W_.FZ, f.Fz)):
        _close(f"loads ({row.name})", W3[:, row], ref)
    zero_fd = np.zeros((B, 2))
    Wf = ns.frames(delta.numpy(), P, _W(f))
    braking = (a < 0) & (f.lock.min(-1).values < LOCKED)
    f_grade = grade_force(p, step_normal(f, p, hdt), f.ground) if grade else None
    ext = torch.zeros(B, 3, dtype=D) if f_grade is None else torch.stack(f_grade, -1)
    pl = planar_step(x[:, S.VX], x[:, S.VY], x[:, S.R], f.delta_w, f.Fx, f.D, p, hdt, braking=braking,
                     f_ext=None if f_grade is None else f_grade, sliding=(f.lock, f.limit, f.k_lat))
    assert bool((f.lock == 1).any()) and bool(((f.lock > 0) & (f.lock < 1)).any())  # locked and locking wheels
    W4 = ns.longitudinal(x.numpy(), a.numpy(), P, False, zero_fd, _W(f, pl))  # on the wheel frames
    for row, ref in ((W_.FX, f.Fx), (W_.DP, f.D), (W_.LOCK, f.lock), (W_.LIMIT, f.limit)):
        _close(f"longitudinal ({row.name})", W4[:, row], ref)
    _close("longitudinal (KLAT)", W4[:, W_.KLAT], torch.broadcast_to(f.k_lat, (B, 4)))
    _close("frames (delta_w)", np.arctan2(Wf[:, W_.SIND], Wf[:, W_.COSD]), ackermann(delta, p))
    for row, ref in ((W_.G0, pl.gv[0]), (W_.G1, pl.gv[1]), (W_.G2, pl.gv[2]), (W_.N0, pl.nv[0]), (W_.N1, pl.nv[1]),
                     (W_.N2, pl.nv[2])):
        _close(f"frames ({row.name})", Wf[:, row], torch.broadcast_to(ref, (B, 4)))
    # stages 2-3 together, as the substep calls them
    Wall = ns.forces(x.numpy(), delta.numpy(), a.numpy(), P, grade, passive, False, zero_fd, T, W0)
    for row, ref in ((W_.FZ, f.Fz), (W_.FX, f.Fx), (W_.DP, f.D), (W_.HDOT, f.hdot)):
        _close(f"forces ({row.name})", Wall[:, row], ref)
    # the grade force
    Wpl = _W(f, pl)
    if grade:
        _close("grade", ns.grade(P, passive, hdt, Wpl), ext)
    # 4-5. the in-plane step from torch's forces and frames
    out, Wp = ns.planar(x.numpy(), P, hdt, braking.numpy(), ext.numpy(), _W(f, pl), 1.0)
    _close("planar (twist)", out[:, :3], torch.stack((pl.vx, pl.vy, pl.r), -1))
    _close("planar (vx_free, drag)", out[:, 3:], torch.stack((pl.vx_free, pl.drag), -1))
    for row, ref in ((W_.SEC, pl.S), (W_.FY0, pl.Fy0), (W_.FY, pl.Fy)):
        _close(f"planar ({row.name})", Wp[:, row], ref)
    # 6. vertical
    fx_b = (f.Fx * pl.cosd - pl.Fy * pl.sind).sum(-1)
    fy_b = (f.Fx * pl.sind + pl.Fy * pl.cosd).sum(-1)
    q1, qd1 = _vertical(x[:, S.Z:S.THETA + 1], x[:, S.ZD:S.THETAD + 1], fx_b, fy_b, f, p, hdt)
    Y = ns.vertical(x.numpy(), P, hdt, Wpl)
    _close("vertical", Y[:, S.Z:S.THETAD + 1], torch.cat((q1, qd1), -1))
    # 7. pose
    Yp = ns.pose(x.numpy(), hdt, torch.stack((pl.vx, pl.vy, pl.r), -1).numpy(), torch.stack((delta, a), -1).numpy())
    _close("pose", Yp[:, :3], torch.stack(pose_step(x, pl.vx, pl.vy, pl.r, hdt), -1))
    # the books of torch's own step x -> x1, from torch's forces
    x1, bk_ref = dyn4_step(x, u, p, g, hdt, books=True)
    hg1 = g(wheel_points(x1[:, S.X], x1[:, S.Y], x1[:, S.PSI], p))[1]
    FZS = np.stack((f.Fz.sum(-1).numpy(), torch.sign(x[:, S.VX]).numpy()), -1)
    bk, _, Wb = ns.books(x.numpy(), x1.numpy(), P, grade, passive, False, zero_fd, hdt,
                     torch.stack((pl.vx_free, pl.drag), -1).numpy(), ext.numpy(), np.zeros((B, 3)), FZS, T,
                     _W(f, pl, hg1))
    scale = np.abs(bk_ref.dH.numpy()) + np.abs(bk_ref.supplied.numpy()) + 1.0
    for j, name in enumerate(BOOK_LINES):
        err = np.max(np.abs(bk[:, j] - getattr(bk_ref, name).numpy()) / scale)
        assert err < 1e-9, f"stage books ({name}): {err:.3g}"
    # the ground the books sample at the step's end is the next substep's (advance_ground)
    gu1 = ground_under(x1, p, g, slopes=slopes)
    for row, ref in ((W_.MU1, gu1.mu), (W_.HG1, gu1.h), (W_.SBX1, gu1.bx), (W_.SBY1, gu1.by)):
        _close(f"books' end ground ({row.name})", Wb[:, row], ref)
    ref_books = step_books(x, x1, f, pl, f_grade, p, g, hdt)
    np.testing.assert_allclose(bk_ref.residual.numpy(), ref_books.residual.numpy(), rtol=0, atol=1e-12)


def test_driven_stages_equal_torch(case):
    """The powertrain-driven variants: forces from ``(F_drive, F_brake)`` and their DriveWork."""
    x, drive, g, T = case["x"], case["drive"], case["g"], case["T"]
    p = _params(True, "passive")
    P, _, passive = npl.pack_params(p)
    hdt = 0.01
    steer = case["u"][:, 0]
    d_cmd = torch.minimum(torch.maximum(steer, -p.delta_max), p.delta_max)
    delta = lag(x[:, S.DELTA], d_cmd, p.tau_steer, hdt)
    a = (drive[:, 0] - torch.sign(x[:, S.VX]) * drive[:, 1]) / p.m
    f = forces_at(x, delta, a, p, g, drive=drive)
    x1, bk_ref, dw_ref = dyn4_drive_step(x, steer, drive, p, g, hdt, books=True)
    braking = (drive[:, 1] > drive[:, 0].abs()) & (f.lock.min(-1).values < LOCKED)
    f_grade = grade_force(p, step_normal(f, p, hdt), f.ground)
    pl = planar_step(x[:, S.VX], x[:, S.VY], x[:, S.R], f.delta_w, f.Fx, f.D, p, hdt, braking=braking, f_ext=f_grade,
                     sliding=(f.lock, f.limit, f.k_lat), kx=p.road_share)
    assert bool((f.lock > 0).any()) and float(p.m_rot) > 0  # the rotating parts are in
    # the in-plane step with the rotating parts on vx (planar_row's kx)
    out, _ = ns.planar(x.numpy(), P, hdt, braking.numpy(), torch.stack(f_grade, -1).numpy(), _W(f, pl),
                       float(p.road_share))
    _close("planar driven (twist)", out[:, :3], torch.stack((pl.vx, pl.vy, pl.r), -1))
    _close("planar driven (vx_free, drag)", out[:, 3:], torch.stack((pl.vx_free, pl.drag), -1))
    W4 = ns.longitudinal(x.numpy(), a.numpy(), P, True, drive.numpy(), _W(f, pl))
    for row, ref in ((W_.FX, f.Fx), (W_.DP, f.D), (W_.LOCK, f.lock)):
        _close(f"longitudinal driven ({row.name})", W4[:, row], ref)
    hg1 = g(wheel_points(x1[:, S.X], x1[:, S.Y], x1[:, S.PSI], p))[1]
    FZS = np.stack((f.Fz.sum(-1).numpy(), torch.sign(x[:, S.VX]).numpy()), -1)
    bk, dw, _ = ns.books(x.numpy(), x1.numpy(), P, True, passive, True, drive.numpy(), hdt,
                     torch.stack((pl.vx_free, pl.drag), -1).numpy(), torch.stack(f_grade, -1).numpy(),
                     np.zeros((B, 3)), FZS, T, _W(f, pl, hg1))
    ref = drive_work(x, x1, f, pl, drive, p, hdt)
    scale = np.abs(ref.drive.numpy()) + np.abs(ref.brakes.numpy()) + 1.0
    for k, name in ((DW.DRIVE, "drive"), (DW.BRAKES, "brakes"), (DW.WHEELSPIN, "wheelspin")):
        err = np.max(np.abs(dw[:, k] - getattr(ref, name).numpy()) / scale)
        assert err < 1e-9, f"stage drive work ({name}): {err:.3g}"
    _close("drive work (v_drive)", dw[:, DW.V_DRIVE], ref.v_drive)
    scale = np.abs(bk_ref.dH.numpy()) + np.abs(bk_ref.supplied.numpy()) + 1.0
    for j, name in enumerate(BOOK_LINES):  # with the rotating parts' energy (driven books)
        err = np.max(np.abs(bk[:, j] - getattr(bk_ref, name).numpy()) / scale)
        assert err < 1e-9, f"stage driven books ({name}): {err:.3g}"
    assert dw_ref.drive.shape == (B,)


def test_task_stages_equal_torch(case):
    """The task's own stages: the random streams and the course projection."""
    keys = torch.arange(B, dtype=torch.long) * 7919 + 3
    eps = torch.arange(B, dtype=torch.long) % 5
    _close("uniforms", ns.uniforms(keys.numpy(), eps.numpy(), 40), _rng.uniform(keys, eps, 40, dtype=D), tol=0.0)
    core = TaskCore(EnvConfig(dtype="float64"))
    st = core.new_state(torch.arange(B), torch.zeros(B, dtype=torch.long))
    gen = torch.Generator().manual_seed(1)
    idx = torch.randint(0, st.course_xy.shape[1] - 10, (B,), generator=gen)
    pts = st.course_xy[torch.arange(B), idx] + torch.randn(B, 2, generator=gen, dtype=D) * 3.0
    spacing = core.cfg.course.spacing
    j_ref, s_ref, e_ref, th_ref = project(st.course_xy, st.course_heading, idx, pts, spacing)
    j, out = ns.project(st.course_xy.numpy(), st.course_heading.numpy(), idx.numpy(), pts.numpy(), spacing)
    np.testing.assert_array_equal(j, j_ref.numpy())
    _close("project", out, torch.stack((s_ref, e_ref, th_ref), -1))


@pytest.mark.parametrize("driver", [False, True], ids=["accel", "driver"])
def test_reward_terms_stage_equals_torch(driver):
    """The kernel's built-in terms (numba_task.terms_row) against envs/rewards.py's functions on
    the same step figures."""
    from dyn4_gym.envs.rewards import REWARD_TERMS_BUILTIN, StepContext
    from dyn4_gym.model.books import N_BOOKS, N_PT_LINES, POWERTRAIN_LINES
    from dyn4_gym.model.task import FIG, STEP_FIGURES, TERM_ORDER

    gen = torch.Generator().manual_seed(3)

    def r(*shape, scale=1.0):
        return torch.randn(*shape, generator=gen, dtype=D) * scale

    n = B
    progress, vt, hw = r(n, scale=0.8) + 0.5, torch.rand(n, generator=gen, dtype=D) * 10 + 5, 3.5
    cap = 0.05 * vt
    vx, e, he, phid, thetad = r(n, scale=10), r(n, scale=2), r(n, scale=0.3), r(n, scale=0.2), r(n, scale=0.1)
    weight = torch.full((n,), 2.3e4, dtype=D)
    books, ptb = r(n, N_BOOKS, scale=300.0), r(n, N_PT_LINES, scale=900.0).abs()
    width = 3 if driver else 2
    act = torch.rand(n, width, generator=gen, dtype=D) * 2 - 1
    prev = torch.rand(n, width, generator=gen, dtype=D) * 2 - 1
    failed = torch.rand(n, generator=gen) < 0.2
    book_dict = {name: books[:, j] for j, name in enumerate(BOOK_LINES)}
    if driver:
        book_dict.update({name: ptb[:, j] for j, name in enumerate(POWERTRAIN_LINES)})
    dt, budget, margin = 0.05, 1.5, 0.3
    elapsed = torch.rand(n, generator=gen, dtype=D) * 3.0  # some rows past the budget (the late term)
    # arc lengths that put some rows behind the schedule's pace ((budget - margin) / goal = 0.04 s/m), some ahead
    goal = 30.0
    s0 = torch.rand(n, generator=gen, dtype=D) * 60.0
    s1 = s0 + torch.rand(n, generator=gen, dtype=D)
    ctx = StepContext(progress=progress, speed=vx, target_speed=vt, cross_track=e, half_width=hw, heading_error=he,
                      books=book_dict, weight=weight, action=act, prev_action=prev, roll_rate=phid, pitch_rate=thetad,
                      failed=failed, success=torch.zeros(n, dtype=torch.bool), progress_cap=cap, control_dt=dt,
                      elapsed=elapsed, time_budget=budget, s=s1, s_start=s0, goal=goal, pace=budget - margin)
    ref = torch.stack([REWARD_TERMS_BUILTIN[name](ctx).to(D) for name in TERM_ORDER], -1)
    acts = torch.cat((act, torch.zeros(n, 3 - width, dtype=D)), -1)
    figures = dict(progress=progress, cap=cap, dt=dt, elapsed=elapsed, budget=budget, pace=budget - margin, s0=s0,
                   s1=s1, goal=goal, vx=vx, vt=vt, cross_track=e, half_width=hw, heading_error=he, weight=weight,
                   roll_rate=phid, pitch_rate=thetad, steer=acts[:, 0], drive=acts[:, 1], brake=acts[:, 2],
                   failed=failed.to(D))
    assert set(figures) == set(STEP_FIGURES)
    F = np.zeros((n, len(STEP_FIGURES)))
    for name, v in figures.items():  # by name (model.task.FIG)
        F[:, FIG[name.upper()]] = torch.as_tensor(v, dtype=D).expand(n).numpy()
    got = ns.terms(F, books.numpy(), ptb.numpy(), driver, prev.numpy())
    for j, name in enumerate(TERM_ORDER):
        _close(f"reward term {name}", got[:, j], ref[:, j])


def test_reset_and_observe_stages_equal_torch():
    """A Numba reset (course, terrain, rest state) against TaskCore.new_state, and the Numba
    observation of one and the same state against TaskCore.observe."""
    from dyn4_gym.engine import numba_task as nt
    from dyn4_gym.envs.engines import NumbaEngine

    core = TaskCore(EnvConfig(dtype="float64"))
    n = 64
    keys, eps = np.arange(n, dtype=np.int64) * 13 + 5, np.arange(n, dtype=np.int64) % 3
    eng = NumbaEngine(core)
    st = eng.new_state(keys, eps)
    ref = core.new_state(torch.as_tensor(keys), torch.as_tensor(eps))
    _close("reset (x)", st.x, ref.x)
    _close("reset (course)", st.course_xy, ref.course_xy)
    _close("reset (course heading)", st.course_heading, ref.course_heading)
    for name, a in zip(("wave_kx", "wave_ky", "wave_amp", "wave_phase", "base_mu", "patch_x", "patch_y", "patch_r",
                        "patch_mu", "bump_x", "bump_y", "bump_h", "bump_r"), st.terrain):
        _close(f"reset (terrain {name})", a, getattr(ref.terrain, name))
    # the observation of one state: move the rows off the rest state first
    st.x[:, S.VY] += 0.3
    st.x[:, S.Z] -= 0.01
    st.x[:, S.PHI] += 0.02
    obs = nt.observe(eng.task, st)
    ref_obs = core.observe(eng.task_state(st)).numpy().astype(np.float32)
    np.testing.assert_allclose(obs, ref_obs, rtol=1e-6, atol=1e-6)


def test_rest_stage_equals_dyn4_rest(case):
    """The reset's rest stage (numba_plant.rest_row, issue 49) against torch's dyn4_rest at the
    same poses on each row's rough ground: heave, roll and pitch from one 3x3 solve over the four
    wheels' ground heights; every other entry 0, also in a state wider than today's (the stage
    writes every entry it is given: the face starts from NaN)."""
    from dyn4_gym.model.state import N_DYN4
    from dyn4_gym.plant.dyn4 import dyn4_rest

    gen = torch.Generator().manual_seed(11)
    pose = torch.stack((torch.rand(B, generator=gen, dtype=D) * 150, torch.randn(B, generator=gen, dtype=D) * 3,
                        torch.randn(B, generator=gen, dtype=D)), -1)
    p = _params(False, "passive")
    ref = dyn4_rest(p, case["g"], (B,), pose[:, 0], pose[:, 1], pose[:, 2])
    assert ref[:, [S.Z, S.PHI, S.THETA]].abs().max() > 1e-3  # the hills tilt the rows: the solve is exercised
    P = npl.pack_params(p)[0]
    for width in (N_DYN4, N_DYN4 + 4):
        got = ns.rest(pose.numpy(), P, case["T"], width)
        _close(f"rest (width {width})", got[:, :N_DYN4], ref)
        assert np.all(got[:, N_DYN4:] == 0.0)
