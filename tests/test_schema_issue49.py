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


def _functions(folder):
    import ast
    import pathlib

    import dyn4_gym

    for path in sorted((pathlib.Path(dyn4_gym.__file__).parent / folder).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                a = node.args
                yield f"{folder}/{path.name}:{node.name}", [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]


def test_no_kernel_function_takes_more_than_twelve_parameters():
    """Issue 49 (step 2): the kernels pass named blocks (the substep's ``m``, ``W``, ``D``; the
    task's bound state block), not argument lists; the widest was 29."""
    wide = {name: len(args) for name, args in _functions("engine") if len(args) > 12}
    assert not wide, wide


def test_every_substep_stage_has_one_signature():
    """MJX-style: every stage of the kernel's substep is ``stage(m, x, y, W, D)`` (the books add their
    lines), and every stage the schema names declares what it writes."""
    from dyn4_gym.engine import numba_plant as npl
    from dyn4_gym.engine.numba_stages import STAGES

    args = dict(_functions("engine"))
    for name, fn in STAGES.items():
        assert args[f"engine/numba_plant.py:{fn.py_func.__name__}"] == ["m", "x", "y", "W", "D"], name
    assert args["engine/numba_plant.py:forces_row"] == ["m", "x", "y", "W", "D"]
    assert args["engine/numba_plant.py:substep_row"] == ["m", "x", "y", "W", "D", "bk", "dwork"]
    assert args["engine/numba_plant.py:books_row"] == ["m", "x", "y", "W", "D", "bk", "dwork"]
    assert set(npl.STAGE_WRITES) == set(STAGES) | {"books"}
    for stage, blocks in npl.STAGE_WRITES.items():  # every declared field exists in its block
        for block, fields in blocks.items():
            enum = {"W": npl.W_, "D": npl.SD, "y": npl.S}[block]
            assert all(f in enum.__members__ for f in fields), (stage, block, fields)
