"""The two engines of the numpy faces are one task (envs/engines.py): the Numba kernel against the
torch task core in float64, over whole episodes with resets, and both against the env golden.

Regenerate the golden only on purpose: ``DYN4_GOLDEN_WRITE=1 python -m pytest tests/test_engine_env.py``.

History: regenerated when the rough terrain's slopes became exact (issue 21: ``Terrain.height_gradient``
from the hills' own phases, in both engines, instead of central differences over 1e-3 L):
terminations unchanged, rewards moved by at most 4.4e-6 (of up to 20), books by at most 0.087 J.
"""

import json
import os
import pickle
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from dataclasses import dataclass

from gymnasium.vector import AutoresetMode
from numba import njit

import dyn4_gym
from dyn4_gym.envs import ConfigError, Dyn4Env, Dyn4VectorEnv, RewardTerm
from dyn4_gym.ground import TERRAIN_KINDS, Ground, GroundKernel, TerrainKind, register_terrain

BOOKS = ("dH", "damper", "dissipated", "drag", "grade", "ground", "lever", "limiter", "residual", "supplied", "tire")
TERMS = ("action_rate", "comfort", "cross_track", "damper", "energy", "heading", "progress", "speed", "termination",
         "tire_slip", "time")
GOLDEN = Path(__file__).parent / "data" / "env_golden.json"
TASKS = {"default": {}, "flat": {"ground": dict(dyn4_gym.FLAT_GROUND)},
         "sliding": {"target_speed": 16.0, "ground": {"base_mu": 0.35}},  # past the tires' peak often
         "creeping": {"target_speed": 1.0, "start_speed": 0.0, "ground": {"bump_height_min": 0.2,
                                                                            "bump_height_max": 0.3}},
         # the race task: the friction ahead observed (sampled in the kernel), the time term
         "race": {k: v for k, v in dyn4_gym.RACE.items() if k != "engine"},
         # the eco task: its time budget (the late term), driven through the powertrain below
         "eco": {k: v for k, v in dyn4_gym.ECO.items() if k not in ("engine", "action", "time_budget")}
         | {"time_budget": 5.0}}
# the eco task's -v1: the clock observed too (time left, lead over the pace), past the budget as well
TASKS["eco_clock"] = dict(TASKS["eco"], observe_clock=True)


def _rel(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1.0))) if a.size else 0.0


def _same_obs(a, b):
    """Observations are float32 on both engines: equal to float32 rounding. (Where the course
    projection ties between two segments at an outside corner of the centre line, a 1e-14 m state
    difference picks the other segment; course.project keeps the cross-track continuous there, so
    the observation does not jump.)"""
    d = np.abs(a.astype(np.float64) - b) / np.maximum(np.abs(b.astype(np.float64)), 1.0)
    assert d.max() < 2e-7, d.max()


def _drive(env, n_steps, seed=0, n=4, term_names=TERMS, book_names=BOOKS, loc=(0.0, 0.5), scale=(0.6, 0.6)):
    """Random actions (with a drive bias, so episodes end and reset; some outside the box) on a
    vector env; every output. ``loc`` / ``scale`` per action entry."""
    rng = np.random.default_rng(seed)
    out = {"obs": [], "reward": [], "term": [], "trunc": [], "books": [], "terms": []}
    obs, _ = env.reset(seed=seed)
    out["obs"].append(obs)
    for _ in range(n_steps):
        a = np.clip(rng.normal(loc, scale, (n, len(loc))), -1.5, 1.5).astype(np.float32)
        obs, r, te, tr, info = env.step(a)
        out["obs"].append(obs)
        out["reward"].append(r)
        out["term"].append(te)
        out["trunc"].append(tr)
        # rows reset in this step (NEXT_STEP) carry no step info: zeros, as the env's own arrays
        books, terms = info.get("books", {}), info.get("reward_terms", {})
        out["books"].append(np.stack([books.get(k, np.zeros(n)) for k in book_names], -1))
        out["terms"].append(np.stack([terms.get(k, np.zeros(n)) for k in term_names], -1))
    return {k: np.asarray(v) for k, v in out.items()}


