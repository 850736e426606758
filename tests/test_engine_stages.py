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
from dyn4_gym.engine.numba_plant import DW, N_SCRATCH, SD, STAGE_WRITES, W_
from dyn4_gym.envs.config import EnvConfig
from dyn4_gym.envs.core import TaskCore
from dyn4_gym.envs.course import project
from dyn4_gym.model.books import BOOK_LINES
from dyn4_gym.model.constants import LOCKED
from dyn4_gym.model.state import DYN4 as S, N_DYN4
from dyn4_gym.plant import HUMVEE, dyn4_params
from dyn4_gym.plant.corners import forces_at, grade_force, ground_under
from dyn4_gym.plant.dyn4 import _vertical, dyn4_drive_step, dyn4_step, pose_step, step_normal
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


def _params(grade, damper):
    return dyn4_params(HUMVEE, dtype=D, grade_force=grade, damper=damper)


def _blocks(case, p, hdt, drive=None):
    """Every field of one substep's blocks from the torch stages, by name: the state ``X``, the
    next state ``Y`` (the stages' entries; the rest carried from ``X``), the per-wheel scratch
    ``W (B, N_SCRATCH, 4)`` (W_) and the substep's data ``D (B, N_SD)`` (SD); ``drive``: the
    powertrain's ``(F_drive, F_brake)`` [N] (the driven substep). Also returns torch's step
    ``x -> x1`` with its books (and DriveWork, driven) and the forces ``f``."""
    x, u, g = case["x"], case["u"], case["g"]
    d_cmd, a_cmd = clamp_inputs(u, p)
    delta = lag(x[:, S.DELTA], d_cmd, p.tau_steer, hdt)
    if drive is None:
        a = lag(x[:, S.A], a_cmd, p.tau_drive, hdt)
        braking_cmd = a < 0
        fd = torch.zeros(B, 2, dtype=D)
    else:
        a = (drive[:, 0] - torch.sign(x[:, S.VX]) * drive[:, 1]) / p.m
        braking_cmd = drive[:, 1] > drive[:, 0].abs()
        fd = drive
    f = forces_at(x, delta, a, p, g, drive=drive)
    braking = braking_cmd & (f.lock.min(-1).values < LOCKED)
    f_grade = grade_force(p, step_normal(f, p, hdt), f.ground) if p.grade_force else None
    ext = torch.zeros(B, 3, dtype=D) if f_grade is None else torch.stack(f_grade, -1)
    pl = planar_step(x[:, S.VX], x[:, S.VY], x[:, S.R], f.delta_w, f.Fx, f.D, p, hdt, braking=braking, f_ext=f_grade,
                     sliding=(f.lock, f.limit, f.k_lat), kx=None if drive is None else p.road_share)
    if drive is None:
        x1, bk_ref = dyn4_step(x, u, p, g, hdt, books=True)
        dw_ref = None
    else:
        x1, bk_ref, dw_ref = dyn4_drive_step(x, u[:, 0], drive, p, g, hdt, books=True)
    gu1 = ground_under(x1, p, g, slopes=p.damper == "passive" or p.grade_force)
    W = np.full((B, N_SCRATCH, 4), np.nan)
    rows = {W_.MU: f.ground.mu, W_.HG: f.ground.h, W_.SBX: f.ground.bx, W_.SBY: f.ground.by, W_.RATE: f.rate,
            W_.HDOT: f.hdot, W_.SPRING: f.spring, W_.FZ: f.Fz, W_.FX: f.Fx, W_.DP: f.D, W_.LOCK: f.lock,
            W_.LIMIT: f.limit, W_.KLAT: torch.where(f.lock != 0, f.k_lat, 0.0),  # 0 where nothing reads it
            W_.COSD: pl.cosd, W_.SIND: pl.sind, W_.G0: pl.gv[0], W_.G1: pl.gv[1], W_.G2: pl.gv[2],
            W_.N0: pl.nv[0], W_.N1: pl.nv[1], W_.N2: pl.nv[2], W_.SEC: pl.S, W_.FY0: pl.Fy0, W_.FY: pl.Fy,
            W_.MU1: gu1.mu, W_.HG1: gu1.h, W_.SBX1: gu1.bx, W_.SBY1: gu1.by}
    assert set(rows) == set(W_)
    for k, v in rows.items():
        W[:, k, :] = torch.broadcast_to(v, (B, 4)).numpy()
    data = {SD.D_IN: u[:, 0], SD.A_IN: u[:, 1], SD.FE0: 0.0, SD.FE1: 0.0, SD.FE2: 0.0, SD.FD: fd[:, 0],
            SD.FB: fd[:, 1], SD.DELTA: delta, SD.A: a, SD.BRAKING: braking_cmd.to(D), SD.FZ_SUM: f.Fz.sum(-1),
            SD.SGN: torch.sign(x[:, S.VX]), SD.GR0: ext[:, 0], SD.GR1: ext[:, 1], SD.GR2: ext[:, 2], SD.VX1: pl.vx,
            SD.VY1: pl.vy, SD.R1: pl.r, SD.VX_FREE: pl.vx_free, SD.DRAG: pl.drag, SD.STEER: 0.0,
            SD.THROTTLE: 0.0, SD.BRAKE: 0.0, SD.DIRECTION: 1.0}
    assert set(data) == set(SD)
    Dd = np.empty((B, len(SD)))
    for k, v in data.items():
        Dd[:, k] = torch.as_tensor(v, dtype=D).expand(B).numpy()
    fx_b = (f.Fx * pl.cosd - pl.Fy * pl.sind).sum(-1)
    fy_b = (f.Fx * pl.sind + pl.Fy * pl.cosd).sum(-1)
    q1, qd1 = _vertical(x[:, S.Z:S.THETA + 1], x[:, S.ZD:S.THETAD + 1], fx_b, fy_b, f, p, hdt)
    Y = x.clone()
    Y[:, [S.Z, S.PHI, S.THETA]], Y[:, [S.ZD, S.PHID, S.THETAD]] = q1, qd1
    Y[:, [S.X, S.Y, S.PSI]] = torch.stack(pose_step(x, pl.vx, pl.vy, pl.r, hdt), -1)
    Y[:, [S.VX, S.VY, S.R, S.DELTA, S.A]] = torch.stack((pl.vx, pl.vy, pl.r, delta, a), -1)
    return dict(X=x.numpy(), Y=Y.numpy(), W=W, D=Dd, x1=x1, books=bk_ref, dw=dw_ref, f=f)


