"""One command-line convention for every script (dyn4_gym/cli.py; issue 20, item 8): random flag
values either parse or end in one line on stderr naming the flag and exit status 2, before any
work (``parse_args`` only: the cheap path), and the errors the work finds are one line too."""

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]

# each script and its flags that take a value
SCRIPTS = {
    "agents/evaluate.py": ["--policy", "--env-id", "--env-kwargs", "--vecnormalize", "--seeds", "--out"],
    "agents/train_diff.py": ["--env-steps", "--seconds", "--iterations", "--env-kwargs", "--resume", "--eval-seeds",
                             "--out", "--num-envs", "--horizon", "--gamma", "--actor-lr", "--hidden", "--seed",
                             "--lr-decay-steps", "--init-log-std", "--env-id"],
    "agents/train_sb3.py": ["--algo", "--config", "--timesteps", "--env-id", "--env-kwargs", "--seed", "--eval-freq",
                            "--eval-episodes", "--out"],
    "agents/train_rllib.py": ["--iterations", "--env-runners", "--envs-per-runner", "--batch", "--env-kwargs", "--out"],
    "agents/tune.py": ["--trainer", "--space", "--seeds", "--chunks", "--chunk", "--eval-seeds", "--env-id", "--env-kwargs",
                       "--metric", "--out", "--name", "--cpus-per-trial"],
    "envs/play.py": ["--seed", "--env-kwargs", "--keys", "--out"],
    "envs/preview.py": ["--seed", "--out", "--env-kwargs"],
    "envs/record.py": ["--policy", "--out", "--seed", "--max-steps", "--fps", "--every", "--scale", "--env-id",
                       "--env-kwargs"],
    "benchmarks/env.py": ["--rows", "--seconds"],
    "benchmarks/learning.py": ["--tasks", "--methods", "--seeds", "--scale", "--evals", "--eval-seeds",
                               "--pareto-seeds", "--shard", "--out", "--docs"],
    "benchmarks/plant.py": ["--batches"],
    "benchmarks/soak.py": ["--steps", "--rows", "--engine", "--seed", "--env-id"],
    "dyn4_gym/__main__.py": ["--env-steps", "--seconds", "--seed", "--task", "--num-envs", "--eval-seeds", "--env-kwargs",
                             "--out"],
    "dyn4_gym/demo.py": ["--out"],
}

NASTY = ["Dyn4HumveeRace-v0", "CartPole-v1", "0", "-1", "-5", "1e400", "nan", "inf", "-inf", "1.5", "", " ", "abc", "{}", "[]", "[1, 2]", "null",
         '{"a": NaN}', '{"target_speed": -1}', '{"course": {"half_width": 1e-300}}', '{"nope": [1]}',
         "/dev/null/x", "/proc/x/y", "x.zip", "99999999999999999999999", "2/2", "0/1", "x/y", "classical"]
VALUES = st.one_of(st.sampled_from(NASTY), st.integers(-10**6, 10**6).map(str),
                   st.floats(allow_nan=True, allow_infinity=True).map(repr), st.text(max_size=12))


@pytest.fixture(scope="module")
def scripts(load_script):
    import importlib

    return {path: importlib.import_module(path.removesuffix(".py").replace("/", ".")) if path.startswith("dyn4_gym/")
            else load_script(path) for path in SCRIPTS}


