"""The optional ``torch.compile`` path (dyn4_gym.plant.fast) computes the same step as eager."""

import pytest
import torch

from dyn4_gym.ground import Bump, MuSplit
from dyn4_gym.plant import HUMVEE, dyn4_params, dyn4_rest, dyn4_step
from dyn4_gym.plant.fast import compiled_step


@pytest.mark.slow
def test_compiled_step_matches_eager_to_rounding():
    D = torch.float64
    p = dyn4_params(HUMVEE, dtype=D)
    g = MuSplit(mu_left=0.8, mu_right=0.3) + Bump(x=3.0, y=0.9, height0=0.08, radius=0.7)
    gen = torch.Generator().manual_seed(0)
    x = dyn4_rest(p, g, (8,)).clone()
    x[:, 3] = 2.0 + 15.0 * torch.rand(8, generator=gen, dtype=D)
    x[:, 4] = torch.randn(8, generator=gen, dtype=D)
    x[:, 5] = 0.3 * torch.randn(8, generator=gen, dtype=D)
    u = torch.stack((0.4 * torch.rand(8, generator=gen, dtype=D) - 0.2, 6 * torch.rand(8, generator=gen, dtype=D) - 3), -1)
    fast = compiled_step(dyn4_step, p, g)
    xe, xc = x, x
    for _ in range(20):  # a few steps, so the check covers the compiled graph's reuse
        xe = dyn4_step(xe, u, p, g)
        xc = fast(xc, u)
    scale = xe.abs().clamp_min(1.0)
    assert float(((xc - xe).abs() / scale).max()) < 1e-10


def _windowed_run(env, policy, steps=16, window=5):
    """A SHAC-style run: a new window (the state detached) every ``window`` steps, the rewards
    summed and backpropagated into ``policy``. Returns the trace and the policy's gradients."""
    obs = env.reset(seed=5)
    trace, total = [], 0.0
    for t in range(steps):
        if t % window == 0:
            obs = env.detach()  # a new window: the state no longer needs its gradient
        obs, r, term, trunc, _ = env.step(torch.tanh(policy(obs)))
        trace.append((obs.detach(), r.detach(), term | trunc))
        total = total + r.sum()
    total.backward()
    return trace, [p.grad.clone() for p in policy.parameters()]


def test_a_windowed_compiled_run_builds_one_graph_per_part(monkeypatch):
    """With gradients, ``compile=True``'s two parts compile once each over windows, detaches,
    first substeps and resets (every input that may carry a gradient enters as a leaf that
    requires one, each sum its own tensor): two graphs, where the inputs' differing
    ``requires_grad`` and aliasing made five (docs/speed.md). Counted with AOTAutograd's eager
    backend, which traces forward and backward as Inductor does but compiles nothing."""
    import functools

    from torch._dynamo.utils import counters

    from dyn4_gym.envs import Dyn4DiffEnv

    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="aot_eager"))
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    policy = torch.nn.Sequential(torch.nn.Linear(30, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).double()
    env = Dyn4DiffEnv(num_envs=3, compile=True, dtype="float64", episode_steps=7, start_speed=12.0)
    trace, grads = _windowed_run(env, policy)
    assert sum(bool(d.any()) for *_, d in trace) >= 2  # resets happened inside the run
    assert all(torch.isfinite(g).all() for g in grads)
    assert counters["stats"]["unique_graphs"] == 2


@pytest.mark.slow
def test_compiled_env_step_matches_eager_with_gradients():
    """``compile=True`` (TaskCore.compiled_step, forward and backward compiled) gives the eager
    step's observations, rewards and policy gradient, through windows, detaches and resets, with
    a user's reward term among the built-ins. The terms stay inside the compiled step: before,
    the user term's write check split the step at every term, each term's name recompiled
    ``evaluate_term`` until torch.compile's limit (8) sent it to eager."""
    import torch._dynamo.eval_frame as eval_frame

    from dyn4_gym.envs import Dyn4DiffEnv
    from dyn4_gym.envs.rewards import RewardTerm, evaluate_term

    D = torch.float64
    mine = RewardTerm("mine", lambda c: -(c.speed - 11.0).abs() * c.roll_rate.abs())
    runs = {}
    for compiled in (False, True):
        torch.manual_seed(0)
        policy = torch.nn.Sequential(torch.nn.Linear(30, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2)).to(D)
        env = Dyn4DiffEnv(num_envs=3, compile=compiled, dtype="float64", episode_steps=7, start_speed=12.0,
                          reward_terms=(mine,), reward_weights={"mine": 1.0})
        runs[compiled] = _windowed_run(env, policy)
    (te, ge), (tc, gc) = runs[False], runs[True]
    if hasattr(eval_frame, "_debug_get_cache_entry_list"):  # torch's view of its compiled frames
        assert eval_frame._debug_get_cache_entry_list(evaluate_term.__code__) == []
    assert sum(bool(d.any()) for *_, d in te) >= 2  # resets happened inside the run
    for (oe, re, de), (oc, rc, dc) in zip(te, tc):
        assert torch.equal(de, dc)
        assert float((oe - oc).abs().max()) < 1e-9 and float((re - rc).abs().max()) < 1e-9
    for a, b in zip(ge, gc):
        assert float((a - b).abs().max()) <= 1e-8 * max(1.0, float(a.abs().max()))
