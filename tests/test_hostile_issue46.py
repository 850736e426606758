"""Hostile input, fourth pass (issue 46): the SB3 adapter's seed and index methods, and the thread
knob (tests/test_conventions.py, ``test_a_bad_thread_count_stops_a_script_in_one_line``). Each
test failed before its fix."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("stable_baselines3")

from dyn4_gym.envs.sb3 import Dyn4SB3VecEnv  # noqa: E402
from dyn4_gym._checks import ConfigError  # noqa: E402
from dyn4_gym.envs import Dyn4DiffEnv, Dyn4VectorEnv  # noqa: E402

SHORT = dict(course={"length": 60.0}, episode_steps=40)
ZERO = np.zeros((4, 2), dtype=np.float32)


def _env():
    return Dyn4SB3VecEnv(4, **SHORT)


@pytest.mark.parametrize("bad", [-1, 1.5, 2**64, np.float64(3.0), True, "7", 2**64 - 2])
def test_a_bad_seed_is_refused_and_stores_nothing(bad):
    """Class 7: ``seed()`` stored -1, 1.5, 2**64 or a numpy float unchecked and every later
    ``reset()`` raised. Now the value is refused (and a base whose last row passes 2**64) and the
    next reset is the one the previous seed asked for."""
    env, ref = _env(), _env()
    env.seed(5)
    ref.seed(5)
    with pytest.raises(ValueError, match="seed"):
        env.seed(bad)
    assert np.array_equal(env.reset(), ref.reset())
    assert env.seed(np.int64(9)) == [9, 10, 11, 12]


def test_reset_through_env_method_resets_exactly_the_rows_named():
    """Class 8: ``env_method("reset", indices=[0])`` reset every row. Now row 0 alone starts its
    next episode; the other rows carry on, as a DummyVecEnv's would."""
    env = _env()
    env.seed(3)
    env.reset()
    for _ in range(5):
        before, *_ = env.step(ZERO)
    x_before = env.runner.task_state().x.detach().numpy().copy()
    out = env.env_method("reset", indices=[0])
    assert len(out) == 1 and out[0].shape == before[0].shape
    x_after = env.runner.task_state().x.detach().numpy()
    assert np.array_equal(x_after[1:], x_before[1:]) and not np.array_equal(x_after[0], x_before[0])
    assert env.runner.episodes.tolist() == [1, 0, 0, 0]
    obs, r, done, info = env.step(ZERO)  # and it steps on
    assert np.isfinite(obs).all() and np.isfinite(r).all()


@pytest.mark.parametrize("indices", [[7], [-1], 4, [0, 4], [True], [0.0]])
def test_an_index_that_is_not_a_row_is_refused(indices):
    env = _env()
    env.reset()
    for call in (lambda: env.get_attr("render_mode", indices=indices),
                 lambda: env.env_method("get_images", indices=indices),
                 lambda: env.env_is_wrapped(object, indices=indices),
                 lambda: env.set_attr("anything", 1, indices=indices)):
        with pytest.raises(IndexError, match="not a row"):
            call()


@pytest.mark.parametrize("name", ["num_envs", "observation_space", "action_space", "runner", "render_mode"])
def test_set_attr_refuses_the_vecenvs_own_attributes(name):
    """Class 8: ``set_attr("num_envs", 7)`` was accepted on a 4-row env."""
    env = _env()
    before = getattr(env, name)
    with pytest.raises(AttributeError, match="own attribute"):
        env.set_attr(name, 7)
    assert getattr(env, name) is before
    env.set_attr("user_note", "ok")  # a setting of the user's is still set for every row
    assert env.get_attr("user_note") == ["ok"] * 4


hostile = st.one_of(st.none(), st.integers(-3, 2**65), st.floats(allow_nan=True), st.booleans(), st.text(max_size=3),
                    st.lists(st.integers(-6, 8), max_size=5))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=st.lists(st.tuples(st.sampled_from(["seed", "get_attr", "set_attr", "env_method", "env_is_wrapped",
                                                  "step"]), hostile), min_size=1, max_size=8))
