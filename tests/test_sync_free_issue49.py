"""Issue 49, step 6 (in part): the differentiable env steps without a host sync.

``Dyn4DiffEnv(sync_free=True)`` resets finished rows by a select over every row's next draw
(``TaskCore.reset_where``) and finds non-finite actions on the device; the profiler counts no
``item`` / ``is_nonzero`` / ``nonzero`` in a step with gradients on, resets included, where the
default CPU path has them, and both paths give the same episodes and the same gradients.
"""

import numpy as np
import pytest
import torch

from dyn4_gym.envs import Dyn4DiffEnv, EnvConfig, TaskCore

D = torch.float64
RUN = dict(dtype="float64", episode_steps=6)  # short episodes: rows reset every few steps


def _policy(obs_dim, seed=0):
    gen = torch.Generator().manual_seed(seed)
    w = (0.05 * torch.randn(obs_dim, 2, generator=gen, dtype=D)).requires_grad_()
    return w, (lambda obs: torch.tanh(obs @ w + torch.tensor([0.05, 0.5], dtype=D)))


def _episode(sync_free, steps=14, rows=3, **env_kw):
    env = Dyn4DiffEnv(num_envs=rows, sync_free=sync_free, **RUN, **env_kw)
    obs = env.reset(seed=4)
    w, pi = _policy(env.obs_dim)
    total, rec = 0.0, []
    for _ in range(steps):
        obs, r, term, trunc, info = env.step(pi(obs))
        total = total + r.sum()
        rec.append((obs.detach().clone(), r.detach().clone(), term | trunc, info["final_obs"].detach().clone()))
    (g,) = torch.autograd.grad(total, w)
    return rec, g, env


def test_the_sync_free_path_gives_the_same_episodes_and_gradients():
    ref, g_ref, _ = _episode(False)
    got, g, env = _episode(True)
    assert env.sync_free
    assert sum(int(d.sum()) for _, _, d, _ in ref) >= 6  # rows finished and restarted
    for (o1, r1, d1, f1), (o2, r2, d2, f2) in zip(ref, got):
        assert torch.equal(d1, d2) and torch.equal(r1, r2) and torch.equal(o1, o2) and torch.equal(f1, f2)
    assert torch.isfinite(g).all() and g.abs().sum() > 0
    assert torch.equal(g, g_ref)


