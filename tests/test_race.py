"""Issue 23: the race task (``Dyn4HumveeRace-v0``) and its classical baseline, the minimum-time
speed profile tracked by pure pursuit (dyn4_gym/agents/race.py)."""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

import dyn4_gym
from dyn4_gym.agents.race import HUMVEE_ENVELOPE, RaceProfileParams, _curvature, run_race_baseline, speed_profile
from dyn4_gym.envs import EnvConfig, TaskCore
from dyn4_gym.envs.course import preview_points
from dyn4_gym.model.task import OBS_INDEX, obs_names

RACE = {k: v for k, v in dyn4_gym.RACE.items() if k != "engine"}


def test_the_race_task_is_registered_and_passes_gymnasiums_checker():
    from gymnasium.utils.env_checker import check_env

    env = gym.make("Dyn4HumveeRace-v0")
    assert env.spec.max_episode_steps == 1200
    assert env.observation_space.shape == (35,)
    check_env(env.unwrapped, skip_render_check=True)
    cfg = env.unwrapped._runner.core.cfg
    assert cfg.progress_cap is None and cfg.course.preview_friction and cfg.target_speed == 20.0


def test_it_observes_the_friction_ahead_and_pays_metres_less_time():
    """The last five entries are the ground's friction at the preview points; a step's reward is
    its progress less half the design speed's distance over the step (0.5 m/s x 20 x 0.05 s)."""
    core = TaskCore(EnvConfig.from_dict(dict(RACE, dtype="float64", engine="torch")))
    assert core.obs_names == obs_names(False, True) and core.obs_names[-5:] == tuple(f"preview{k}_mu" for k in range(5))
    st = core.new_state(torch.arange(3), torch.zeros(3, dtype=torch.long))
    obs = core.observe(st)
    pts = preview_points(st.course_xy, st.s, torch.tensor(core.cfg.course.preview, dtype=torch.float64),
                         core.cfg.course.spacing)
    assert torch.allclose(obs[:, -5:], st.terrain(pts)[0])  # scale 1, inside the clip
    assert OBS_INDEX["preview0_mu"] == 34  # after the driver's and the clock's entries in the full table
    st1, _, r, _, _, info = core.step(st, torch.tensor([[0.0, 0.2]] * 3, dtype=torch.float64))
    assert torch.allclose(info["reward_terms"]["time"], torch.full((3,), -1.0, dtype=torch.float64))
    assert torch.allclose(r, info["reward_terms"]["progress"] - 0.5)  # every other weight is 0 on a live step


def test_the_speed_profile_never_asks_more_than_the_envelope():
    """On random courses and friction maps: the corner speed inside ``margin`` of the lateral
    limit, and every step's acceleration inside the friction ellipse (the drive's or the
    brakes' limit combined with the lateral acceleration used)."""
    rng = np.random.default_rng(0)
    env = HUMVEE_ENVELOPE
    for _ in range(20):
        n, ds, margin = 400, 1.0, float(rng.uniform(0.6, 1.0))
        kappa = 0.03 * np.sin(np.cumsum(rng.uniform(0.0, 0.1, n))) * rng.uniform(0.2, 1.0)
        mu = np.clip(0.8 + 0.4 * (rng.random(n) < 0.1) * rng.uniform(-1.0, 0.5), 0.3, 1.2)
        v = speed_profile(kappa, mu, ds, float(rng.uniform(0.0, 25.0)), env, margin)
        a_lat = margin * env.lateral(mu)
        assert np.all(v**2 * np.abs(kappa) <= a_lat * (1 + 1e-9))
        ax = np.diff(v**2) / (2 * ds)  # the longitudinal acceleration between points
        for i in range(n - 1):
            j = i if ax[i] >= 0 else i + 1  # the point the pass took the limit at
            use = min((v[j] ** 2 * abs(kappa[j]) / a_lat[j]) ** 2, 1.0)
            limit = margin * (env.drive(v[i], mu[i]) if ax[i] >= 0 else env.braking(mu[j])) * math.sqrt(1 - use)
            assert abs(ax[i]) <= limit * (1 + 1e-9) + 1e-12
        assert (v <= 40.0 + 1e-9).all() and (v >= 0).all()


def test_curvature_of_a_circle():
    t = np.arange(0, 200) / 50.0  # 1 m steps on a 50 m circle
    xy = 50.0 * np.stack((np.sin(t), 1 - np.cos(t)), -1)
    assert np.allclose(_curvature(xy, 1.0), 1 / 50.0, rtol=1e-3)


@pytest.mark.slow
def test_the_envelope_is_the_plants():
    """HUMVEE_ENVELOPE's limits are the plant's manoeuvres' (skidpad and full-brake stop at mu 0.8)."""
    from dyn4_gym.ground import Flat
    from dyn4_gym.plant import HUMVEE, dyn4_params
    from dyn4_gym.plant.manoeuvres import skidpad, stop

    p = dyn4_params(HUMVEE, dtype=torch.float64)
    assert HUMVEE_ENVELOPE.lateral(0.8) == pytest.approx(skidpad(p, Flat(mu=0.8))["ay_max"], rel=2e-3)
    d = stop(p, Flat(mu=0.8))["distance"]
    assert HUMVEE_ENVELOPE.braking(0.8) == pytest.approx(20.0**2 / (2 * d), rel=2e-3)


