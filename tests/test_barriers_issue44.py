"""Issue 44, item 5: the termination's smooth surrogates (agents/barriers.py) and SHAC's training
reward with them."""

import dataclasses
import math

import pytest
import torch

from dyn4_gym import RACE_V1
from dyn4_gym.agents import SHAC, SHACConfig
from dyn4_gym.agents.barriers import termination_barrier
from dyn4_gym.model.state import DYN4

RACE_ENV = {k: v for k, v in RACE_V1.items() if k != "engine"}


def test_barrier_is_zero_inside_and_quadratic_past_its_start():
    e = torch.tensor([0.0, 2.9, -3.0, 3.5, -4.5], dtype=torch.float64)
    roll = torch.tensor([0.0, 0.1, -0.4, 0.5, -0.7], dtype=torch.float64)
    b = termination_barrier(e, roll, half_width=4.0, roll_limit=0.6, edge=1.0, w_edge=10.0, roll_frac=0.8, w_roll=500.0)
    over_roll = [0.0, 0.0, 0.0, 0.5 - 0.48, 0.7 - 0.48]
    want = [10.0 * max(abs(v) - 3.0, 0.0) ** 2 + 500.0 * r ** 2 for v, r in zip(e.tolist(), over_roll)]
    assert b.tolist() == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_barrier_gradient_points_back_inside():
    """Past the barrier's start its gradient pushes |e| and |roll| down, on either side; inside it is 0."""
    e = torch.tensor([3.5, -3.5, 1.0], dtype=torch.float64, requires_grad=True)
    roll = torch.tensor([0.55, -0.55, 0.1], dtype=torch.float64, requires_grad=True)
    termination_barrier(e, roll, 4.0, 0.6, 1.0, 10.0, 0.8, 500.0).sum().backward()
    assert e.grad[0] > 0 and e.grad[1] < 0 and e.grad[2] == 0
    assert roll.grad[0] > 0 and roll.grad[1] < 0 and roll.grad[2] == 0
    # d/de of w (e - s)^2 = 2 w (e - s), against the closed form
    assert float(e.grad[0]) == pytest.approx(2 * 10.0 * 0.5)


@pytest.mark.parametrize("field,value", [("edge_barrier", -1.0), ("edge_barrier", math.inf), ("edge_margin", math.nan),
                                         ("roll_barrier", True), ("roll_frac", 0.0), ("roll_frac", 1.5)])
def test_shac_config_rejects_bad_barriers(field, value):
    with pytest.raises(ValueError, match=field):
        SHACConfig(**{field: value}).validate()


def test_shac_barrier_reads_the_step_it_ended_with():
    """SHAC's surrogate is the barrier of the step's own cross-track error and roll (read back from
    the observation, unscaled), with a gradient to the action; the task's reward is untouched."""
    torch.manual_seed(0)
    agent = SHAC(SHACConfig(num_envs=3, horizon=4, edge_barrier=10.0, roll_barrier=500.0), RACE_ENV)
    env = agent.env
    env.reset(seed=5)
    # move the rows sideways: 0 m, 3.4 m and -3.6 m off the centre line at the start (heading +X)
    st = env.state
    x = st.x.clone()
    x[:, DYN4.Y] = x[:, DYN4.Y] + torch.tensor([0.0, 3.4, -3.6], dtype=x.dtype)
    env.state = dataclasses.replace(st, x=x)
    action = torch.zeros(3, 2, dtype=x.dtype, requires_grad=True)
    _, r, term, trunc, info = env.step(action)
    assert not bool((term | trunc).any())
    b = agent._barrier(info)
    hw, lim = env.core.cfg.course.half_width, env.core.cfg.roll_limit
    e, roll = info["cross_track"].detach(), env.state.x[:, DYN4.PHI].detach()
    want = termination_barrier(e, roll, hw, lim, 1.0, 10.0, 0.8, 500.0)
    assert torch.allclose(b.detach().double(), want.double(), rtol=1e-5, atol=1e-9)
    bd = b.detach()
    assert float(bd[0]) == 0.0 and float(bd[1]) > 0 and float(bd[2]) > 0
    # its gradient reaches the action of the rows past the barrier's start (and only theirs)
    (g,) = torch.autograd.grad(b.sum(), action)
    assert float(g[0].abs().sum()) == 0.0 and float(g[1:].abs().sum()) > 0