def _field_masks(*names):
    """Boolean masks over ``Y (B, n)``, ``W (B, N_SCRATCH, 4)`` and ``D (B, N_SD)`` of the fields
    the stages ``names`` write (numba_plant.STAGE_WRITES)."""
    my, mw, md = np.zeros(N_DYN4, bool), np.zeros(N_SCRATCH, bool), np.zeros(len(SD), bool)
    for name in names:
        for mask, enum, block in ((my, S, "y"), (mw, W_, "W"), (md, SD, "D")):
            for field in STAGE_WRITES[name].get(block, ()):
                mask[enum[field]] = True
    return my, mw, md


FORCES = ("loads", "frames", "longitudinal")  # stage 3 as the substep calls it (numba_plant.forces_row)


def _check_stage(name, blocks, packed, hdt, drv, T, tag=""):
    """Run the stage ``name`` with its own outputs NaN and every other field torch's: the outputs it
    declares are written and equal torch's; every other field is left exactly as it was."""
    P, grade, passive = packed
    my, mw, md = _field_masks(*(FORCES if name == "forces" else (name,)))
    Y0, W0, D0 = blocks["Y"].copy(), blocks["W"].copy(), blocks["D"].copy()
    Y0[:, my], W0[:, mw], D0[:, md] = np.nan, np.nan, np.nan
    if name == "forces":
        Y, W, Dd = ns.forces(P, T, hdt, grade, passive, drv, blocks["X"], Y0, W0, D0)
    else:
        Y, W, Dd = ns.stage(name, P, T, hdt, grade, passive, drv, blocks["X"], Y0, W0, D0)
    for got, ref, before, mask, enum, block in ((Y, blocks["Y"], Y0, my, S, "y"), (W, blocks["W"], W0, mw, W_, "W"),
                                                (Dd, blocks["D"], D0, md, SD, "D")):
        for k in np.flatnonzero(mask):
            _close(f"{name}{tag} ({block}.{enum(k).name})", got[:, k], ref[:, k])
        np.testing.assert_array_equal(got[:, ~mask], before[:, ~mask],
                                      err_msg=f"stage {name}{tag} wrote a {block} field it does not own")


