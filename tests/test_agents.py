"""Agents: the classical controller's differentiable step, the differentiable trainer, scripts."""

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.autograd import gradcheck

from dyn4_gym.agents import SHAC, PurePursuit, SHACConfig
from dyn4_gym.agents.evaluation import evaluate
from dyn4_gym.envs import EnvConfig, TaskCore
from dyn4_gym.ground import Grid

D = torch.float64
ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(course={"length": 80.0}, episode_steps=120, ground={"hills_amplitude": 0.0, "n_bumps": 0, "n_patches": 0})


def test_controller_plus_plant_step_gradcheck_on_a_grid_off_its_nodes():
    core = TaskCore(EnvConfig.from_dict(dict(dtype="float64", control_dt=0.02)))
    st = core.new_state(torch.tensor([5]), torch.zeros(1, dtype=torch.long))
    gen = torch.Generator().manual_seed(0)
    grid = Grid(heights=torch.randn(40, 20, generator=gen, dtype=D) * 0.04,
                mu=0.7 + 0.2 * torch.rand(40, 20, generator=gen, dtype=D), origin=(-5.0, -10.0), spacing=1.0)
    pp = PurePursuit()
    for k in range(3):
        x0 = st.x.clone()
        # jitter the start off the grid's nodes (bilinear kinks sit on the grid lines)
        x0[0, 0] = 3.0 + 0.37 * k + 0.113
        x0[0, 1] = 0.21 + 0.05 * k
        x0[0, 2] = 0.05
        x0[0, 4], x0[0, 5] = 0.2, 0.05
        # and off the drive/brake switch: at the target speed the speed loop commands exactly 0,
        # where the lagged command's sign picks drive or brake (a kink, like a grid node)
        x0[0, 3], x0[0, 13] = 9.6, 0.3
        base = replace(st, terrain=grid)

        def f(x):
            s = replace(base, x=x)
            return core.step(s, pp(core.observe(s)))[0].x

        assert gradcheck(f, (x0.requires_grad_(),), eps=1e-6, atol=1e-5, rtol=1e-4)


def test_classical_controller_finishes_the_held_out_courses():
    res = evaluate(PurePursuit(), seeds=(10_000, 10_001, 10_002))
    assert res.finished == 1.0 and res.mean_return > 200 and res.cross_track_rms < 1.0
    assert 9.0 < res.mean_speed < 10.5 and 0 < res.energy_per_km < 5e3


def test_evaluation_is_the_same_on_both_engines():
    """evaluate() runs on the env's engine (Numba by default): the figures match the torch
    engine's in float64, terms and books included."""
    kw = dict(dtype="float64", course={"length": 80.0})
    ev = {e: evaluate(PurePursuit(), {**kw, "engine": e}, seeds=(10_000, 10_003), max_steps=180)
          for e in ("numba", "torch")}
    a, b = ev["numba"], ev["torch"]
    for k, v in a.row().items():
        assert v == pytest.approx(b.row()[k], rel=1e-9, abs=1e-9), k
    for k in a.terms:
        assert a.terms[k] == pytest.approx(b.terms[k], rel=1e-9, abs=1e-9), k
    for k in a.books:
        assert a.books[k] == pytest.approx(b.books[k], rel=1e-9, abs=1e-6), k
    assert np.allclose(a.traces, b.traces, equal_nan=True, atol=1e-9) and a.finished == 1.0


def test_gradients_through_a_32_step_window_are_finite():
    agent = SHAC(SHACConfig(num_envs=4, horizon=32, critic_iters=1), {**SMALL, "episode_steps": 60})
    rec = agent.iteration()
    assert rec["grad_finite"] and rec["grad_norm"] > 0
    agent.train(iterations=2, log=None)  # 3 x 32 steps: every row has finished a 60-step episode
    assert agent.episode_lines and "term/progress" in agent.episode_lines[0] and "books/supplied" in agent.episode_lines[0]
    assert all(torch.isfinite(p.grad).all() for p in agent.actor.parameters())