def test_reset_where_draws_what_reset_rows_draws():
    core = TaskCore(EnvConfig.from_dict(RUN))
    st = core.new_state(torch.arange(5), torch.zeros(5, dtype=torch.long))
    st, *_ = core.step(st, torch.full((5, 2), 0.3, dtype=D))
    mask = torch.tensor([True, False, True, False, False])
    a, b = core.reset_rows(st, mask), core.reset_where(st, mask)
    for name in ("x", "course_xy", "idx", "s", "t", "prev_action", "episode", "key", "pt"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert torch.equal(b.episode, torch.tensor([1, 0, 1, 0, 0]))


def test_a_differentiable_step_makes_no_host_sync(load_script):
    """The profiler's count (benchmarks/launches.py) over a step with gradients on in which rows
    finish and restart: 0 host syncs sync-free; the default path's checks and reset have them
    (so the count can fail)."""
    lb = load_script("benchmarks/launches.py")
    counts = {}
    for sync_free in (True, False):
        env = Dyn4DiffEnv(num_envs=4, sync_free=sync_free, dtype="float64", episode_steps=1)  # every step resets
        obs = env.reset(seed=0)
        _, pi = _policy(env.obs_dim)

        def env_step():  # every step ends every row (episode_steps=1): the reset is in the count
            return env.step(pi(obs))

        _, _, syncs = lb.count(env_step)
        counts[sync_free] = sum(syncs.values())
    assert counts[True] == 0 and counts[False] > 0, counts


def test_a_non_finite_action_ends_its_row_alone_without_a_sync():
    env = Dyn4DiffEnv(num_envs=3, sync_free=True, dtype="float64")
    obs = env.reset(seed=1)
    w, pi = _policy(env.obs_dim)
    a = pi(obs)
    poison = torch.tensor([[0.0, 0.0], [float("nan"), 0.0], [0.0, float("inf")]], dtype=D)
    obs, r, term, trunc, info = env.step(a + poison)
    assert term.tolist() == [False, True, True] and info["nonfinite"].tolist() == [False, True, True]
    weight = env.core.weights["termination"]
    assert r[1:].tolist() == [-weight, -weight] and torch.isfinite(r[0])
    assert torch.isfinite(obs).all() and env.state.t.tolist() == [1, 0, 0]  # the two restarted
    (g,) = torch.autograd.grad(r.sum(), w)
    assert torch.isfinite(g).all() and g.abs().sum() > 0  # row 0's gradient, no NaN from the others
    # the default path refuses the same action on the host
    env2 = Dyn4DiffEnv(num_envs=3, sync_free=False, dtype="float64")
    env2.reset(seed=1)
    with pytest.raises(ValueError, match="finite"):
        env2.step(torch.zeros(3, 2, dtype=D) + poison)


@pytest.mark.parametrize("bad", [1, "yes", np.bool_(True)])
def test_sync_free_must_be_a_bool(bad):
    with pytest.raises(ValueError, match="sync_free"):
        Dyn4DiffEnv(num_envs=2, sync_free=bad)


@pytest.mark.parametrize("action,grad", [("accel", True), ("driver", False)])
def test_the_whole_step_traces_as_one_graph(action, grad):
    """``TaskCore.whole_step`` (the step with its autoreset) goes through torch.compile with
    ``fullgraph=True`` (any graph break raises): traced by Dynamo with the eager backend (the
    check without Inductor's minutes of code generation; benchmarks/whole_step.py times the
    compiled program), the same results as eager, rows restarting inside the step."""
    core = TaskCore(EnvConfig.from_dict(dict(RUN, episode_steps=1, action=action)))
    st = core.new_state(torch.arange(3), torch.zeros(3, dtype=torch.long))
    a = torch.full((3, core.n_action), 0.3, dtype=D, requires_grad=grad)
    traced = torch.compile(core.whole_step, backend="eager", fullgraph=True)
    got, ref = traced(st, a), core.whole_step(st, a)
    assert bool(ref[4].all())  # every row truncated and restarted
    assert torch.equal(got[0].x, ref[0].x) and torch.equal(got[1], ref[1]) and torch.equal(got[2], ref[2])
    assert torch.equal(ref[0].t, torch.zeros(3, dtype=torch.long)) and torch.equal(ref[0].episode, torch.ones(3, dtype=torch.long))
    assert torch.equal(got[5]["final_obs"], ref[5]["final_obs"])
    if grad:
        (g,) = torch.autograd.grad(got[2].sum(), a)
        (g_ref,) = torch.autograd.grad(ref[2].sum(), a)
        assert torch.isfinite(g).all() and g.abs().sum() > 0 and torch.allclose(g, g_ref, rtol=1e-12, atol=1e-12)


def test_the_whole_step_benchmark_counts_no_host_sync(load_script):
    ws = load_script("benchmarks/whole_step.py")
    res = ws.main(["--rows", "8", "--steps", "2", "--episode-steps", "1", "--no-compile", "--dtype", "float64"])
    assert res["host_syncs"] == 0 and res["eager_steps_per_s"] > 0 and "compiled_steps_per_s" not in res


def test_a_compiled_sync_free_env_steps_with_the_whole_step_compiled(monkeypatch):
    """``Dyn4DiffEnv(compile=True, sync_free=True)`` steps with ``torch.compile(whole_step,
    fullgraph=True)``, one program for every step: the same episodes and gradients as the eager
    default path. torch.compile
    is given Dynamo's eager backend here (the whole trace, any graph break an error, without
    Inductor's minutes of code generation on this CPU)."""
    calls = []
    real = torch.compile

    def spy(fn, **kw):
        calls.append((getattr(fn, "__name__", ""), kw.get("fullgraph", False)))
        return real(fn, **{**kw, "backend": "eager"})

    from torch._dynamo.utils import counters

    monkeypatch.setattr(torch, "compile", spy)
    torch._dynamo.reset()
    counters.clear()
    rec, g, _ = _episode(True, steps=8, compile=True)
    assert ("whole_step", True) in calls
    # one program: the first step's state (no gradient yet) enters as leaves that require one,
    # as every later step's state does (the inputs' requires_grad are guarded)
    assert counters["stats"]["unique_graphs"] == 1
    rec_ref, g_ref, _ = _episode(False, steps=8)
    assert sum(int(d.sum()) for _, _, d, _ in rec_ref) >= 3
    for (o1, r1, d1, f1), (o2, r2, d2, f2) in zip(rec, rec_ref):
        assert torch.equal(d1, d2) and torch.equal(r1, r2) and torch.equal(o1, o2) and torch.equal(f1, f2)
    assert torch.allclose(g, g_ref, rtol=1e-12, atol=1e-15) and g.abs().sum() > 0