@pytest.mark.parametrize("task", ["default", "flat", "sliding", "creeping", "race"])
def test_same_seed_same_actions_same_episodes_on_both_engines(task):
    """1,000 steps, 4 rows, resets included: the engines agree to 1e-9 (float64)."""
    kw = dict(TASKS[task], dtype="float64", episode_steps=150)
    nb = _drive(Dyn4VectorEnv(num_envs=4, engine="numba", **kw), 1000)
    tc = _drive(Dyn4VectorEnv(num_envs=4, engine="torch", **kw), 1000)
    assert (nb["term"] | nb["trunc"]).sum() >= 8  # resets happened
    assert np.array_equal(nb["term"], tc["term"]) and np.array_equal(nb["trunc"], tc["trunc"])
    _same_obs(nb["obs"], tc["obs"])
    assert _rel(nb["reward"], tc["reward"]) < 1e-9
    assert _rel(nb["terms"], tc["terms"]) < 1e-9
    scale = 1e5  # J: the books lines are differences of energies ~1e5-1e6 J
    assert np.max(np.abs(nb["books"] - tc["books"])) / scale < 1e-9


DRIVER_LINES = ("supplied", "dissipated", "tire", "residual", "fuel", "powertrain", "engine", "converter", "driveline",
                "drive", "brakes", "wheelspin", "sliding")
DRIVER_TERMS = ("progress", "speed", "energy", "fuel", "action_rate", "termination", "late")


@pytest.mark.parametrize("task", ["default", "flat", "race", "eco", "eco_clock"])
def test_driver_variant_is_the_same_on_both_engines(task):
    """``action="driver"`` (the powertrain in the kernel), fuel weighted: 600 steps, 4 rows, resets."""
    kw = dict(TASKS[task], action="driver", dtype="float64", episode_steps=150, reward_weights={"fuel": 1.0})
    run = dict(n_steps=600, term_names=DRIVER_TERMS, book_names=DRIVER_LINES, loc=(0.0, 0.55, 0.05),
               scale=(0.6, 0.4, 0.2))
    nb = _drive(Dyn4VectorEnv(num_envs=4, engine="numba", **kw), **run)
    tc = _drive(Dyn4VectorEnv(num_envs=4, engine="torch", **kw), **run)
    assert (nb["term"] | nb["trunc"]).sum() >= 4
    assert np.array_equal(nb["term"], tc["term"]) and np.array_equal(nb["trunc"], tc["trunc"])
    _same_obs(nb["obs"], tc["obs"])
    assert _rel(nb["reward"], tc["reward"]) < 1e-9
    assert _rel(nb["terms"], tc["terms"]) < 1e-9
    assert np.max(np.abs(nb["books"] - tc["books"])) / 1e5 < 1e-9
    # the powertrain's books close per step: fuel - powertrain = drive; supplied = drive - brakes - wheelspin - sliding
    b = nb["books"]
    i = {k: j for j, k in enumerate(DRIVER_LINES)}
    flow = np.abs(b[..., i["fuel"]]) + np.abs(b[..., i["supplied"]]) + 1.0
    assert np.max(np.abs(b[..., i["fuel"]] - b[..., i["powertrain"]] - b[..., i["drive"]]) / flow) < 1e-9
    assert np.max(np.abs(b[..., i["supplied"]] - b[..., i["drive"]] + b[..., i["brakes"]] + b[..., i["wheelspin"]]
                         + b[..., i["sliding"]]) / flow) < 1e-9
    assert (b[..., i["fuel"]] >= 0).all() and b[..., i["fuel"]].sum() > 0
    assert (nb["terms"][..., DRIVER_TERMS.index("fuel")] <= 0).all()
    # observations carry the engine speed [krpm] and the gear
    from dyn4_gym.model.task import OBS
    assert set(np.unique(nb["obs"][..., OBS.GEAR]).tolist()) <= {1.0, 2.0, 3.0}
    assert (nb["obs"][..., OBS.ENGINE_SPEED] > 0.5).all()