@pytest.mark.slow
def test_the_baseline_finishes_validation_courses_at_speed():
    from dyn4_gym.agents.evaluation import VALIDATION_SEEDS

    r = run_race_baseline(VALIDATION_SEEDS[:4], params=RaceProfileParams(margin=0.8))
    print(f"race baseline: times {np.round(r.time, 2)} s, returns {np.round(r.returns, 1)}")
    assert r.finished.all()
    assert (r.time < 400.0 / 12.0).all()  # faster than 12 m/s on average
    # it brakes for corners: the profile dips well below its straight-line speed on every course
    assert (r.profiles.min(1) < 0.8 * r.profiles.max(1)).all()


SHORT_RACE = dict(RACE, course=dict(RACE["course"], length=150.0), episode_steps=300)


@pytest.mark.slow
def test_shac_learns_to_race():
    """The differentiable trainer on a 150 m race course: from crashing (return about -27) to
    finishing courses within 20 iterations of 16 x 16 steps (measured: 33.1, 5 of 8 finished)."""
    from dyn4_gym.agents.evaluation import evaluate
    from dyn4_gym.agents.shac import SHAC, SHACConfig

    seeds = tuple(range(10_000, 10_008))
    agent = SHAC(SHACConfig(num_envs=16, horizon=16, seed=1), SHORT_RACE)
    before = evaluate(agent.policy, SHORT_RACE, seeds=seeds)
    agent.train(iterations=20, log=None)
    after = evaluate(agent.policy, SHORT_RACE, seeds=seeds)
    print(f"SHAC on the race: return {before.mean_return:.1f} -> {after.mean_return:.1f}, finished "
          f"{before.finished:.2f} -> {after.finished:.2f}")
    assert after.mean_return > before.mean_return + 30.0 and after.finished > before.finished


@pytest.mark.slow
def test_ppo_learns_to_race():
    """PPO (SB3) on the same 150 m race course, 24k env steps: it crashes later (measured: return
    -25.5 -> -16.8, none finished yet: a short check that it learns, not a result)."""
    from dyn4_gym.agents.evaluation import evaluate
    from test_agents import small_ppo

    model, policy = small_ppo(SHORT_RACE)
    seeds = tuple(range(10_000, 10_004))
    before = evaluate(policy, SHORT_RACE, seeds=seeds).mean_return
    model.learn(total_timesteps=24_576)
    after = evaluate(policy, SHORT_RACE, seeds=seeds).mean_return
    print(f"PPO on the race: return {before:.1f} -> {after:.1f}")
    assert after > before + 4.0


def test_the_race_harness_drives_a_learners_policy_on_the_same_courses():
    """``run_race_baseline(policy=...)``: a policy that steers hard left leaves the corridor, is
    not timed and pays the termination weight."""
    r = run_race_baseline((20_000, 20_001), policy=lambda obs: torch.tensor([[1.0, 1.0]] * obs.shape[0]))
    assert not r.finished.any() and np.isinf(r.time).all()
    assert (r.returns < 0).all() and len(r.speeds) < 200


def test_the_tuned_setting_is_the_one_the_tuning_chose():
    """``RACE_TUNED`` (what learners are measured against) is docs/race_baseline.json's choice."""
    import json
    import os

    from dyn4_gym.agents.race import RACE_TUNED

    with open(os.path.join(os.path.dirname(__file__), "..", "docs", "race_baseline.json")) as fh:
        chosen = json.load(fh)["chosen"]
    assert chosen == {"margin": RACE_TUNED.margin, "lead": RACE_TUNED.lead}


def test_the_evaluation_clocks_a_finish_as_the_race_harness_does():
    """``evaluate``'s per-course arrival (the Numba engine: the learning benchmark's) is the race
    harness's time to finish (the torch engine: the baseline's) for the same policy and courses."""
    from dyn4_gym.agents.classical import PurePursuit
    from dyn4_gym.agents.evaluation import evaluate

    kw = dict(RACE, target_speed=12.0)  # pure pursuit at 12 m/s finishes these courses
    pp = PurePursuit.for_env(kw)
    seeds = (20_000, 20_001, 20_002)
    ev = evaluate(pp, dict(kw, dtype="float64"), seeds=seeds)
    r = run_race_baseline(seeds, env_kwargs=dict(target_speed=12.0), policy=pp)
    assert r.finished.all() and np.isfinite(ev.arrival).all()
    assert ev.arrival == pytest.approx(r.time, abs=1e-9)
    assert ev.finished == 1.0 and ev.litres is None