def test_ahac_cuts_windows_at_stiff_steps_and_is_shac_without_them(tmp_path):
    """``SHACConfig.stiff_cut`` (AHAC's adaptive horizon, per row): a threshold no step reaches
    trains exactly as SHAC does; one that every moving step passes cuts nearly every row's window
    at every step, and the gradient stays finite. The checkpoint keeps the setting; bad values
    are refused (the cut's effect on the graph: tests/test_envs.py, detach_rows)."""
    cfg = SHACConfig(num_envs=4, horizon=8, critic_iters=1, seed=3)
    plain, never = SHAC(cfg, SMALL), SHAC(replace(cfg, stiff_cut=1e9), SMALL)
    for _ in range(2):
        a, b = plain.iteration(), never.iteration()
        assert a["actor_loss"] == b["actor_loss"] and b["stiff_cut_share"] == 0.0
    obs = torch.randn(5, 30)
    assert torch.equal(plain.policy(obs), never.policy(obs))
    always = SHAC(replace(cfg, stiff_cut=1e-30), SMALL)
    rec = always.iteration()
    assert rec["grad_finite"] and rec["stiff_cut_share"] > 0.9
    always.save(str(tmp_path / "a.pt"))
    assert SHAC.load(str(tmp_path / "a.pt")).config.stiff_cut == 1e-30
    for bad in (0.0, -1.0, float("nan"), float("inf"), True, "0.1"):
        with pytest.raises(ValueError, match="stiff_cut"):
            SHACConfig(stiff_cut=bad).validate()


def test_the_finite_horizon_critic_ends_the_horizon_at_the_step_limit(tmp_path, monkeypatch):
    """``SHACConfig.finite_horizon`` (issue 44, item 5): with the clock observed, a row truncated
    at the step limit has finished, so the window's closing value is not bootstrapped there. With
    every row truncated at the window's last step and a target critic that says C everywhere, the
    two settings' actor losses differ by exactly gamma^h C / h (the bootstrap they disagree on),
    with the same actions and rewards; an env without the clock is refused, as are non-bools."""
    kw = dict(SMALL, time_budget=4.0, observe_clock=True, episode_steps=4)
    cfg = SHACConfig(num_envs=3, horizon=4, critic_iters=1, gamma=1.0, seed=5)
    c = 7.0
    losses = []
    for fh in (False, True):
        agent = SHAC(replace(cfg, finite_horizon=fh), kw)
        with torch.no_grad():
            agent.target.net[-1].weight.zero_()
            agent.target.net[-1].bias.fill_(c)
        losses.append(agent.iteration()["actor_loss"])
    assert losses[0] - losses[1] == pytest.approx(-c / cfg.horizon, rel=1e-5)
    import dyn4_gym.agents.shac as shac_module

    with monkeypatch.context() as m:  # refused before any env is built
        m.setattr(shac_module, "Dyn4DiffEnv", lambda *a, **k: pytest.fail("built an env it then refused"))
        with pytest.raises(ValueError, match="observe_clock"):
            SHAC(replace(cfg, finite_horizon=True), SMALL)
    for bad in (1, "yes", None):
        with pytest.raises(ValueError, match="finite_horizon"):
            SHACConfig(finite_horizon=bad).validate()
    agent = SHAC(replace(cfg, finite_horizon=True), dict(kw, sync_free=False))  # the env's own keyword, not config
    agent.save(str(tmp_path / "f.pt"))
    assert SHAC.load(str(tmp_path / "f.pt")).config.finite_horizon is True