def test_the_engines_reproduce_the_env_golden():
    """A seeded drive on the default task: both engines reproduce the recorded rewards, books and
    terminations (1e-9) and observations (float32)."""
    kw = dict(dtype="float64", episode_steps=60)
    runs = {e: _drive(Dyn4VectorEnv(num_envs=4, engine=e, **kw), 150, seed=11) for e in ("torch", "numba")}
    if os.environ.get("DYN4_GOLDEN_WRITE"):
        r = runs["torch"]
        GOLDEN.write_text(json.dumps({"about": "tests/test_engine_env.py: 150 steps, 4 rows, seed 11, "
                                               "Dyn4Humvee-v1 with episode_steps=60, float64, torch engine",
                                      **{k: r[k].tolist() for k in ("obs", "reward", "term", "trunc", "books")}}))
    g = json.loads(GOLDEN.read_text())
    for eng, r in runs.items():
        assert np.array_equal(r["term"], g["term"]) and np.array_equal(r["trunc"], g["trunc"]), eng
        assert _rel(r["reward"], g["reward"]) < 1e-9, eng
        assert np.max(np.abs(r["books"] - np.asarray(g["books"]))) / 1e5 < 1e-9, eng
        _same_obs(r["obs"], np.asarray(g["obs"], dtype=np.float32))


def test_single_env_is_a_vector_row_on_the_numba_engine():
    env = gym.make("Dyn4Humvee-v1")
    assert env.unwrapped.engine == "numba"
    v = Dyn4VectorEnv(num_envs=3)
    vo, _ = v.reset(seed=20)
    o, _ = env.reset(seed=22)
    assert np.array_equal(o, vo[2])
    rng = np.random.default_rng(1)
    for _ in range(50):
        a = rng.uniform(-1, 1, (3, 2)).astype(np.float32)
        vo, vr, *_ = v.step(a)
        o, r, *_ = env.step(a[2])
        assert np.array_equal(o, vo[2]) and r == vr[2]


def test_the_powertrain_state_of_a_car_without_one_stays_as_reset():
    # the kernel swapped its powertrain buffers on every substep, driver or not, and wrote back
    # uninitialised memory (a NaN among it) as the state of a car that has no powertrain (CI, stop 52)
    v = Dyn4VectorEnv(num_envs=2)
    v.reset(seed=0)
    pt = v.runner.state.pt.copy()
    for k in range(1, 4):  # odd and even numbers of steps
        v.step(np.zeros((2, 2), dtype=np.float32))
        assert np.array_equal(v.runner.state.pt, pt), k


def test_a_custom_term_sees_the_same_clock_on_both_engines():
    """``StepContext``'s ``elapsed``, ``control_dt``, ``time_budget`` and ``pace`` as the kernel's
    ``time``, ``late`` and ``schedule`` terms use them, on both engines, through resets."""
    def _clock(ctx):
        over = torch.as_tensor(ctx.elapsed, dtype=torch.float64) > ctx.time_budget
        ahead = torch.as_tensor(ctx.elapsed, dtype=torch.float64) < ctx.pace
        return (torch.as_tensor(ctx.elapsed, dtype=torch.float64) * ctx.control_dt + over.to(torch.float64)
                + 10.0 * ahead.to(torch.float64))

    kw = dict(dtype="float64", reward_terms=(RewardTerm("clock", _clock),),
              reward_weights={"clock": 1.0, "late": 1.0, "schedule": 1.0}, time_budget=2.0, schedule_margin=0.5,
              episode_steps=60)
    names = ("clock", "late", "time", "schedule")
    nb = _drive(Dyn4VectorEnv(num_envs=3, engine="numba", **kw), 90, n=3, term_names=names)
    tc = _drive(Dyn4VectorEnv(num_envs=3, engine="torch", **kw), 90, n=3, term_names=names)
    assert np.array_equal(nb["term"], tc["term"]) and (nb["trunc"] | nb["term"]).any()
    assert _rel(nb["terms"], tc["terms"]) < 1e-12
    late = nb["terms"][..., 1]
    assert (late == -0.5).any() and (late == 0.0).any()  # 10 m/s x 0.05 s past the 2 s budget