def test_shac_with_barriers_off_is_shac():
    """Weights of 0 leave SHAC's iteration as it was: the same losses and parameters, bit for bit."""
    recs = []
    for cfg in (SHACConfig(num_envs=4, horizon=4, seed=1), SHACConfig(num_envs=4, horizon=4, seed=1, edge_margin=2.0)):
        agent = SHAC(cfg, RACE_ENV)
        rec = agent.iteration()
        recs.append((rec["actor_loss"], rec["critic_loss"], [p.detach().clone() for p in agent.actor.parameters()]))
    assert recs[0][:2] == recs[1][:2]
    assert all(torch.equal(a, b) for a, b in zip(recs[0][2], recs[1][2]))


def test_shac_with_barriers_trains_on_them():
    """On: the critic's targets and the actor's loss include the surrogate (a row put at the edge
    makes the window's loss larger than without), while the episode returns stay the task's."""
    losses = []
    for w in (0.0, 10.0):
        torch.manual_seed(0)
        agent = SHAC(SHACConfig(num_envs=2, horizon=3, seed=2, edge_barrier=w), RACE_ENV)
        st = agent.env.state
        x = st.x.clone()
        x[:, DYN4.Y] = x[:, DYN4.Y] + 3.5
        agent.env.state = dataclasses.replace(st, x=x)
        losses.append(agent.iteration()["actor_loss"])
    assert losses[1] > losses[0] + 1.0  # 3 steps at ~0.5 m past the start at weight 10: ~2.5 a step


def test_the_benchmark_trains_shac_on_race_v1_with_the_ablations_winner(load_script):
    """benchmarks/learning.py's SHAC on Race-v1: the initial log-std -2 and the corridor barrier
    over 1M env steps (the schedule decaying over them); the other tasks keep their budgets."""
    lb = load_script("benchmarks/learning.py")
    assert lb.budget_of("race_v1", "shac") == 1_000_000 and lb.budget_of("race", "shac") == 200_000
    assert lb.budget_of("race_v1", "ppo") == 2_000_000 and lb.budget_of("race_v1", "shac", 0.5) == 500_000
    run = lb.make_run("shac", "race_v1", 0, 2.0, compile=False)
    c = run.agent.config
    assert (c.init_log_std, c.edge_barrier, c.lr_decay_steps) == (-2.0, 10.0, 1_000_000)
    # the ablation's base stays the settings before it (its table reproduces)
    ab = load_script("benchmarks/shac_ablation.py")
    base = ab.make_agent("race_v1", "base", 0, ab.BASE_BUDGET, False).config
    assert (base.init_log_std, base.edge_barrier, base.lr_decay_steps) == (-1.0, 0.0, 200_000)


def test_an_observation_variant_is_trained_and_evaluated_with_its_sensors(load_script):
    """An ablation variant's ``obs_env`` (window128+ahead: six ground points ahead) is in its
    training env and its evaluation env alike, so the policy reads in evaluation what it learned
    on; the other variants' evaluation env is the task as registered."""
    import gymnasium as gym

    ab = load_script("benchmarks/shac_ablation.py")
    agent = ab.make_agent("eco_v2", "window128+ahead", 0, ab.BASE_BUDGET, False)
    assert agent.config.horizon == 128
    env_id = ab.L.TASKS["eco_v2"][0]
    plain = gym.make(env_id, **ab.eval_env("eco_v2", "window128")).observation_space.shape[0]
    ahead = gym.make(env_id, **ab.eval_env("eco_v2", "window128+ahead")).observation_space.shape[0]
    assert ahead == plain + 12 == agent.env.obs_dim
    assert ab.eval_env("eco_v2", "window128") == ab.L.env_kwargs_of("eco_v2", 0.0)