@pytest.mark.parametrize("grade,damper", [(False, "passive"), (True, "passive"), (True, "skyhook"), (False, "skyhook")])
def test_each_substep_stage_equals_torch(case, grade, damper):
    """Each stage of the kernel's substep (numba_plant, ``stage(m, x, y, W, D)``) fed torch's fields,
    its own outputs NaN: every output written and equal to torch's stage, nothing else touched."""
    p = _params(grade, damper)
    packed, hdt, T = npl.pack_params(p), 0.01, case["T"]
    blocks = _blocks(case, p, hdt)
    f = blocks["f"]
    assert bool((f.lock == 1).any()) and bool(((f.lock > 0) & (f.lock < 1)).any())  # locked and locking wheels
    for name in ("ground", "lags", "loads", "frames", "longitudinal", "forces", "grade", "planar", "vertical", "pose"):
        _check_stage(name, blocks, packed, hdt, False, T)
    _check_books(blocks, packed, hdt, False, T)


def _check_books(blocks, packed, hdt, drv, T):
    """The books of torch's own step ``x -> x1`` from torch's forces and data: every line (and,
    driven, the DriveWork) equal torch's; the ground at the step's end in ``W[MU1..SBY1]``; no
    other field of ``W`` touched."""
    P, grade, passive = packed
    _, mw, _ = _field_masks("books")
    W0 = blocks["W"].copy()
    W0[:, mw] = np.nan
    bk, dw, Wb = ns.books(P, T, hdt, grade, passive, drv, blocks["X"], blocks["x1"].numpy(), W0, blocks["D"])
    bk_ref = blocks["books"]
    scale = np.abs(bk_ref.dH.numpy()) + np.abs(bk_ref.supplied.numpy()) + 1.0
    for j, name in enumerate(BOOK_LINES):
        err = np.max(np.abs(bk[:, j] - getattr(bk_ref, name).numpy()) / scale)
        assert err < 1e-9, f"stage books ({name}): {err:.3g}"
    for k in np.flatnonzero(mw):  # the ground the books sample at the step's end is the next substep's
        _close(f"books' end ground ({W_(k).name})", Wb[:, k], blocks["W"][:, k])
    np.testing.assert_array_equal(Wb[:, ~mw], W0[:, ~mw], err_msg="the books wrote a W field they do not own")
    if drv:
        ref = blocks["dw"]
        scale = np.abs(ref.drive.numpy()) + np.abs(ref.brakes.numpy()) + 1.0
        for k, name in ((DW.DRIVE, "drive"), (DW.BRAKES, "brakes"), (DW.WHEELSPIN, "wheelspin"),
                        (DW.SLIDING, "sliding")):
            err = np.max(np.abs(dw[:, k] - getattr(ref, name).numpy()) / scale)
            assert err < 1e-9, f"stage drive work ({name}): {err:.3g}"
        _close("drive work (v_drive)", dw[:, DW.V_DRIVE], ref.v_drive)