def test_a_custom_term_sees_every_context_field_alike_on_both_engines():
    """Every field of ``StepContext`` (both engines build it with ``TaskCore.context``), read by a
    user's term, over 60 steps with resets: equal to 1e-9 on the numba and the torch engine."""
    from dataclasses import fields

    from dyn4_gym.envs.rewards import StepContext

    def capture(seen):
        def _seen(ctx):
            row = {}
            for f in fields(StepContext):
                v = getattr(ctx, f.name)
                if f.name == "books":
                    row.update({f"books.{k}": np.asarray(b, dtype=np.float64) for k, b in v.items()})
                else:
                    row[f.name] = np.asarray(torch.as_tensor(v).detach().to(torch.float64))
            seen.append(row)
            return torch.zeros_like(ctx.progress)
        return _seen

    got = {}
    for engine in ("numba", "torch"):
        seen = []
        kw = dict(dtype="float64", reward_terms=(RewardTerm("seen", capture(seen)),), reward_weights={"seen": 1.0},
                  time_budget=2.0, schedule_margin=0.5, episode_steps=40)
        out = _drive(Dyn4VectorEnv(num_envs=3, engine=engine, **kw), 60, n=3)
        got[engine] = seen
    done = out["term"] | out["trunc"]
    assert done.any()
    # a row reset in a step (autoreset NEXT_STEP) has no step: its terms are dropped on both engines
    stepped = ~np.concatenate([np.zeros((1, 3), bool), done[:-1]])
    nb, tc = got["numba"], got["torch"]
    assert len(nb) == len(tc) == 60 and nb[0].keys() == tc[0].keys()
    assert {f.name for f in fields(StepContext)} - {"books"} <= nb[0].keys()
    for a, b, rows in zip(nb, tc, stepped):
        for k in a:  # a scalar is one value for every row (the torch engine's shared m g)
            x, y = np.broadcast_arrays(a[k], b[k])
            x, y = (x[rows], y[rows]) if x.ndim else (x, y)
            assert _rel(x, y) < 1e-9, (k, a[k], b[k])


@pytest.mark.parametrize("engine", ["numba", "torch"])
def test_a_custom_term_reads_the_plant_state_by_name(engine):
    """``StepContext.state`` is the plant's state at the step's end (issue 47: yaw rate, ``vy``
    and the pose by name): the term's ``yaw_rate`` is the info's, its pose the env's state, a
    wrong name is an error that lists the names, and a write into the state is refused."""
    from dyn4_gym.model.state import DYN4

    seen = []

    def _named(ctx):
        seen.append(torch.stack([ctx.x, ctx.y, ctx.yaw, ctx.vy, ctx.yaw_rate, ctx.var("thetad")], -1).detach().clone())
        return ctx.yaw_rate

    kw = dict(dtype="float64", reward_terms=(RewardTerm("yaw_rate_term", _named),),
              reward_weights={"yaw_rate_term": 1.0})
    env = Dyn4VectorEnv(num_envs=2, engine=engine, **kw)
    env.reset(seed=5)
    for _ in range(15):
        _, _, _, _, info = env.step(np.tile([[0.4, 0.5]], (2, 1)))
    x = torch.as_tensor(env.runner.state.x if engine == "numba" else env.runner.state.x.detach())
    want = x[:, [DYN4.X, DYN4.Y, DYN4.PSI, DYN4.VY, DYN4.R, DYN4.THETAD]].to(torch.float64)
    assert torch.equal(seen[-1], want) and (want[:, 4].abs() > 0.1).all()  # turning: a yaw rate to read
    assert np.array_equal(np.asarray(info["reward_terms"]["yaw_rate_term"]), want[:, 4].numpy())

    def _bad(ctx):
        return ctx.var("yaw_rate")

    def _writer(ctx):
        ctx.state[:, DYN4.VX] = 0.0
        return ctx.progress

    for fn, match in ((_bad, "no plant state named 'yaw_rate'.*psi"), (_writer, r"wrote into its context \(state\)")):
        env = Dyn4VectorEnv(num_envs=2, engine=engine, reward_terms=(RewardTerm("t", fn),), reward_weights={"t": 1.0})
        env.reset(seed=5)
        with pytest.raises(ValueError, match=match):
            env.step(np.zeros((2, 2)))