def _parse(mod, argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            mod.parse_args(argv)
        except SystemExit as e:
            return e.code, err.getvalue()
    return 0, err.getvalue()


@pytest.mark.parametrize("path", list(SCRIPTS))
def test_random_flag_values_parse_or_fail_in_one_line(path, scripts, tmp_path_factory):
    mod = scripts[path]
    cwd = tmp_path_factory.mktemp("cwd")

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(flag=st.sampled_from(SCRIPTS[path]), value=VALUES)
    def check(flag, value):
        if "\x00" in value:
            return
        old = os.getcwd()
        os.chdir(cwd)  # relative outputs land (if anywhere) in a scratch folder
        try:
            code, err = _parse(mod, [f"{flag}={value}"])
        finally:
            os.chdir(old)
        if code == 0:
            return
        assert code == 2, (flag, value, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "error:" in lines[0], (flag, value, err)
        assert "Traceback" not in err

    check()


@pytest.mark.parametrize("path,argv,flag", [
    ("agents/train_diff.py", ["--env-steps", "-5"], "--env-steps"),
    ("agents/train_diff.py", ["--eval-seeds", "0"], "--eval-seeds"),
    ("agents/train_diff.py", ["--num-envs", "0"], "--num-envs"),
    ("agents/train_diff.py", ["--gamma", "nan"], "--gamma"),
    ("envs/record.py", ["--fps", "0"], "--fps"),
    ("envs/record.py", ["--out", "x.avi"], "--out"),
    ("benchmarks/env.py", ["--rows", "0"], "--rows"),
    ("agents/evaluate.py", ["--env-kwargs", '{"a": NaN}'], "--env-kwargs"),
    ("agents/evaluate.py", ["--policy", "x.zip"], "--policy"),
    ("agents/tune.py", ["--space", '{"nope": [1]}'], "--space"),
    ("agents/tune.py", ["--trainer", "ppo", "--space", '{"nope": [1]}'], "--space"),
    ("agents/tune.py", ["--env-id", "CartPole-v1"], "--env-id"),
    ("agents/tune.py", ["--metric", "reward"], "--metric"),
    ("agents/tune.py", ["--env-id", "Dyn4HumveeNope-v0"], "--env-id"),
    ("agents/tune.py", ["--trainer", "ppo", "--env-id", "Dyn4HumveeDriver-v1", "--space", '{"gamma": [0.99]}'], "--env-id"),
    ("envs/play.py", ["--keys", "wq"], "--keys"),
    ("dyn4_gym/__main__.py", ["--eval-seeds", "0"], "--eval-seeds"),
])
def test_bad_flags_name_the_flag(path, argv, flag, scripts):
    code, err = _parse(scripts[path], argv)
    assert code == 2 and len(err.strip().splitlines()) == 1 and flag in err, err
    if flag == "--policy":
        assert "x.zip.zip" not in err


def test_outputs_are_checked_writable_before_any_work(tmp_path, scripts):
    blocker = tmp_path / "file"
    blocker.write_text("")
    for path in ("agents/train_diff.py", "agents/evaluate.py", "dyn4_gym/__main__.py", "dyn4_gym/demo.py"):
        code, err = _parse(scripts[path], ["--out", str(blocker / "out")])
        assert code == 2 and "--out" in err and "not a folder" in err, err
    assert list(tmp_path.iterdir()) == [blocker]  # nothing was made


def test_a_script_exits_in_one_line_before_ray_starts():
    """tune.py with an unknown --space key used to fail after 131 s of Ray."""
    r = subprocess.run([sys.executable, str(ROOT / "agents" / "tune.py"), "--space", '{"nope": [1]}'],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "nope" in r.stderr


def test_evaluate_says_a_policy_is_of_the_other_variant(tmp_path):
    from dyn4_gym.agents import SHAC, SHACConfig

    agent = SHAC(SHACConfig(num_envs=2, horizon=2), {"action": "driver", "course": {"length": 80.0}})
    agent.save(str(tmp_path / "d.pt"))
    r = subprocess.run([sys.executable, str(ROOT / "agents" / "evaluate.py"), "--policy", str(tmp_path / "d.pt"),
                        "--env-kwargs", '{"action": "accel"}', "--seeds", "1", "--out", str(tmp_path / "ev")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "does not fit this env (action='accel'" in r.stderr
    assert not (tmp_path / "ev").exists()


def test_a_checkpoint_with_non_finite_weights_is_one_line(tmp_path, scripts):
    import math

    import torch

    from dyn4_gym.agents import SHAC, SHACConfig

    d = SHAC(SHACConfig(num_envs=2, horizon=2), {"course": {"length": 80.0}}).state_dict()
    d["actor"]["net.0.weight"].fill_(math.nan)
    torch.save(d, tmp_path / "nan.pt")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as e:
        scripts["agents/evaluate.py"].main(["--policy", str(tmp_path / "nan.pt"), "--out", str(tmp_path / "ev")])
    assert e.value.code == 2 and "non-finite" in err.getvalue() and len(err.getvalue().strip().splitlines()) == 1


def test_strict_json_is_written(tmp_path):
    from dyn4_gym.cli import write_json

    write_json(str(tmp_path / "x.json"), {"a": float("nan"), "b": [1.0, float("inf")], "c": 2})
    text = (tmp_path / "x.json").read_text()
    assert json.loads(text) == {"a": None, "b": [1.0, None], "c": 2} and "NaN" not in text


@pytest.mark.parametrize("module, argv", [("dyn4_gym.__main__", ["--out", "OUT"]), ("dyn4_gym.demo", ["--out", "OUT"]),
                                          ("dyn4_gym.fit.__main__", ["--chrono", "steer", "--fields", "steer_lag", "--out", "OUT"])])
def test_a_missing_plot_extra_stops_a_command_at_once_in_one_line(module, argv, monkeypatch, capsys, tmp_path):
    """Without matplotlib the package's commands end before any work, in one line naming the extra
    to install (issue 47: the demo used to end in a raw ModuleNotFoundError after 73 s)."""
    import importlib

    mod = importlib.import_module(module)
    for name in ("run", "train_and_compare", "fit", "_load"):  # the work: never reached
        if hasattr(mod, name):
            monkeypatch.setattr(mod, name, lambda *a, **k: pytest.fail("the work started"))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib: ImportError
    with pytest.raises(SystemExit) as e:
        mod.main([str(tmp_path / "out") if a == "OUT" else a for a in argv])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.strip().count("\n") == 0, err
    assert 'pip install "dyn4-gym[plot]"' in err and "needs matplotlib" in err


def test_a_missing_extra_in_library_code_is_an_import_error_naming_it(monkeypatch):
    import gymnasium as gym

    import dyn4_gym  # noqa: F401
    from dyn4_gym import cli

    monkeypatch.setitem(sys.modules, "pygame", None)
    with pytest.raises(ImportError, match=r"rendering needs pygame.*dyn4-gym\[render\]"):
        gym.make("Dyn4Humvee-v1", render_mode="rgb_array")
    monkeypatch.setitem(sys.modules, "yaml", None)
    with pytest.raises(cli.MissingExtra, match=r"dyn4-gym\[sb3\]"):
        dyn4_gym.envs.EnvConfig.from_yaml(__file__)
    with pytest.raises(KeyError, match="no extra installs"):
        cli.require("numpy_not_an_extra", "a test")