def test_driven_stages_equal_torch(case):
    """The powertrain-driven substep (``m.drv``: forces from the powertrain's ``D[FD, FB]``), stage by
    stage as above, and its DriveWork."""
    p = _params(True, "passive")
    packed, hdt, T = npl.pack_params(p), 0.01, case["T"]
    blocks = _blocks(case, p, hdt, drive=case["drive"])
    assert bool((blocks["f"].lock > 0).any()) and float(p.m_rot) > 0  # the rotating parts are in
    for name in ("lags", "loads", "frames", "longitudinal", "grade", "planar", "vertical", "pose"):
        _check_stage(name, blocks, packed, hdt, True, T, " driven")
    _check_books(blocks, packed, hdt, True, T)


@pytest.mark.parametrize("preset", ["m998", "chrono"])
def test_powertrain_stages_equal_torch(preset):
    """The powertrain's own stages, as the driven substep calls them (numba_powertrain): the gear
    choice writes the gear and the shift clock and leaves the engine speed exactly as it was; the
    forces write every entry of ``PF`` (the face starts from NaN), equal to torch's stages, over
    states from idle to past the governor in every gear and reverse, driven and backdriven."""
    from dyn4_gym.engine.numba_powertrain import PF, pack_powertrain
    from dyn4_gym.model.constants import RPM
    from dyn4_gym.plant import HMMWV_CHRONO_POWERTRAIN
    from dyn4_gym.plant.powertrain import HUMVEE_POWERTRAIN, PT, powertrain_forces, select_gear

    pt = HUMVEE_POWERTRAIN if preset == "m998" else HMMWV_CHRONO_POWERTRAIN
    Q, maps = pack_powertrain(pt)
    gen = torch.Generator().manual_seed(4)
    s = torch.empty(B, 3, dtype=D)
    s[:, PT.OMEGA_E] = (300.0 + torch.rand(B, generator=gen, dtype=D) * 3500.0) / RPM
    gears = torch.randint(0, pt.n_gears + 1, (B,), generator=gen).to(D)
    s[:, PT.GEAR] = torch.where(gears == 0, -1.0, gears)
    s[:, PT.T_SHIFT] = torch.rand(B, generator=gen, dtype=D) * 2.0 * pt.shift_delay
    vx = torch.randn(B, generator=gen, dtype=D) * 12.0
    direction = torch.where(torch.rand(B, generator=gen) < 0.2, -1.0, 1.0).to(D)
    throttle, brake = torch.rand(B, generator=gen, dtype=D), torch.rand(B, generator=gen, dtype=D) * 0.3
    hdt = 0.01
    ref = select_gear(s, direction, vx, pt, hdt)
    got = ns.gear(s.numpy(), direction.numpy(), vx.numpy(), Q, hdt)
    np.testing.assert_array_equal(got[:, PT.OMEGA_E], s[:, PT.OMEGA_E].numpy())  # not the gear stage's
    _close("gear (GEAR, T_SHIFT)", got[:, [PT.GEAR, PT.T_SHIFT]], ref[:, [PT.GEAR, PT.T_SHIFT]])
    assert bool((ref[:, PT.GEAR] != s[:, PT.GEAR]).any())  # some rows shift
    f = powertrain_forces(ref, throttle, brake, vx, pt)
    out = ns.powertrain_forces(got, throttle.numpy(), brake.numpy(), vx.numpy(), Q, maps)
    for k, name in ((PF.F_DRIVE, "f_drive"), (PF.F_BRAKE, "f_brake"), (PF.T_ENGINE, "t_engine"),
                    (PF.T_PUMP, "t_pump"), (PF.T_TURBINE, "t_turbine"), (PF.EFF, "eff"), (PF.RATIO, "ratio"),
                    (PF.FUEL_POWER, "fuel_power")):
        _close(f"powertrain forces ({name})", out[:, k], getattr(f, name))
    assert len(PF) == 8 and np.isfinite(out).all()
    assert bool((f.f_drive * vx > 0).any()) and bool((f.f_drive * vx < 0).any())  # driven and backdriven rows


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