def test_custom_reward_terms_run_after_the_kernel():
    def _lateral(ctx):
        return -ctx.cross_track.abs() * ctx.speed

    def _blow(ctx):  # non-finite on purpose where the car is right of the line
        return torch.where(ctx.cross_track < 0, torch.full_like(ctx.speed, float("inf")), torch.zeros_like(ctx.speed))

    terms = (RewardTerm("lateral", _lateral), RewardTerm("blow", _blow))
    kw = dict(dtype="float64", reward_terms=terms, reward_weights={"lateral": 0.3, "blow": 1.0})
    names = TERMS + ("lateral", "blow")
    nb = _drive(Dyn4VectorEnv(num_envs=4, engine="numba", **kw), 120, term_names=names)
    tc = _drive(Dyn4VectorEnv(num_envs=4, engine="torch", **kw), 120, term_names=names)
    assert np.array_equal(nb["term"], tc["term"])
    assert _rel(nb["reward"], tc["reward"]) < 1e-9 and _rel(nb["terms"], tc["terms"]) < 1e-9
    assert np.isfinite(nb["reward"]).all() and nb["term"].any()  # the inf rows ended with the penalty


def test_engine_choice_and_fallbacks():
    assert Dyn4Env().engine == "numba"
    assert Dyn4Env(engine="torch").engine == "torch"
    assert Dyn4Env(compile=True).engine == "torch"  # auto: compile asks for the torch engine
    with pytest.raises(ConfigError, match="config.engine"):
        Dyn4Env(engine="numba", compile=True)
    with pytest.raises(ConfigError, match="config.engine"):
        Dyn4Env(engine="jax")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the grid kind has a kernel ground: no fallback
        warnings.filterwarnings("ignore", ".*is out of date", DeprecationWarning)  # an older id (issue 44)
        assert Dyn4Env(ground={"kind": "grid", "mu": np.full((4, 4), 0.5).tolist()}).engine == "numba"
    env = gym.make("Dyn4Humvee-v1", engine="torch")
    assert env.spec.kwargs["engine"] == "torch" and gym.spec("Dyn4Humvee-v1").kwargs["engine"] == "auto"
    # reset options may switch the engine; the next episode runs on it
    env.reset(seed=0, options={"engine": "numba"})
    assert env.unwrapped.engine == "numba"


def test_numba_env_pickles_and_runs_in_subprocesses():
    env = gym.make("Dyn4Humvee-v1")
    env.reset(seed=4)
    env.step(np.array([0.1, 0.5]))
    clone = pickle.loads(pickle.dumps(env))
    a, b = env.step(np.array([0.2, 0.3])), clone.step(np.array([0.2, 0.3]))
    assert np.array_equal(a[0], b[0]) and a[1] == b[1]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning from the fast path
        warnings.filterwarnings("ignore", ".*is out of date", DeprecationWarning)  # an older id (issue 44)
        av = gym.make_vec("Dyn4Humvee-v1", num_envs=2, vectorization_mode="async")
        sv = gym.make_vec("Dyn4Humvee-v1", num_envs=2, vectorization_mode="sync")
    try:
        oa, _ = av.reset(seed=3)
        os_, _ = sv.reset(seed=3)
        assert np.array_equal(oa, os_)
        acts = np.array([[0.1, 0.4], [-0.2, 0.6]], dtype=np.float32)
        for _ in range(5):
            ra, rs = av.step(acts), sv.step(acts)
            assert np.array_equal(ra[0], rs[0]) and np.array_equal(ra[1], rs[1])
    finally:
        av.close()
        sv.close()