def test_save_load_and_resume(tmp_path):
    agent = SHAC(SHACConfig(num_envs=4, horizon=8, critic_iters=1), SMALL)
    agent.train(iterations=2, log=None)
    path = tmp_path / "m.pt"
    agent.save(str(path))
    again = SHAC.load(str(path))
    obs = torch.randn(5, 30)
    assert torch.equal(agent.policy(obs), again.policy(obs))
    assert again.iterations == 2 and again.env_steps == agent.env_steps
    again.train(iterations=1, log=None)
    assert again.iterations == 3 and again.env_steps == agent.env_steps + 4 * 8


def test_the_published_schedule_sets_adam_and_decays_to_zero(tmp_path):
    """``shac_published``: Adam's betas (0.7, 0.95) in both optimisers, learning rates falling
    linearly to 0 at the budget, and a checkpoint that keeps the betas; bad betas are refused."""
    from dyn4_gym.agents import shac_published

    cfg = shac_published(64, num_envs=4, horizon=8, critic_iters=1)
    assert cfg.betas == (0.7, 0.95) and cfg.lr_decay_steps == 64 and cfg.num_envs == 4
    agent = SHAC(cfg, SMALL)
    for opt in (agent.actor_opt, agent.critic_opt):
        assert opt.param_groups[0]["betas"] == (0.7, 0.95)
    agent.train(iterations=1, log=None)  # the rate is set before each window's step: at 0 env steps, the full rate
    assert agent.actor_opt.param_groups[0]["lr"] == pytest.approx(cfg.actor_lr)
    agent.train(iterations=1, log=None)  # at 32 of 64 steps: half
    assert agent.actor_opt.param_groups[0]["lr"] == pytest.approx(cfg.actor_lr / 2)
    path = tmp_path / "p.pt"
    agent.save(str(path))
    again = SHAC.load(str(path))
    assert again.config.betas == (0.7, 0.95) and again.actor_opt.param_groups[0]["betas"] == (0.7, 0.95)
    for bad in ((0.9,), (1.0, 0.9), (0.9, -0.1), [0.9, 0.99], (0.9, float("nan")), (True, 0.9)):
        with pytest.raises(ValueError, match="betas"):
            SHACConfig(betas=bad).validate()


def _driver_agent_trains_saves_and_loads(pedals: str, tmp_path):
    """A SHAC agent with ``pedals`` on the driver's action: one iteration, then its checkpoint's
    policy acts as the agent does."""
    agent = SHAC(SHACConfig(num_envs=4, horizon=8, critic_iters=1, pedals=pedals), dict(SMALL, action="driver"))
    agent.train(iterations=1, log=None)
    path = tmp_path / f"{pedals}.pt"
    agent.save(str(path))
    policy, _ = SHAC.load_policy(str(path))
    obs = torch.randn(3, agent.actor.net[0].in_features, generator=torch.Generator().manual_seed(0))
    assert torch.equal(policy(obs), agent.policy(obs))
    return agent


