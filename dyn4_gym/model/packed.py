"""How the Numba kernels receive what the torch engine holds as dataclasses: flat float64
vectors with named offsets (docs/engines.md, "The model layer").

``engine/numba_plant.pack_params`` writes a :class:`dyn4_gym.plant.params.Dyn4Params` in
``PARAM_NAMES`` then ``WHEEL_PARAM_NAMES`` order (4 values each, FL FR RL RR); the kernels read
``P[PK.M]`` for a scalar and ``P[PK.K + i]`` for wheel ``i``'s entry.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["PARAM_NAMES", "WHEEL_PARAM_NAMES", "PK", "N_PARAMS", "PQ", "TERRAIN_FIELDS", "STEP_CONSTS", "SC",
           "COURSE_CONSTS", "CC", "GROUND_CONSTS", "GC", "SN", "TK_WAVE_KX", "TK_WAVE_KY", "TK_WAVE_AMP",
           "TK_WAVE_PHASE", "TK_BASE_MU", "TK_PATCH_X", "TK_PATCH_Y", "TK_PATCH_R", "TK_PATCH_MU", "TK_BUMP_X",
           "TK_BUMP_Y", "TK_BUMP_H", "TK_BUMP_R", "TK_EDGE"]

# Dyn4Params' scalar fields (L = lf + lr), then the per-wheel ones
PARAM_NAMES = ("m", "Iz", "h", "g", "eps_load", "delta_max", "a_drive", "a_brake", "power", "tau_steer",
               "tau_drive", "c_drag", "f_roll", "v_lat", "v_roll", "Ix", "Iy", "m_rot", "L")
WHEEL_PARAM_NAMES = ("x_w", "y_w", "Fz0", "B", "C", "E", "drive_share", "k", "damp")
_UPPER = {"x_w": "X_W", "y_w": "Y_W", "Fz0": "FZ0", "drive_share": "DRIVE_SHARE"}
PK = IntEnum("PK", [(n.upper(), i) for i, n in enumerate(PARAM_NAMES)]
             + [(_UPPER.get(n, n.upper()), len(PARAM_NAMES) + 4 * j) for j, n in enumerate(WHEEL_PARAM_NAMES)])
PK.__doc__ = "Offsets into a packed parameter vector: a scalar's index, or a wheel block's first index."
N_PARAMS = len(PARAM_NAMES) + 4 * len(WHEEL_PARAM_NAMES)


class PQ(IntEnum):
    """Offsets into a packed powertrain (numba_powertrain.pack_powertrain): scalars, then the
    forward gears' ratios from ``G1``."""

    J = 0  # crank inertia [kg m^2]
    UP = 1  # upshift [rpm]
    DOWN = 2  # downshift [rpm]
    DELAY = 3  # shift delay [s]
    COUPLE = 4  # converter coupling speed ratio
    TB = 5  # brake torque [N m]
    R = 6  # wheel radius [m]
    ETA = 7  # driveline efficiency
    IDLE = 8  # idle [rpm]
    BAND = 9  # idle governor band [rpm]
    ETA_I = 10  # indicated efficiency
    NG = 11  # forward gears
    REV = 12  # reverse ratio
    FUEL_CUT = 13  # 1: the combustion torque never below 0 (PowertrainParams.fuel_cut)
    OVERRUN = 14  # reverse flow's law: its index in powertrain.OVERRUN (0 mirror, 1 turbine)
    LOCKOUT = 15  # [m/s] the direction changes only below this speed (inf: at any)
    G1 = 16  # first forward ratio


# the rough ground kind's batched fields (ground.terrain.Terrain, without its scalar patch_edge)
TERRAIN_FIELDS = ("wave_kx", "wave_ky", "wave_amp", "wave_phase", "base_mu", "patch_x", "patch_y", "patch_r",
                  "patch_mu", "bump_x", "bump_y", "bump_h", "bump_r")
# their positions in the kernels' terrain tuple (engine/numba_plant.pack_terrain), by name, and the
# patch edge's after them: plain module ints, which Numba reads as constants, so ``T[TK_BASE_MU]``
# is a static index into the tuple (an IntEnum member is not); the assert ties each to its field
(TK_WAVE_KX, TK_WAVE_KY, TK_WAVE_AMP, TK_WAVE_PHASE, TK_BASE_MU, TK_PATCH_X, TK_PATCH_Y, TK_PATCH_R, TK_PATCH_MU,
 TK_BUMP_X, TK_BUMP_Y, TK_BUMP_H, TK_BUMP_R) = range(len(TERRAIN_FIELDS))
TK_EDGE = len(TERRAIN_FIELDS)
assert [globals()["TK_" + n.upper()] for n in TERRAIN_FIELDS] == list(range(len(TERRAIN_FIELDS)))

# the task kernel's constants, from the env's config (envs/numba_setup.py packs them)
# cap: the progress cap per step per m/s of target speed [s] (inf: uncapped); penalty: the
# termination weight the non-finite guard pays; budget: the arrival's time budget [s] (inf: none);
# pace: the schedule term's time to the goal [s], EnvConfig.pace (the budget less schedule_margin; inf: none)
STEP_CONSTS = ("spacing", "half_width", "goal_margin", "roll_limit", "episode_steps", "cap", "penalty", "budget", "pace")
SC = IntEnum("SC", [(n.upper(), i) for i, n in enumerate(STEP_CONSTS)])
COURSE_CONSTS = ("spacing", "lat_accel", "wavelength_min", "wavelength_max", "lead_in", "half_width", "n_waves",
                 "i0", "frac", "s0", "start_offset", "start_heading", "given_line")
CC = IntEnum("CC", [(n.upper(), i) for i, n in enumerate(COURSE_CONSTS)])
GROUND_CONSTS = ("hills_amplitude", "hills_wavelength_min", "hills_wavelength_max", "base_mu", "patch_mu_min",
                 "patch_mu_max", "patch_radius_min", "patch_radius_max", "bump_height_min", "bump_height_max",
                 "bump_radius")
GC = IntEnum("GC", [(n.upper(), i) for i, n in enumerate(GROUND_CONSTS)])


class SN(IntEnum):
    """The observation's optional sensors for the kernels (envs/numba_setup.py packs them from
    model.task's beam_angles, patch_points and range_window): this header, then the beams'
    angles [rad] from ``DATA``, then the patch points' body-frame x [m], then their y [m]."""

    BEAMS = 0  # range finders
    RANGE = 1  # [m] their max range
    WINDOW = 2  # course segments tested either side of the car's (model.task.range_window)
    POINTS = 3  # ground patch points
    DATA = 4