def test_next_step_rows_due_for_a_reset_are_not_stepped():
    v = Dyn4VectorEnv(num_envs=3, episode_steps=2, autoreset_mode=AutoresetMode.NEXT_STEP)
    v.reset(seed=5)
    a = np.zeros((3, 2), np.float32)
    v.step(a)
    v.step(a)  # all rows truncate here
    fresh = Dyn4VectorEnv(num_envs=3)
    fresh.reset(seed=5)
    fresh.runner.autoreset(np.ones(3, bool))  # the same streams, next episode
    o, r, te, tr, _ = v.step(np.ones((3, 2), np.float32))
    assert np.array_equal(o, fresh.runner.engine.observe(fresh.runner.state)) and (r == 0).all()
    assert not (te | tr).any() and (v.runner.episodes == 1).all() and (v.runner.state.t == 0).all()


def test_a_start_pose_is_the_same_on_both_engines():
    """``start_s`` / ``start_offset`` / ``start_heading`` (the reset's start pose): 400 steps,
    4 rows, resets included, the engines agree to 1e-9 and the car starts where asked."""
    kw = dict(dtype="float64", episode_steps=120, start_s=57.3, start_offset=-1.2, start_heading=0.15)
    nb_env, tc_env = Dyn4VectorEnv(num_envs=4, engine="numba", **kw), Dyn4VectorEnv(num_envs=4, engine="torch", **kw)
    nb, tc = _drive(nb_env, 400), _drive(tc_env, 400)
    assert (nb["term"] | nb["trunc"]).sum() >= 4
    assert np.array_equal(nb["term"], tc["term"]) and np.array_equal(nb["trunc"], tc["trunc"])
    _same_obs(nb["obs"], tc["obs"])
    assert _rel(nb["reward"], tc["reward"]) < 1e-9 and _rel(nb["terms"], tc["terms"]) < 1e-9
    assert np.max(np.abs(nb["books"] - tc["books"])) / 1e5 < 1e-9
    # a fresh reset: on the course at 57.3 m, 1.2 m to its right, heading 0.15 rad off it
    obs, _ = nb_env.reset(seed=9)
    hw = nb_env.config.course.half_width
    np.testing.assert_allclose(obs[:, 17] * hw, -1.2, atol=2e-3)  # cross-track (left +)
    np.testing.assert_allclose(obs[:, 18] * 0.5, 0.15, atol=1e-3)  # heading error
    np.testing.assert_allclose(nb_env.runner.state.s, 57.3, atol=1e-9)


def _s_curve(n=60):
    t = np.linspace(0.0, 1.0, n)
    return [(float(150.0 * x), float(12.0 * np.sin(2 * np.pi * x) + 5.0)) for x in t]


def test_a_given_centre_line_is_the_same_on_both_engines():
    """``course={"centre_line": points}``: both engines drive the same resampled line (400 steps,
    4 rows, resets), equal to 1e-9, and the car starts on its first point heading along it."""
    kw = dict(dtype="float64", episode_steps=120, course={"centre_line": _s_curve(), "lead_in": 5.0})
    nb_env, tc_env = Dyn4VectorEnv(num_envs=4, engine="numba", **kw), Dyn4VectorEnv(num_envs=4, engine="torch", **kw)
    nb, tc = _drive(nb_env, 400), _drive(tc_env, 400)
    assert np.array_equal(nb["term"], tc["term"]) and np.array_equal(nb["trunc"], tc["trunc"])
    _same_obs(nb["obs"], tc["obs"])
    assert _rel(nb["reward"], tc["reward"]) < 1e-9 and _rel(nb["terms"], tc["terms"]) < 1e-9
    assert np.max(np.abs(nb["books"] - tc["books"])) / 1e5 < 1e-9
    nb_env.reset(seed=1)
    st = nb_env.runner.state
    line = np.asarray(_s_curve())
    np.testing.assert_allclose(st.course_xy[:, 0], np.tile(line[0], (4, 1)))
    np.testing.assert_allclose(st.x[:, :2], np.tile(line[0], (4, 1)), atol=1e-12)
    assert nb_env.config.course.length == np.floor(np.hypot(*np.diff(line, axis=0).T).sum())


