"""The task's layouts: observation, built-in reward terms, and one env step's packed info.

docs/env.md ("Observation", "Reward", "Info") describes what each entry means; this module is
the one place their order, scales and default weights are written. :class:`TaskCore` (torch)
and the Numba task kernel both index by these names.
"""

from __future__ import annotations

from enum import IntEnum

from .books import BOOK_LINES, POWERTRAIN_LINES

__all__ = ["ACT", "OBS_DOC", "OBS_TABLE", "OBS_TABLE_DRIVER", "OBS_TABLE_ALL", "OBS_NAMES", "OBS_NAMES_DRIVER", "OBS_CLOCK", "OBS_INDEX", "OBS",
           "N_PREVIEW", "obs_names", "obs_scale", "REWARD_TERM_TABLE", "TERM_ORDER", "TERM", "DEFAULT_WEIGHTS", "TASK_INFO", "INFO_COLUMNS",
           "INFO", "FLAG_COLUMNS", "FLAG", "SENSOR_DOC", "sensor_names", "sensor_scales", "beam_angles", "patch_points",
           "range_window"]



class ACT(IntEnum):
    """Columns of an action: ``(steer, drive)`` in [-1, 1] (``action="accel"``), or ``(steer,
    throttle, brake)`` with the pedals in [0, 1] (``action="driver"``; docs/env.md, "Actions")."""

    STEER = 0
    DRIVE = 1  # accel: + drives (x a_drive), - brakes (x a_brake)
    THROTTLE = 1  # driver
    BRAKE = 2  # driver
    DIRECTION = 3  # drive_step_np's optional fourth column: -1 asks for reverse


N_PREVIEW = 5  # course points ahead in the observation (EnvConfig's course.preview distances)

# (name, unit, scale): observation entry = value / scale, then clipped to [-OBS_CLIP, OBS_CLIP]. A
# scale given as a name is read from the env's parameters or config (obs_scale).
OBS_TABLE = (
    ("vx", "m/s", 10.0), ("vy", "m/s", 2.0), ("yaw_rate", "rad/s", 1.0),
    ("roll", "rad", 0.1), ("pitch", "rad", 0.05), ("roll_rate", "rad/s", 0.5), ("pitch_rate", "rad/s", 0.5),
    ("steer", "rad", "delta_max"), ("drive", "m/s^2", 5.0),
    ("load_FL", "-", 1.0), ("load_FR", "-", 1.0), ("load_RL", "-", 1.0), ("load_RR", "-", 1.0),
    ("mu_FL", "-", 1.0), ("mu_FR", "-", 1.0), ("mu_RL", "-", 1.0), ("mu_RR", "-", 1.0),
    ("cross_track", "m", "half_width"), ("heading_error", "rad", 0.5), ("target_speed", "m/s", 10.0),
) + tuple((f"preview{k}_{c}", "m", 20.0) for k in range(N_PREVIEW) for c in ("x", "y"))
# the driver variant also observes the powertrain (its state is part of the Markov state)
OBS_TABLE_DRIVER = OBS_TABLE + (("engine_speed", "rpm", 1000.0), ("gear", "-", 1.0))
# the clock against the time budget (EnvConfig.observe_clock: the eco task's -v1, whose reward
# depends on the time, so a policy that cannot see it cannot tell early from late): the time
# left to the budget, and the lead over the uniform pace that reaches the goal at the budget
# (s T / s_goal - t; negative when behind: minus the schedule term's "behind")
OBS_CLOCK = (("time_left", "s", 10.0), ("lead", "s", 5.0))
# the ground's friction at the preview points (course.preview_friction: the race task, where a
# policy must see a slippery patch before it reaches it); they come last when observed
OBS_TABLE_ALL = OBS_TABLE_DRIVER + OBS_CLOCK + tuple((f"preview{k}_mu", "-", 1.0) for k in range(N_PREVIEW))
# what each entry is (the docs' observation table is made from this and OBS_TABLE_ALL:
# dyn4_gym/doc_tables.py); frames and signs as docs/plant.md
OBS_DOC = {
    "vx": "forward speed, body frame", "vy": "lateral speed, body frame (left +)",
    "yaw_rate": "yaw rate (counter-clockwise +)", "roll": "roll angle", "pitch": "pitch angle",
    "roll_rate": "roll rate", "pitch_rate": "pitch rate",
    "steer": "the plant's steer (its lag state)", "drive": "the plant's drive or brake (its lag state)",
    **{f"load_{w}": f"the {w} wheel's load over its static load, minus 1" for w in ("FL", "FR", "RL", "RR")},
    **{f"mu_{w}": f"the ground's friction under the {w} wheel" for w in ("FL", "FR", "RL", "RR")},
    "cross_track": "distance from the course's centre line (left +)",
    "heading_error": "yaw less the course's heading, wrapped to [-pi, pi)", "target_speed": "the task's target speed",
    **{f"preview{k}_{c}": f"{c} of the course point course.preview[{k}] ahead, body frame"
       for k in range(N_PREVIEW) for c in ("x", "y")},
    "engine_speed": "the engine's speed", "gear": "the gear engaged (-1: reverse, 1..n forward)",
    "time_left": "the time budget less the elapsed time",
    "lead": "the lead over the uniform pace that reaches the goal at the budget (negative: behind)",
    **{f"preview{k}_mu": f"the ground's friction at preview point {k}" for k in range(N_PREVIEW)},
}
OBS_NAMES = tuple(o[0] for o in OBS_TABLE)
OBS_NAMES_DRIVER = tuple(o[0] for o in OBS_TABLE_DRIVER)
OBS_INDEX = {name: i for i, name in enumerate(o[0] for o in OBS_TABLE_ALL)}
OBS = IntEnum("OBS", [(n.upper(), i) for n, i in OBS_INDEX.items()])
OBS.__doc__ = ("Indices of every observation entry (OBS_TABLE_ALL order); an env observes a selection in this order "
               "(obs_names).")