def test_hostile_calls_leave_the_adapter_working(calls):
    """Any sequence of the adapter's methods with hostile values: each either works or raises a
    clear error (ValueError, IndexError, AttributeError, TypeError), and afterwards the env still
    resets and steps to finite values."""
    env = _env()
    env.reset()
    for name, value in calls:
        try:
            if name == "seed":
                env.seed(value)
            elif name == "get_attr":
                env.get_attr("render_mode", indices=value)
            elif name == "set_attr":
                env.set_attr("num_envs", 3, indices=value)
            elif name == "env_method":
                env.env_method("reset", indices=value)
            elif name == "env_is_wrapped":
                env.env_is_wrapped(object, indices=value)
            else:
                env.step(np.full((4, 2), value if isinstance(value, float) else 0.0, dtype=np.float32))
        except (ValueError, IndexError, AttributeError, TypeError):
            pass
    assert env.num_envs == 4
    obs = env.reset()
    obs2, r, done, info = env.step(ZERO)
    assert np.isfinite(obs).all() and np.isfinite(obs2).all() and np.isfinite(r).all()


class _Payload:
    """A pickle that runs code when loaded: it writes a marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_normaliser_is_loaded_only_from_beside_the_model_or_where_named(tmp_path, capsys):
    """Class 1: a vecnormalize.pkl in any single subfolder of the model's folder was unpickled
    (a crafted one ran code) although the user named only model.zip; a pickle that is not a
    VecNormalize ended in a raw traceback. Now only ``vecnormalize.pkl`` beside the zip or in the
    folder named after its stem is found, a file the user names is loaded, the file loaded is
    printed, and anything not a VecNormalize is a CheckpointError."""
    import pickle
    import warnings

    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecNormalize

    from dyn4_gym.agents import CheckpointError
    from dyn4_gym.agents.loading import load_policy

    venv = VecNormalize(Dyn4SB3VecEnv(2, **SHORT))
    ppo = PPO("MlpPolicy", venv, n_steps=8, batch_size=8, n_epochs=1, seed=0)
    ppo.learn(16)
    run = tmp_path / "run"
    ppo.save(run / "model")
    marker = tmp_path / "pwned"
    (run / "other").mkdir()
    with open(run / "other" / "vecnormalize.pkl", "wb") as fh:
        pickle.dump(_Payload(str(marker)), fh)
    with pytest.warns(RuntimeWarning, match="no vecnormalize.pkl"):
        load_policy(str(run / "model.zip"), SHORT)
    assert not marker.exists()  # the stray pickle was never opened
    good = tmp_path / "norm.pkl"
    venv.save(str(good))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_policy(str(run / "model.zip"), SHORT, vecnormalize=str(good))
    assert f"observation normaliser: {good}" in capsys.readouterr().err
    with open(run / "vecnormalize.pkl", "wb") as fh:  # beside the model, but not a VecNormalize
        pickle.dump({"mean": 0.0}, fh)
    with pytest.raises(CheckpointError, match="not SB3's VecNormalize"):
        load_policy(str(run / "model.zip"), SHORT)
    with pytest.raises(CheckpointError, match="not a file"):
        load_policy(str(run / "model.zip"), SHORT, vecnormalize=str(tmp_path / "missing.pkl"))


def test_a_second_run_into_the_same_folder_is_refused_and_saves_are_whole(tmp_path, load_script, monkeypatch):
    """Class 4: a second train_diff.py run into the same --out mixed the runs without a word, and
    SHAC.save wrote the model in place. Now a folder holding a run is refused unless the run
    resumes or --overwrite replaces its files (the folder's other files stay), and a save that
    fails leaves the previous checkpoint as it was."""
    import torch

    from dyn4_gym.agents import SHAC, SHACConfig

    td = load_script("agents/train_diff.py")
    out = tmp_path / "diff"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert td.parse_args(["--out", str(out)]).out == str(out)  # a folder with no run is fine
    agent = SHAC(SHACConfig(num_envs=2, horizon=4), dict(SHORT))
    agent.save(str(out / "model.pt"))
    (out / "tb").mkdir()
    with pytest.raises(SystemExit) as e:
        td.parse_args(["--out", str(out)])
    assert e.value.code == 2
    assert td.parse_args(["--out", str(out), "--resume", str(out / "model.pt")]).resume
    assert td.parse_args(["--out", str(out), "--overwrite"]).overwrite
    good = (out / "model.pt").read_bytes()

    def broken(obj, path, *a, **k):
        with open(path, "wb") as fh:
            fh.write(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken)
    with pytest.raises(OSError, match="disk full"):
        agent.save(str(out / "model.pt"))
    assert (out / "model.pt").read_bytes() == good and sorted(p.name for p in out.iterdir()) == [
        "model.pt", "notes.txt", "tb"]


def test_the_small_ones_say_what_is_wrong(tmp_path):
    """Class 9: JSON nested 10,000 deep was a raw RecursionError; booleans were taken as
    coordinates (True as 1.0); a normaliser with NaN statistics was reported as "does not fit this
    env"; PRESETS could be changed in place."""
    import argparse

    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecNormalize

    from dyn4_gym import cli
    from dyn4_gym.agents import CheckpointError
    from dyn4_gym.agents.loading import load_policy
    from dyn4_gym.envs import ConfigError, EnvConfig
    from dyn4_gym.plant.presets import PRESETS

    with pytest.raises(argparse.ArgumentTypeError, match="nested too deep"):
        cli.json_object("[" * 10_000 + "]" * 10_000)
    with pytest.raises(ValueError, match="nested too deep"):
        cli.strict_json("{\"a\": " * 10_000 + "1" + "}" * 10_000)
    for line in (((True, 0.0), (100.0, 0.0)), ((0.0, 0.0), (100.0, False)), ((0.0, 0.0), ("100", 0.0))):
        with pytest.raises(ConfigError, match="every coordinate must be a number"):
            EnvConfig.from_dict({"course": {"centre_line": line}})
    with pytest.raises(TypeError):
        PRESETS["mine"] = PRESETS["m998"]
    venv = VecNormalize(Dyn4SB3VecEnv(2, **SHORT))
    ppo = PPO("MlpPolicy", venv, n_steps=8, batch_size=8, n_epochs=1, seed=0)
    ppo.save(tmp_path / "model")
    venv.obs_rms.mean[:] = np.nan
    venv.save(str(tmp_path / "vecnormalize.pkl"))
    with pytest.raises(CheckpointError, match="non-finite observation statistics"):
        load_policy(str(tmp_path / "model.zip"), SHORT)


TWO_THREADS = """
import sys, threading
import numpy as np
import dyn4_gym  # noqa: F401
from dyn4_gym.envs import Dyn4VectorEnv

errors = []


def run(seed):
    try:
        env = Dyn4VectorEnv(num_envs=8, engine="numba", course={"length": 80.0}, episode_steps=60)
        env.reset(seed=seed)
        for _ in range(300):
            obs, *_ = env.step(np.tile([0.05, 0.3], (8, 1)).astype(np.float32))
        assert np.isfinite(obs).all()
    except BaseException as exc:
        errors.append(repr(exc))


threads = [threading.Thread(target=run, args=(s,)) for s in (0, 1)]
for t in threads:
    t.start()
for t in threads:
    t.join()
import numba
print(numba.threading_layer(), errors)
sys.exit(1 if errors else 0)
"""


@pytest.mark.slow
@pytest.mark.parametrize("layer", ["workqueue", None])
def test_two_threads_stepping_batched_envs_finish(layer, tmp_path):
    """Class 5: two Python threads stepping batched envs aborted the process where Numba ran on
    its work queue (a venv's TBB was off the loader's path). Now the task kernels serialise their
    parallel launches on the work queue (forced here; measured: without the guard the same script
    aborts with "Concurrent access has been detected"), and the default layer is TBB."""
    import os
    import subprocess
    import sys

    script = tmp_path / "two_threads.py"
    script.write_text(TWO_THREADS)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    if layer:
        env["NUMBA_THREADING_LAYER"] = layer
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=900, env=env)
    assert r.returncode == 0, (r.returncode, r.stdout[-500:], r.stderr[-1500:])
    assert r.stdout.split()[0] == (layer or ("tbb" if _tbb_wheel() else r.stdout.split()[0]))


