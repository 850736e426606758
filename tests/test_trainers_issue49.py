"""Issue 49: a trainer is a module plus its registry entry (dyn4_gym.agents.trainers), the one
place the trainers' names are written; every entry builds a run that trains in env steps,
evaluates, saves and reloads to the same policy."""

import io
import tokenize
from pathlib import Path

import pytest
import torch

from dyn4_gym.agents import trainers
from dyn4_gym.agents.trainers import DEFAULT_TRAINER, TRAINERS, Run, sb3_trainers, trainer

ROOT = Path(__file__).resolve().parents[1]
SMALL_ENV = dict(course={"length": 60.0}, episode_steps=20)


def test_no_trainer_name_is_written_outside_the_registry():
    """The package and the scripts (agents/) name a trainer only through the registry: no string
    literal that is a trainer's name (docstrings and comments aside)."""
    names = {repr(n) for n in TRAINERS} | {f'"{n}"' for n in TRAINERS}
    found = []
    for path in sorted([*(ROOT / "dyn4_gym").rglob("*.py"), *(ROOT / "agents").glob("*.py")]):
        if path.name == "trainers.py":
            continue
        for tok in tokenize.tokenize(io.BytesIO(path.read_bytes()).readline):
            if tok.type == tokenize.STRING and tok.string in names:
                found.append(f"{path.relative_to(ROOT)}:{tok.start[0]}: {tok.line.strip()}")
    assert not found, "\n".join(found)


def test_the_registry_names_its_trainers_and_refuses_others():
    assert DEFAULT_TRAINER in TRAINERS and TRAINERS[DEFAULT_TRAINER].kind == "plant"
    assert set(sb3_trainers()) == {n for n, t in TRAINERS.items() if t.kind == "sb3"} and sb3_trainers()
    assert all(t.name == n and t.suffix.startswith(".") for n, t in TRAINERS.items())
    with pytest.raises(ValueError, match="is not a trainer; the trainers are " + ", ".join(TRAINERS)):
        trainer("dqn")
    with pytest.raises(ValueError, match="needs its hyperparameters"):
        TRAINERS[sb3_trainers()[0]].make_run(SMALL_ENV, 0)
    # the shipped agents' methods and the scripts' choices come from it
    from dyn4_gym.agents.pretrained import METHODS

    assert METHODS == {n: t.suffix for n, t in TRAINERS.items()}


def _settings(t):
    if t.kind == "plant":
        from dyn4_gym.agents import SHACConfig

        return SHACConfig(num_envs=2, horizon=4, critic_iters=1, hidden=(8,))
    return dict(n_envs=2, policy="MlpPolicy", policy_kwargs="dict(net_arch=[8])", normalize=True,
                **({"n_steps": 8, "batch_size": 8, "n_epochs": 1} if t.sb3_class == "PPO" else
                   {"learning_starts": 4, "batch_size": 8, "train_freq": 1, "gradient_steps": 1}))


@pytest.mark.parametrize("name", list(TRAINERS))
def test_every_trainer_trains_in_env_steps_and_saves_a_policy_that_reloads(name, tmp_path):
    pytest.importorskip("stable_baselines3")
    from dyn4_gym.agents.sb3_glue import parse_zoo_values

    t = TRAINERS[name]
    settings = _settings(t)
    run = t.make_run(SMALL_ENV, seed=0, settings=settings if t.kind == "plant" else parse_zoo_values(settings),
                     compile=False)
    assert isinstance(run, Run) and run.env_steps == 0
    recs = run.train_to(16)
    assert run.env_steps >= 16 and isinstance(recs, list)
    assert run.train_to(8) == [] and run.env_steps >= 16  # already past: nothing trained
    obs = torch.randn(5, len(_obs_names()))
    act = run.policy()(obs)
    assert act.shape == (5, 2) and torch.isfinite(act).all()
    files = run.save(str(tmp_path / "agent"))
    assert files[0] == str(tmp_path / "agent") + t.suffix and all(Path(f).exists() for f in files)
    reloaded = t.load_policy(str(tmp_path / "agent"))
    torch.testing.assert_close(reloaded(obs).float(), act.float(), rtol=1e-5, atol=1e-6)


def _obs_names():
    from dyn4_gym.envs import EnvConfig, TaskCore

    return TaskCore(EnvConfig.from_dict(SMALL_ENV)).obs_names


def test_a_monkeypatched_run_class_is_what_make_run_builds(monkeypatch):
    """The benchmark builds through the registry (its tests patch the run class there)."""
    made = []
    monkeypatch.setattr(trainers, "_SB3Run", lambda *a: made.append(a) or "run")
    assert TRAINERS[sb3_trainers()[0]].make_run(SMALL_ENV, 3, {"n_envs": 2}) == "run"
    assert made == [(sb3_trainers()[0], {"n_envs": 2}, SMALL_ENV, 3)]


def test_a_plant_run_compiles_as_its_config_says_unless_told():
    """``make_run``'s ``compile`` left out is the config's own: a ``SHACConfig(compile=False)``
    is not compiled behind the caller's back (it was: the default True overrode it)."""
    from dyn4_gym.agents.shac import SHACConfig

    run = TRAINERS["shac"].make_run(SMALL_ENV, 0, SHACConfig(num_envs=2, horizon=4, compile=False))
    assert run.agent.config.compile is False and run.agent.env.core.cfg.compile is False
    run = TRAINERS["shac"].make_run(SMALL_ENV, 0, SHACConfig(num_envs=2, horizon=4), compile=True)
    assert run.agent.config.compile is True and run.agent.env.core.cfg.compile is True