def obs_names(driver: bool, friction: bool, clock: bool = False) -> tuple:
    """The names an env observes, in order: ``OBS_TABLE``'s, the powertrain's two with
    ``action="driver"``, the clock's two with ``observe_clock``, the preview points' friction with
    ``course.preview_friction``."""
    names = OBS_NAMES_DRIVER if driver else OBS_NAMES
    names += tuple(o[0] for o in OBS_CLOCK) if clock else ()
    return names + (tuple(f"preview{k}_mu" for k in range(N_PREVIEW)) if friction else ())


# Optional sensors (EnvConfig.sensors; docs/env.md, "Sensors"), appended after every entry above
# when on, in this order: the range finders' distances to the corridor's edges, the ground patch's
# friction, the patch's height. Their count is the config's, so they have no fixed OBS index:
# both engines lay them out from the functions below.
SENSOR_DOC = {
    "range{k}": ("m", "max_range", "beam k's distance from the car's centre of mass to the first corridor edge it "
                 "crosses, max_range where it crosses none within it; beams evenly over sensors.fan, "
                 "counter-clockwise from the right, body frame"),
    "patch{i}_{j}_mu": ("-", 1.0, "the ground's friction at patch point (i, j): i ahead, j from the right, body frame"),
    "patch{i}_{j}_h": ("m", 1.0, "the ground's height at patch point (i, j) over its height under the centre of mass"),
}


def sensor_names(beams: int, rows: int, cols: int) -> tuple:
    """The sensor entries' names in observation order (``SENSOR_DOC``'s patterns)."""
    patch = [(i, j) for i in range(rows) for j in range(cols)]
    return (tuple(f"range{k}" for k in range(beams)) + tuple(f"patch{i}_{j}_mu" for i, j in patch)
            + tuple(f"patch{i}_{j}_h" for i, j in patch))


def sensor_scales(beams: int, rows: int, cols: int, max_range: float) -> tuple:
    """The sensor entries' scales, in :func:`sensor_names`' order (observation = value / scale)."""
    n = rows * cols
    return (float(max_range),) * beams + (SENSOR_DOC["patch{i}_{j}_mu"][1],) * n + (SENSOR_DOC["patch{i}_{j}_h"][1],) * n


def beam_angles(beams: int, fan: float) -> tuple:
    """[rad] Each beam's direction from the car's heading (counter-clockwise +): evenly from
    ``-fan / 2`` to ``+fan / 2``, one beam straight ahead; a full circle (``fan = 2 pi``) is
    split into ``beams`` equal sectors from straight behind, so no two beams coincide."""
    import math

    if beams == 1:
        return (0.0,)
    if fan >= 2 * math.pi - 1e-12:
        return tuple(-math.pi + 2 * math.pi * k / beams for k in range(beams))
    return tuple(-0.5 * fan + fan * k / (beams - 1) for k in range(beams))


def patch_points(rows: int, cols: int, start: float, length: float, width: float) -> tuple:
    """The ground patch's points in the body frame [m]: ``(x, y)`` tuples, row-major: ``rows``
    from ``start`` to ``start + length`` ahead, ``cols`` across ``width`` from the right (one
    row: at ``start``; one column: on the heading)."""
    xs = [start + (length * i / (rows - 1) if rows > 1 else 0.0) for i in range(rows)]
    ys = [(-0.5 * width + width * j / (cols - 1)) if cols > 1 else 0.0 for j in range(cols)]
    return tuple((x, y) for x in xs for y in ys)


def range_window(max_range: float, spacing: float) -> int:
    """How many course segments either side of the car's a beam tests: the edges within twice
    ``max_range`` of arc length. A path inside the corridor runs at most ``1 / (1 - kappa h)``
    times as far along the course as it is long (``kappa h`` the curvature times the half width,
    under 1/2 on every drawn course), so a beam meets its first edge crossing in the window."""
    import math

    return int(math.ceil(2.0 * max_range / spacing)) + 2