def test_one_pedal_actor_starts_coasting_and_never_presses_both_pedals(tmp_path):
    """``pedals="one"`` on the driver's box: two Gaussian entries, the throttle on ``tanh u``'s
    positive side and the brake on its negative, within [0, 1] and never both; the untrained mean
    is near coasting (both pedals under 0.1, where "box" starts at both half pressed); it trains,
    saves and loads; an unknown value is refused."""
    from dyn4_gym.agents.shac import Actor

    box = Actor(4, (8,), -1.0, (-1.0, 0.0, 0.0), (1.0, 1.0, 1.0), driver=True)
    one = Actor(4, (8,), -1.0, (-1.0, 0.0, 0.0), (1.0, 1.0, 1.0), pedals="one", driver=True)
    assert one.log_std.shape == (2,) and box.log_std.shape == (3,)
    z = torch.randn(512, 4, generator=torch.Generator().manual_seed(0)) * 3
    a = one(z, generator=torch.Generator().manual_seed(1))
    assert a.shape == (512, 3) and (a[:, 1:] >= 0).all() and (a[:, 1:] <= 1).all() and (a[:, 0].abs() <= 1).all()
    assert ((a[:, 1] == 0) | (a[:, 2] == 0)).all()
    assert (a[:, 1] > 0).any() and (a[:, 2] > 0).any()  # noise presses each pedal on some rows
    mean = one(z[:8] / 3, deterministic=True)  # normalised observations
    assert (mean[:, 1:] < 0.1).all()
    assert ((box(z[:8] / 3, deterministic=True)[:, 1:] - 0.5).abs() < 0.1).all()
    # the same as "box" on the two-entry accel box
    acc = Actor(4, (8,), -1.0, pedals="one")
    assert not acc.one_pedal and acc.log_std.shape == (2,)
    # the driver's box is said by the env, not read from the size: a 3-entry box of another
    # action is a box, and a driver's box of another size is refused
    other = Actor(4, (8,), -1.0, (-1.0, -1.0, -1.0), (1.0, 1.0, 1.0), pedals="one")
    assert not other.one_pedal and other.log_std.shape == (3,)
    with pytest.raises(ValueError, match="driver's box"):
        Actor(4, (8,), -1.0, pedals="one", driver=True)
    _driver_agent_trains_saves_and_loads("one", tmp_path)
    with pytest.raises(ValueError, match="pedals"):
        SHACConfig(pedals="two").validate()


def test_symmetric_pedals_brake_as_hard_as_they_drive_near_coasting(tmp_path):
    """``pedals="symmetric"``: the brake's side bent so that at coasting its slope, in the spec's
    deceleration, equals the throttle's in drive (zero-mean noise on ``u`` neither speeds nor
    slows the car to first order); full braking is still reached; the pedals never press
    together; the agent derives the ratio from the car and saves and loads it."""
    from dyn4_gym.agents.shac import Actor, _brake_ratio

    r = 3.0 / 13.2
    sym = Actor(4, (8,), -1.0, (-1.0, 0.0, 0.0), (1.0, 1.0, 1.0), pedals="symmetric", brake_ratio=r, driver=True)
    with torch.no_grad():
        sym.net[-1].weight.zero_()
    pedals = {}
    for u in (-1e-4, 1e-4, -50.0):
        with torch.no_grad():
            sym.net[-1].bias.copy_(torch.tensor([0.0, u]))
        pedals[u] = sym(torch.zeros(1, 4), deterministic=True)[0].double()
    assert pedals[1e-4][2] == 0 and pedals[-1e-4][1] == 0
    drive_slope, brake_slope = 3.0 * pedals[1e-4][1] / 1e-4, 13.2 * pedals[-1e-4][2] / 1e-4
    assert float(brake_slope) == pytest.approx(float(drive_slope), rel=1e-3)
    assert float(pedals[-50.0][2]) == pytest.approx(1.0, abs=1e-6)
    # zero-mean noise at coasting: the mean drive and brake decelerations nearly cancel (with "one"
    # the brake's is 4.4x the drive's)
    z = torch.zeros(20000, 4)
    with torch.no_grad():
        sym.net[-1].bias.zero_()
        sym.log_std.fill_(-3.0)
    a = sym(z, generator=torch.Generator().manual_seed(0)).double()
    assert float(13.2 * a[:, 2].mean() / (3.0 * a[:, 1].mean())) == pytest.approx(1.0, abs=0.05)
    agent = _driver_agent_trains_saves_and_loads("symmetric", tmp_path)
    assert agent.actor.brake_ratio == pytest.approx(_brake_ratio(agent.env.core)) and 0 < agent.actor.brake_ratio < 1


def test_env_step_budget_is_machine_independent():
    """A budget in env steps ends at the same iteration for the same seed, wherever it runs; the
    progress callback sees every iteration."""
    seen = []
    runs = []
    for _ in range(2):
        agent = SHAC(SHACConfig(num_envs=4, horizon=8, critic_iters=1, seed=3), SMALL)
        hist = agent.train(env_steps=80, log=None, on_iteration=seen.append)
        runs.append((agent.env_steps, [h["actor_loss"] for h in hist]))
    assert runs[0][0] == 96 and runs[0] == runs[1]  # 3 windows of 4 x 8 steps: the first past 80
    assert len(seen) == 6
    with pytest.raises(ValueError, match="env_steps"):
        agent.train(log=None)