RANGES = {"mass": [2000.0, 3200.0], "tire_mu": [0.5, 1.0], "max_steer": [0.4, 0.6], "cg_height": [0.8, 1.2]}


@pytest.mark.parametrize("action", ["accel", "driver"])
def test_per_row_vehicle_parameters_are_the_same_on_both_engines(action):
    """``vehicle_ranges`` (domain randomisation): each row's vehicle drawn from its stream at every
    reset; 400 steps, 4 rows, resets included, equal to 1e-9 on both engines."""
    kw = dict(dtype="float64", episode_steps=100, vehicle_ranges=RANGES, action=action)
    nb_env, tc_env = Dyn4VectorEnv(num_envs=4, engine="numba", **kw), Dyn4VectorEnv(num_envs=4, engine="torch", **kw)
    run = {} if action == "accel" else dict(term_names=DRIVER_TERMS, book_names=DRIVER_LINES, loc=(0.0, 0.55, 0.05),
                                            scale=(0.6, 0.4, 0.2))
    nb, tc = _drive(nb_env, 400, **run), _drive(tc_env, 400, **run)
    assert (nb["term"] | nb["trunc"]).sum() >= 4
    assert np.array_equal(nb["term"], tc["term"]) and np.array_equal(nb["trunc"], tc["trunc"])
    _same_obs(nb["obs"], tc["obs"])
    assert _rel(nb["reward"], tc["reward"]) < 1e-9 and _rel(nb["terms"], tc["terms"]) < 1e-9
    assert np.max(np.abs(nb["books"] - tc["books"])) / 1e5 < 1e-9
    # the rows' vehicles differ, each within its range, and a new episode draws a new one
    m = tc_env.runner.state.p.m.numpy()
    assert len(set(m.round(6))) == 4 and ((m >= 2000.0) & (m <= 3200.0)).all()
    np.testing.assert_allclose(nb_env.runner.state.P[:, 0], m)


# ------------------------------------------------------------------ terrain kinds in the kernel
@dataclass(frozen=True)
class _WashboardConfig:
    """A test kind: per-row washboard ripples across X on a tilted plane, with a friction step."""

    kind: str = "test_washboard"
    amplitude: float = 0.03  # [m]
    tilt: float = 0.02  # the largest plane slope drawn

    def validate(self, path):
        pass


@dataclass(frozen=True)
class _Washboard(Ground):
    tilt: torch.Tensor  # (B,)
    phase: torch.Tensor  # (B,)
    amplitude: float

    def _row(self, t, xy):
        return t.reshape(-1, *([1] * (xy.ndim - 2)))

    def height(self, xy):
        return self._row(self.tilt, xy) * xy[..., 0] + self.amplitude * torch.sin(0.5 * xy[..., 0]
                                                                                   + self._row(self.phase, xy))

    def friction(self, xy):
        return 0.5 + 0.4 * (xy[..., 1] > 0.0).to(xy.dtype)  # no height_gradient: central differences


def _draw_washboard(cfg, ctx):
    return _Washboard(tilt=cfg.tilt * (2 * ctx.u[:, 0] - 1), phase=6.0 * ctx.u[:, 1], amplitude=cfg.amplitude)


@njit(cache=False)
def _washboard_height(b, X, T):
    tilt, phase, amp = T
    return tilt[b] * X + amp[b] * np.sin(0.5 * X + phase[b])


@njit(cache=False)
def _washboard_sample(b, X, Y, T, slope_step):
    mu = 0.5 + 0.4 * (1.0 if Y > 0.0 else 0.0)
    mu = 0.8 + 1.0 * (mu - 0.8)  # Ground.__call__'s cover blend around DEFAULT_MU
    h = _washboard_height(b, X, T)
    if slope_step > 0.0:  # central differences, as the torch plant takes for a ground without a gradient
        hx = (_washboard_height(b, X + slope_step, T) - _washboard_height(b, X - slope_step, T)) / (2 * slope_step)
        hy = (_washboard_height(b, X + 0.0, T) - _washboard_height(b, X - 0.0, T)) / (2 * slope_step)
        return mu, h, hx, hy
    return mu, h, 0.0, 0.0