def obs_scale(name: str, delta_max: float | None = None, half_width: float | None = None) -> float:
    """The scale of observation entry ``name`` (numeric, or the named parameter given here)."""
    sc = OBS_TABLE_ALL[OBS_INDEX[name]][2]
    if sc == "delta_max":
        return float(delta_max)
    if sc == "half_width":
        return float(half_width)
    return float(sc)


# (name, default weight, doc): the built-in reward terms in the kernels' order. Each term is
# unweighted and signed (progress positive, every cost negative); envs/rewards.py has their torch
# functions by these names, the task kernel computes them into TERM's columns.
REWARD_TERM_TABLE = (
    ("progress", 1.0, "[m] distance along the course, integrated over the substeps, at most "
                      "progress_cap x target_speed x control_dt"),
    ("speed", 0.2, "-((vx - v_target) / v_target)^2"),
    ("cross_track", 0.2, "-(cross-track / half-width)^2"),
    ("heading", 0.1, "-(heading error [rad])^2"),
    ("energy", 2.0, "-(positive drive work) / (m g) [m]"),
    ("fuel", 0.0, "-(fuel energy burned) / (m g) [m] (action='driver'; 0 otherwise)"),
    ("tire_slip", 2.0, "-(tire slip dissipation) / (m g) [m]"),
    ("damper", 1.0, "-(damper dissipation) / (m g) [m]"),
    ("comfort", 0.01, "-(roll rate^2 + pitch rate^2) [rad^2/s^2]"),
    ("action_rate", 0.05, "-|a - a_prev|^2"),
    ("termination", 20.0, "-1 when the episode fails"),
    ("time", 0.0, "-(target_speed x control_dt) [m]: the step's time as distance at the target speed"),
    ("late", 0.0, "-(target_speed x control_dt) [m] on each step that ends past time_budget"),
    ("schedule", 0.0, "-target_speed x (the step's growth of the time behind a uniform pace that reaches the goal "
                      "at time_budget less schedule_margin) [m]: over a course it sums to the late term's cost at "
                      "arrival (at margin 0), paid as the car falls behind (0 without a budget)"),
)
TERM_ORDER = tuple(t[0] for t in REWARD_TERM_TABLE)
TERM = IntEnum("TERM", [(n.upper(), i) for i, n in enumerate(TERM_ORDER)])
TERM.__doc__ = "Columns of the built-in reward terms in one step's packed info."
DEFAULT_WEIGHTS = {t[0]: t[1] for t in REWARD_TERM_TABLE}

# the figures of one step that the built-in reward terms read (the kernel's terms_row takes them as
# one vector; units and meaning as envs/rewards.py's StepContext): progress and its cap [m], the
# step's time, the elapsed time, the budget and the schedule's pace [s], the arc lengths at the
# step's start and end and the goal's [m], speed and target speed [m/s], cross-track [m] and
# half width [m], heading error [rad], m g [N], roll and pitch rates [rad/s], the clipped action
# (steer, drive or throttle, brake) and 1.0 where the step failed
STEP_FIGURES = ("progress", "cap", "dt", "elapsed", "budget", "pace", "s0", "s1", "goal", "vx", "vt", "cross_track",
                "half_width", "heading_error", "weight", "roll_rate", "pitch_rate", "steer", "drive", "brake", "failed")
FIG = IntEnum("FIG", [(n.upper(), i) for i, n in enumerate(STEP_FIGURES)])
FIG.__doc__ = "Columns of one step's figures for the reward terms (STEP_FIGURES)."
N_FIG = len(STEP_FIGURES)

# one env step's packed info (the Numba engine's float columns): the built-in terms, the plant's
# books summed over the substeps, the task's own figures, then the powertrain's lines (0 for
# action="accel")
TASK_INFO = ("progress", "distance", "s", "cross_track", "heading_error")
INFO_COLUMNS = (TERM_ORDER + BOOK_LINES + tuple(n + "_info" if n in TERM_ORDER else n for n in TASK_INFO)
                + tuple("pt_" + n for n in POWERTRAIN_LINES))


class INFO(IntEnum):
    """Where each block of the packed info starts, and the task's own columns."""

    TERMS = 0
    BOOKS = len(TERM_ORDER)
    PROGRESS = len(TERM_ORDER) + len(BOOK_LINES)  # [m] along the course, uncapped
    DISTANCE = PROGRESS + 1  # [m] driven
    S = PROGRESS + 2  # [m] arc length at the step's end
    CROSS_TRACK = PROGRESS + 3  # [m] signed, left +
    HEADING_ERROR = PROGRESS + 4  # [rad]
    PT_LINES = PROGRESS + 5


FLAG_COLUMNS = ("terminated", "truncated", "success", "out_of_corridor", "rollover", "nonfinite")
FLAG = IntEnum("FLAG", [(n.upper(), i) for i, n in enumerate(FLAG_COLUMNS)])
FLAG.__doc__ = "Columns of one step's packed bool flags."