def _tbb_wheel() -> bool:
    from importlib import metadata

    try:
        metadata.version("tbb")
    except metadata.PackageNotFoundError:
        return False
    return True


def test_the_tbb_wheels_library_is_loaded_from_the_environment():
    """Where the ``tbb`` wheel is installed (Linux x86_64: a dependency), its libtbb is loaded
    from the environment's lib folder before Numba picks its layer."""
    import os
    import platform
    import sys

    import dyn4_gym.engine as engine

    if not (sys.platform.startswith("linux") and platform.machine() == "x86_64" and _tbb_wheel()):
        pytest.skip("the tbb wheel is a dependency on Linux x86_64 only")
    if os.environ.get("NUMBA_THREADING_LAYER"):
        pytest.skip("a threading layer was chosen by the user")
    assert engine.TBB_LIBRARY is not None and engine.TBB_LIBRARY.endswith("libtbb.so.12")
    assert engine.preload_tbb() == engine.TBB_LIBRARY


def _far_line(offset):
    th = np.linspace(0.0, np.pi, 60)
    x = np.r_[np.linspace(-100.0, -5.0, 20), 100.0 * np.sin(th)]
    y = np.r_[np.zeros(20), 100.0 - 100.0 * np.cos(th)]
    return (np.stack([x, y], 1) + offset).tolist()