def _washboard_pack(g, batch):
    return (g.tilt.numpy().copy(), g.phase.numpy().copy(), np.full(batch, g.amplitude))


def _washboard_unpack(T):
    return _Washboard(tilt=torch.from_numpy(T[0]), phase=torch.from_numpy(T[1]), amplitude=float(T[2][0]))


@pytest.fixture(scope="module")
def washboard():
    kind = register_terrain(TerrainKind("test_washboard", _WashboardConfig, _draw_washboard, lambda cfg: 2,
                                        kernel=GroundKernel(_washboard_sample, _washboard_pack, _washboard_unpack)),
                            overwrite=True)
    yield kind
    TERRAIN_KINDS.pop("test_washboard", None)


def test_a_registered_kind_with_a_kernel_ground_runs_in_the_kernel(washboard):
    """A user's kind with its own Numba sampler: no fallback, the same episodes as the torch
    engine (1e-9, float64) with resets, and partial resets draw the row's next ground."""
    kw = dict(dtype="float64", episode_steps=60, ground={"kind": "test_washboard"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", ".*is out of date", DeprecationWarning)  # an older id (issue 44)
        env = Dyn4VectorEnv(num_envs=3, engine="numba", **kw)
    nb = _drive(env, 200, n=3)
    tc = _drive(Dyn4VectorEnv(num_envs=3, engine="torch", **kw), 200, n=3)
    assert (nb["term"] | nb["trunc"]).sum() >= 3
    assert np.array_equal(nb["term"], tc["term"]) and np.array_equal(nb["trunc"], tc["trunc"])
    _same_obs(nb["obs"], tc["obs"])
    assert _rel(nb["reward"], tc["reward"]) < 1e-9 and _rel(nb["books"], tc["books"]) < 1e-9
    st = env.runner.engine.task_state(env.runner.state)  # the torch ground back, for rendering
    assert isinstance(st.terrain, _Washboard) and st.terrain.tilt.shape == (3,)
    before = st.terrain.tilt.clone()
    env.reset(options={"reset_mask": np.array([False, True, False])})
    after = env.runner.engine.task_state(env.runner.state).terrain.tilt
    assert after[0] == before[0] and after[2] == before[2] and after[1] != before[1]


def test_grid_kind_runs_in_the_kernel_as_on_torch():
    """The built-in grid kind's kernel sampler (bilinear, central-difference slopes, edge values
    held outside) drives the same episodes as the torch engine."""
    rng = np.random.default_rng(0)
    h = np.cumsum(rng.normal(0.0, 0.02, (80, 60)), axis=0)  # gentle random relief
    for ground in ({"kind": "grid", "heights": h.tolist(), "origin": (-20.0, -30.0), "spacing": 2.0,
                    "base_mu": 0.6},
                   {"kind": "grid", "heights": h.tolist(), "mu": (0.5 + 0.4 * rng.random((80, 60))).tolist(),
                    "origin": (-20.0, -30.0), "spacing": 2.0}):
        # with the friction ahead observed: the observation samples the grid's own friction too
        kw = dict(dtype="float64", episode_steps=80, ground=ground, course={"preview_friction": "mu" in ground})
        env = Dyn4VectorEnv(num_envs=2, engine="numba", **kw)
        assert env.runner.engine.name == "numba"
        nb = _drive(env, 120, n=2)
        tc = _drive(Dyn4VectorEnv(num_envs=2, engine="torch", **kw), 120, n=2)
        assert np.array_equal(nb["term"], tc["term"]) and np.array_equal(nb["trunc"], tc["trunc"])
        _same_obs(nb["obs"], tc["obs"])
        assert _rel(nb["reward"], tc["reward"]) < 1e-9 and _rel(nb["books"], tc["books"]) < 1e-9
