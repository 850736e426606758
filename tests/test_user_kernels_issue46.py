"""Issue 46, class 2: a user's terrain kind on the Numba engine. Its ``pack()`` output is checked
(tuple, rows, dtype, finite) when the env is built and at every reset; a sampler that raises,
returns a non-finite value or does not compile surfaces as an error naming the kind, on the
single and the batched step, and the env's state is left as it was before the step."""

import math
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from dyn4_gym._checks import GroundKernelError
from dyn4_gym.envs.vector import Dyn4VectorEnv
from dyn4_gym.ground.samplers import Flat
from dyn4_gym.ground.terrain import TERRAIN_KINDS, GroundKernel, TerrainKind, register_terrain

pytestmark = pytest.mark.filterwarnings("ignore:.*is out of date:DeprecationWarning")


@njit(cache=False)
def _sample(b, X, Y, T, slope_step):
    """Flat ground at mu 0.8 until X = 25 m; past it, row mode 1 raises, mode 2 returns NaN."""
    mode = T[0][b]
    if X > 25.0 and mode == 1.0:
        raise ValueError("past 25 m")
    if X > 25.0 and mode == 2.0:
        return 0.8, np.nan, 0.0, 0.0
    return 0.8, 0.0, 0.0, 0.0


@njit(cache=False)
def _wrong_arity(b, X, Y, T):
    return 0.8, 0.0, 0.0, 0.0


def _draw(cfg, ctx):
    return Flat()


def _unpack(T):
    return Flat()


def _pack_mode(mode):
    return lambda g, batch: (np.full(batch, float(mode)),)


def _kind(name, pack, sample=_sample):
    cfg = dataclass(frozen=True)(type(f"Cfg_{name}", (), {"__annotations__": {"kind": str}, "kind": name,
                                                          "validate": lambda self, path: None}))
    return register_terrain(TerrainKind(name, cfg, _draw, kernel=GroundKernel(sample, pack, _unpack)), overwrite=True)


BAD_PACKS = {
    "t46_not_tuple": (lambda g, batch: [np.zeros(batch)], "tuple"),
    "t46_rows": (lambda g, batch: (np.zeros(batch + 1),), "first axis"),
    "t46_dtype": (lambda g, batch: (np.zeros(batch, dtype=np.float32),), "float64"),
    "t46_nan": (lambda g, batch: (np.full(batch, np.nan),), "non-finite"),
    "t46_bool": (lambda g, batch: (np.zeros(batch), True), "finite number"),
}


@pytest.fixture(scope="module")
def kinds():
    names = {"t46_ok": _kind("t46_ok", _pack_mode(0)), "t46_raise": _kind("t46_raise", _pack_mode(1)),
             "t46_nonfinite": _kind("t46_nonfinite", _pack_mode(2)),
             "t46_arity": _kind("t46_arity", _pack_mode(0), _wrong_arity)}
    for name, (pack, _) in BAD_PACKS.items():
        names[name] = _kind(name, pack)
    yield names
    for name in names:
        TERRAIN_KINDS.pop(name, None)


def _env(kind, n):
    return Dyn4VectorEnv(num_envs=n, engine="numba", dtype="float64", episode_steps=400, ground={"kind": kind})


@pytest.mark.parametrize("kind", sorted(BAD_PACKS))
def test_a_bad_pack_is_refused_naming_the_kind(kinds, kind):
    with pytest.raises(GroundKernelError, match=f"terrain kind '{kind}'.*{BAD_PACKS[kind][1]}"):
        _env(kind, 2)


@pytest.mark.parametrize("kind, says", [("t46_raise", "ValueError: past 25 m"), ("t46_nonfinite", "non-finite")])
@pytest.mark.parametrize("n", [1, 3])
def test_a_failing_sampler_is_an_error_naming_the_kind_and_the_state_is_kept(kinds, kind, says, n):
    env = _env(kind, n)
    env.reset(seed=0)
    state = env.runner.state
    action = np.tile(np.array([0.0, 1.0], dtype=np.float32), (n, 1))
    for _ in range(200):  # from 10 m/s at full drive, the car passes 25 m within a few seconds
        before = {f: getattr(state, f).copy() for f in ("x", "idx", "s", "t", "prev_action", "pt")}
        try:
            env.step(action)
        except GroundKernelError as exc:
            message = str(exc)
            break
    else:
        pytest.fail("the sampler never failed")
    assert f"terrain kind '{kind}'" in message and "GroundKernel.sample" in message
    assert says in message or n > 1  # the parallel kernel's own exception text is Numba's
    for f, a in before.items():
        assert np.array_equal(getattr(env.runner.state, f), a), f
    assert (before["x"][:, 0] <= 25.0 + 30.0).all()


def test_a_sampler_that_does_not_compile_is_named(kinds):
    env = _env("t46_arity", 1)
    with pytest.raises(GroundKernelError, match="terrain kind 't46_arity'.*GroundKernel.sample"):
        env.reset(seed=0)


def test_a_user_sampler_that_behaves_runs_on_both_paths(kinds):
    for n in (1, 3):
        env = _env("t46_ok", n)
        env.reset(seed=0)
        for _ in range(100):
            obs, r, te, tr, info = env.step(np.tile(np.array([0.0, 1.0], dtype=np.float32), (n, 1)))
            assert np.isfinite(obs).all() and np.isfinite(r).all()


def _array(n, dtype, v):
    with np.errstate(invalid="ignore"):  # NaN cast to an int array: numpy's warning, not ours
        return np.full(n, v).astype(dtype)


_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.integers(-2**70, 2**70), st.booleans(), st.none(),
    st.text(max_size=3),
    st.builds(_array, st.integers(0, 5),
              st.sampled_from([np.float64, np.float32, np.int64, np.bool_, object]),
              st.floats(allow_nan=True, allow_infinity=True)),
    st.builds(lambda shape: np.zeros(shape), st.tuples(st.integers(0, 4), st.integers(0, 3))),
    st.builds(lambda: np.float64(1.0)))


@given(packed=st.one_of(st.lists(_VALUES, max_size=4).map(tuple), _VALUES, st.lists(_VALUES, max_size=3)),
       rows=st.integers(1, 4), shared=st.booleans())
@settings(max_examples=300, deadline=None)
def test_any_pack_output_is_accepted_exactly_when_valid_or_refused_by_name(packed, rows, shared):
    """The user-kernel surface under hostile ``pack()`` outputs: accepted exactly when every item is
    a finite float64 array (with the rows as first axis unless shared) or a finite number, else a
    GroundKernelError naming the kind, and never another exception."""
    from dyn4_gym.engine.numba_ground import check_packed

    def ok(a):
        if isinstance(a, np.ndarray):
            return (a.dtype == np.float64 and (shared or (a.ndim > 0 and a.shape[0] == rows))
                    and bool(np.isfinite(a).all()))
        return isinstance(a, (int, float)) and not isinstance(a, bool) and math.isfinite(a)

    valid = isinstance(packed, tuple) and all(ok(a) for a in packed)
    if valid:
        assert check_packed("hostile", packed, rows, shared) is packed
    else:
        with pytest.raises(GroundKernelError, match="terrain kind 'hostile'"):
            check_packed("hostile", packed, rows, shared)