def test_a_course_far_from_the_origin_is_refused_in_float32_and_runs_exactly_in_float64():
    """Class 3: float32 positions 1e6 m from the origin are rounded to 6 cm, and the return came out
    1.5 % off the Numba engine's. The float32 torch engine refuses such a course with a message
    naming the remedy; float64 torch and the Numba engine agree there (1e-9)."""
    from dyn4_gym.envs.course import FLOAT32_REACH

    far = dict(episode_steps=60, course={"centre_line": _far_line(1e6 - 200.0)}, ground={"n_patches": 2, "n_bumps": 1})
    with pytest.raises(ConfigError, match="reaches 1e\\+06 m from the origin.*float64"):
        Dyn4VectorEnv(num_envs=2, engine="torch", dtype="float32", **far).reset(seed=0)
    with pytest.raises(ConfigError, match="float64"):
        Dyn4DiffEnv(num_envs=1, **far).reset(seed=0)
    near = dict(far, course={"centre_line": _far_line(FLOAT32_REACH - 200.0)})
    Dyn4VectorEnv(num_envs=1, engine="torch", dtype="float32", **near).reset(seed=0)  # within reach: runs
    out = {}
    for engine in ("torch", "numba"):
        env = Dyn4VectorEnv(num_envs=2, engine=engine, dtype="float64", **far)
        env.reset(seed=3)
        rows = []
        for t in range(60):
            a = np.array([[0.1 * np.sin(t / 20), 0.3], [-0.05, 0.6]], dtype=np.float32)
            obs, r, term, trunc, _ = env.step(a)
            rows.append((obs.astype(np.float64), np.asarray(r, dtype=np.float64), term | trunc))
        out[engine] = rows
    for (o1, r1, d1), (o2, r2, d2) in zip(out["torch"], out["numba"]):
        assert np.array_equal(d1, d2)
        assert np.abs(r1 - r2).max() <= 1e-9 * max(1.0, np.abs(r2).max())
        assert np.abs(o1 - o2).max() <= 1e-5 * max(1.0, np.abs(o2).max())  # float32 observations
