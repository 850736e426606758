"""Issue 49 (step 1): the task's per-row state is declared once (dyn4_gym.model.schema) and both
engines' states, the Numba engine's empty state and the kernels' two bound blocks follow it."""

import dataclasses

import numpy as np
import pytest

from dyn4_gym.engine.numba_task import NumbaState
from dyn4_gym.envs.config import EnvConfig
from dyn4_gym.envs.core import TaskCore, TaskState
from dyn4_gym.model import schema
from dyn4_gym.model.schema import BLOCK_FIELDS, TASK_CONSTS, TASK_FIELD_NAMES, TASK_FIELDS, row_shape


def test_both_states_have_the_schemas_fields_in_its_order():
    assert tuple(f.name for f in dataclasses.fields(NumbaState)) == TASK_FIELD_NAMES
    # the torch state holds the rows' parameters as a Dyn4Params (p), where the Numba one packs them (P)
    torch_fields = tuple(f.name for f in dataclasses.fields(TaskState))
    assert torch_fields == tuple("p" if n == "P" else n for n in TASK_FIELD_NAMES)
    # the kernels' static indices follow the declared order (the ground travels on its own)
    assert BLOCK_FIELDS == tuple(f.name for f in TASK_FIELDS if f.name != "terrain")
    for n, name in enumerate(BLOCK_FIELDS):
        key = "ST_" + {"prev_action": "PREV"}.get(name, name).upper()
        assert getattr(schema, key) == n, name
    for n, name in enumerate(TASK_CONSTS):
        key = "K_" + {"step_consts": "STEP"}.get(name, name).upper()
        assert getattr(schema, key) == n, name


@pytest.mark.parametrize("action", ["accel", "driver"])
def test_the_empty_state_and_the_blocks_follow_the_schema(action):
    from dyn4_gym.envs.numba_setup import NumbaTask

    core = TaskCore(EnvConfig(dtype="float64", action=action))
    task = NumbaTask(core)
    st = task.empty_state(3)
    sizes = {"n_points": task.n_points, "n_action": core.n_action}
    block = st.block()
    assert len(block) == len(BLOCK_FIELDS)
    assert isinstance(st.terrain, tuple)  # the packed ground, its own block
    for f, a in zip([f for f in TASK_FIELDS if f.name in BLOCK_FIELDS], block):
        assert a.shape == (3,) + row_shape(f, sizes) and a.dtype == np.dtype(f.dtype), f.name
    np.testing.assert_array_equal(st.P, np.tile(task.P, (3, 1)))
    assert len(task.block) == len(TASK_CONSTS)
    for name, v in zip(TASK_CONSTS, task.block):
        assert v is getattr(task, name), name  # bound, not copied: in-place changes reach the kernels
        assert not isinstance(v, tuple), name  # flat: Numba's parallel loops refuse a tuple inside a tuple