@pytest.mark.slow
def test_differentiable_trainer_improves_the_return_within_a_minute():
    seeds = tuple(range(10_000, 10_008))
    agent = SHAC(SHACConfig(num_envs=16, horizon=16, seed=1), SMALL)
    before = evaluate(agent.policy, SMALL, seeds=seeds).mean_return
    agent.train(iterations=20, log=None)  # about 25 s here
    after = evaluate(agent.policy, SMALL, seeds=seeds).mean_return
    print(f"return before {before:.2f}, after {after:.2f} ({agent.env_steps} env steps)")
    assert after > before + 10.0


def _script(*args, timeout=600):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_scripts_run_end_to_end(tmp_path):
    out = tmp_path / "diff"
    r = _script("agents/train_diff.py", "--iterations", "2", "--num-envs", "4", "--horizon", "8", "--eval-seeds", "2",
                "--env-kwargs", '{"course": {"length": 60.0}, "episode_steps": 60}', "--out", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    assert (out / "model.pt").exists() and (out / "config.json").exists() and (out / "evaluation.json").exists()
    # a second run into the same folder is refused in one line; --overwrite replaces the run (issue 46)
    again = ("agents/train_diff.py", "--iterations", "1", "--num-envs", "4", "--horizon", "8", "--eval-seeds", "1",
             "--env-kwargs", '{"course": {"length": 60.0}, "episode_steps": 60}', "--out", str(out))
    r = _script(*again)
    assert r.returncode == 2 and "already holds a run" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    (out / "history.json").write_text("[]")
    r = _script(*again, "--overwrite")
    assert r.returncode == 0, r.stderr[-2000:]
    assert len(json.loads((out / "history.json").read_text())) == 1  # the new run's one iteration
    r = _script("agents/evaluate.py", "--policy", str(out / "model.pt"), "--seeds", "2", "--out", str(tmp_path / "ev"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "ev" / "evaluation.png").exists()
    r = _script("agents/evaluate.py", "--policy", "classical", "--seeds", "2", "--out", str(tmp_path / "ev2"),
                "--env-kwargs", '{"course": {"length": 60.0}}')
    assert r.returncode == 0 and "finished" in r.stdout


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_sb3_script_runs_end_to_end(tmp_path, algo):
    out = tmp_path / algo
    kw = '{"course": {"length": 60.0}, "episode_steps": 50}'
    r = _script("agents/train_sb3.py", "--algo", algo, "--timesteps", "256", "--eval-freq", "4096",
                "--eval-episodes", "2", "--env-kwargs", kw, "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    for name in ("model.zip", "config.yml", "run.json", "vecnormalize.pkl"):
        assert (out / name).exists(), name
    r = _script("agents/evaluate.py", "--policy", str(out / "model.zip"), "--seeds", "2", "--out", str(tmp_path / "ev"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "mean_return" in r.stdout


def test_zoo_config_loads_and_splits():
    from dyn4_gym.agents.sb3_glue import load_zoo_config, split_hyperparams

    from dyn4_gym.agents.sb3_glue import normalize_kwargs

    for algo_name in ("ppo", "sac"):
        for env_id in ("Dyn4Humvee-v1", "Dyn4HumveeFlat-v1"):
            hp = load_zoo_config(str(ROOT / "configs" / f"{algo_name}.yml"), env_id)
            run, algo = split_hyperparams(hp)
            assert isinstance(run["n_envs"], int) and run["n_envs"] >= 1 and "n_envs" not in algo
            assert isinstance(algo["policy_kwargs"], dict) and "net_arch" in algo["policy_kwargs"]
            norm = normalize_kwargs(run)
            assert norm is None or set(norm) <= {"norm_obs", "norm_reward", "clip_obs", "clip_reward", "gamma"}
    assert normalize_kwargs({"normalize": True}) == {} and normalize_kwargs({}) is None
    raw = load_zoo_config(str(ROOT / "configs" / "ppo.yml"), parse=False)
    assert isinstance(raw["policy_kwargs"], str)  # RL Zoo's own form
    with pytest.raises(KeyError, match="no section"):
        load_zoo_config(str(ROOT / "configs" / "ppo.yml"), env_id="Nope-v0")


@pytest.mark.slow
def test_rl_zoo_trains_from_our_config(tmp_path):
    """RL Zoo 3 reads configs/ppo.yml through --gym-packages dyn4_gym (skipped without rl_zoo3)."""
    pytest.importorskip("rl_zoo3")
    r = _script("-m", "rl_zoo3.train", "--gym-packages", "dyn4_gym", "--env", "Dyn4Humvee-v1", "--algo", "ppo",
                "--conf-file", str(ROOT / "configs" / "ppo.yml"), "-n", "512", "--log-folder", str(tmp_path),
                "--eval-freq", "-1", "--hyperparams", "n_envs:2", "n_steps:64", "batch_size:64")
    assert r.returncode == 0, r.stderr[-3000:]
    # and evaluate.py takes the Zoo's model, finding its normaliser in the Zoo's folder
    model = next(tmp_path.glob("ppo/Dyn4Humvee-v1_*/Dyn4Humvee-v1.zip"))
    assert (model.parent / "Dyn4Humvee-v1" / "vecnormalize.pkl").exists()
    r = _script(str(ROOT / "agents" / "evaluate.py"), "--policy", str(model), "--seeds", "1", "--out",
                str(tmp_path / "eval"), "--env-kwargs", '{"course": {"length": 60.0}}')
    assert r.returncode == 0 and "mean_return" in r.stdout, r.stderr[-3000:]
    assert "no vecnormalize.pkl" not in r.stderr


@pytest.mark.slow
def test_main_job_and_demo_run(tmp_path):
    """The main job on its default task, Race-v1 (against the racing line and the oracle's stored
    times), on Race-v0 (against the min-time profile too) and on v1 (against pure pursuit); then
    the demo."""
    import json

    r = _script("-m", "dyn4_gym", "--env-steps", "256", "--num-envs", "4", "--eval-seeds", "1", "--no-compile",
                "--out", str(tmp_path / "race_v1"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Dyn4HumveeRace-v1" in r.stdout and "IQM time to finish" in r.stdout and "oracle" in r.stdout
    ev = json.loads((tmp_path / "race_v1" / "evaluation.json").read_text())
    assert ev["task"] == "Dyn4HumveeRace-v1" and ev["trained"]["courses"] == 1 and "baseline" not in ev
    # the first held-out course as the benchmark measured it (docs/race_v1_line_baseline.json, the oracle's run)
    assert ev["racing_line"]["times"] == [pytest.approx(53.05)] and ev["oracle"]["times"] == [pytest.approx(51.5)]
    assert "vs_oracle" in ev["trained"] and 30.0 < ev["straight_line_time"] < 40.0  # 1 km floored: 33.75 s
    r = _script("-m", "dyn4_gym", "--task", "race", "--env-steps", "256", "--num-envs", "4", "--eval-seeds", "2",
                "--no-compile", "--env-kwargs", '{"episode_steps": 60}', "--out", str(tmp_path / "race"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Dyn4HumveeRace-v0" in r.stdout and "IQM time to finish" in r.stdout and "baseline" in r.stdout
    ev = json.loads((tmp_path / "race" / "evaluation.json").read_text())
    assert ev["task"] == "Dyn4HumveeRace-v0" and ev["trained"]["courses"] == 2 and ev["env_steps"] >= 256
    assert ev["baseline"]["finished"] == 0  # 3 s is too short to finish 400 m: every time is unfinished (null)
    assert ev["racing_line"]["finished"] == 0 and ev["racing_line"]["mean_time"] == pytest.approx(3.0)
    assert 15.0 < ev["straight_line_time"] < 20.0  # 400 m floored from 10 m/s: measured 16.80 s
    assert "racing line" in r.stdout and "floored straight line" in r.stdout and "oracle" not in ev
    assert ev["trained"]["times"] == [None, None] and (tmp_path / "race" / "main.png").exists()
    r = _script("-m", "dyn4_gym", "--task", "v1", "--seconds", "3", "--num-envs", "4", "--eval-seeds", "1",
                "--no-compile", "--env-kwargs", '{"course": {"length": 40.0}, "episode_steps": 40}', "--out",
                str(tmp_path / "main"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "main" / "main.png").exists() and "classical" in r.stdout
    r = _script("-m", "dyn4_gym.demo", "--quick", "--out", str(tmp_path / "demo"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "demo" / "manoeuvres.png").exists()
    assert "energy books" in r.stdout and "skidpad" in r.stdout


def small_ppo(kw: dict):
    """PPO on 16 rows of the env ``kw`` with normalised observations, the short learning checks'
    settings: ``(model, deterministic policy obs -> action)``."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecNormalize

    from dyn4_gym.envs.sb3 import Dyn4SB3VecEnv

    env = VecNormalize(Dyn4SB3VecEnv(num_envs=16, **kw), norm_obs=True, norm_reward=False)
    env.seed(0)
    model = PPO("MlpPolicy", env, n_steps=128, batch_size=512, n_epochs=10, learning_rate=3e-4, seed=0, device="cpu",
                policy_kwargs=dict(log_std_init=-1.0))

    def policy(obs):
        a, _ = model.predict(env.normalize_obs(obs.numpy()), deterministic=True)
        return torch.as_tensor(a, dtype=obs.dtype)

    return model, policy


@pytest.mark.slow
def test_ppo_learns_the_easy_variant():
    """PPO on the flat, constant-friction variant, 120 m courses: from about 15 to past 35 in 24k steps."""
    from dyn4_gym import FLAT_GROUND

    kw = dict(course={"length": 120.0}, episode_steps=300, ground=dict(FLAT_GROUND))
    model, policy = small_ppo(kw)
    seeds = tuple(range(10_000, 10_004))
    before = evaluate(policy, kw, seeds=seeds).mean_return
    model.learn(total_timesteps=24_576)
    after = evaluate(policy, kw, seeds=seeds).mean_return
    print(f"PPO on the flat variant: return {before:.1f} -> {after:.1f}")
    assert after > 35.0 and after > before + 15.0


@pytest.mark.slow
def test_sac_learns_the_easy_variant():
    """SAC with configs/sac.yml's settings (make_model, the benchmark's path) on the flat variant,
    120 m courses: the return rises by more than 25 within 24k env steps."""
    from dyn4_gym import FLAT_GROUND
    from dyn4_gym.agents.sb3_glue import load_zoo_config, make_model, model_policy

    kw = dict(course={"length": 120.0}, episode_steps=300, ground=dict(FLAT_GROUND))
    hp = load_zoo_config(str(ROOT / "configs" / "sac.yml"), "Dyn4HumveeFlat-v1")
    model = make_model("sac", {**hp, "learning_starts": 2000}, kw, seed=0)
    seeds = tuple(range(10_000, 10_004))
    before = evaluate(model_policy(model), kw, seeds=seeds).mean_return
    model.learn(total_timesteps=24_000)
    after = evaluate(model_policy(model), kw, seeds=seeds).mean_return
    print(f"SAC on the flat variant: return {before:.1f} -> {after:.1f}")
    assert after > before + 25.0
