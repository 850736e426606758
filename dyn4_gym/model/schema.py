"""The task's per-row state, declared once (issue 49): each field's name, per-row shape, dtype and
the stages that write it. Both engines' states follow it: the torch engine's
:class:`dyn4_gym.envs.core.TaskState` (its fields in this order, the rows' parameters as a
``Dyn4Params`` where the Numba engine packs them) and the Numba engine's ``NumbaState``, whose
arrays travel into the kernels as one bound block, the tuple ``NumbaState.block()`` (every field
but the ground, which travels as its own tuple), read there by the ``ST_*`` indices below (plain
ints: Numba's static tuple index).

A shape entry is an int, or the name of a size the task sets (:func:`row_shape`): ``n_points``
the course's points, ``n_action`` the action's width.
"""

from __future__ import annotations

from dataclasses import dataclass

from .packed import N_PARAMS
from .state import N_DYN4, N_PT

__all__ = ["Field", "TASK_FIELDS", "TASK_FIELD_NAMES", "BLOCK_FIELDS", "row_shape", "TASK_CONSTS"]



@dataclass(frozen=True)
class Field:
    name: str
    shape: tuple  # per row (after the batch dimension); None: the ground's packed tuple (model.packed.TERRAIN_FIELDS)
    dtype: str  # "float64", "int64"
    writers: str  # the stages that write it
    doc: str


TASK_FIELDS = (
    Field("x", (N_DYN4,), "float64", "reset (rest_row), step (the substeps)",
          "the plant state (model.state.DYN4): SI units, the body frame's speeds"),
    Field("terrain", None, "float64", "reset (the ground's draw)",
          "the row's ground, packed (model.packed.TERRAIN_FIELDS)"),
    Field("course_xy", ("n_points", 2), "float64", "reset (the course)", "[m] the course's centre line points"),
    Field("course_heading", ("n_points",), "float64", "reset (the course)", "[rad] the centre line's heading there"),
    Field("idx", (), "int64", "reset, step (the projection)", "the course segment of the last projection"),
    Field("s", (), "float64", "reset, step (the projection)", "[m] the arc length of the last projection"),
    Field("t", (), "int64", "reset, step", "steps in this episode"),
    Field("prev_action", ("n_action",), "float64", "reset, step", "the last clipped action"),
    Field("target_speed", (), "float64", "reset", "[m/s] the task's target speed"),
    Field("key", (), "int64", "reset", "the row's random stream"),
    Field("episode", (), "int64", "reset", "episodes drawn on that stream"),
    Field("pt", (N_PT,), "float64", "reset, step (the powertrain)", "the powertrain state (model.state.PT)"),
    Field("P", (N_PARAMS,), "float64", "reset (vehicle_ranges)", "the row's packed parameters (model.packed.PK)"),
)
TASK_FIELD_NAMES = tuple(f.name for f in TASK_FIELDS)
# the state block the kernels take: every field but the ground, which travels as its own tuple
# (model.packed.TERRAIN_FIELDS): Numba's parallel loops take a tuple only if it holds no tuple
BLOCK_FIELDS = tuple(f.name for f in TASK_FIELDS if f.shape is not None)

# the block's indices, in BLOCK_FIELDS' order (tied to it by the assert below)
ST_X, ST_COURSE_XY, ST_COURSE_HEADING, ST_IDX, ST_S, ST_T, ST_PREV, ST_TARGET_SPEED, ST_KEY, ST_EPISODE, ST_PT, \
    ST_P = range(12)
assert BLOCK_FIELDS == ("x", "course_xy", "course_heading", "idx", "s", "t", "prev_action", "target_speed", "key",
                        "episode", "pt", "P")


def row_shape(field: Field, sizes: dict) -> tuple:
    """``field``'s per-row shape with the task's ``sizes`` (``{"n_points": ..., "n_action": ...}``) put in."""
    return tuple(sizes[d] if isinstance(d, str) else d for d in field.shape)


# The task's constants the kernels read (the Numba engine's NumbaTask holds them), bound once into
# one flat block (no tuple inside: see BLOCK_FIELDS), read by the K_* indices: what each is, where
# NumbaTask says; the powertrain's four maps (numba_powertrain.pack_powertrain) one by one.
TASK_CONSTS = ("grade", "passive", "hdt", "n_sub", "step_consts", "weights", "ahead", "scales", "cols", "sense",
               "driver", "Q", "torque_map", "loss_map", "capacity_map", "ratio_map", "widths", "reset_course",
               "line_xy", "line_heading", "reset_ground", "v0", "vt", "pt0")
K_GRADE, K_PASSIVE, K_HDT, K_N_SUB, K_STEP, K_WEIGHTS, K_AHEAD, K_SCALES, K_COLS, K_SENSE, K_DRIVER, K_Q, \
    K_TORQUE_MAP, K_LOSS_MAP, K_CAPACITY_MAP, K_RATIO_MAP, K_WIDTHS, K_RESET_COURSE, K_LINE_XY, K_LINE_HEADING, \
    K_RESET_GROUND, K_V0, K_VT, K_PT0 = range(24)
assert len(TASK_CONSTS) == 24
