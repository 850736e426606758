"""Operator launches and host syncs of the torch engine, counted with torch.profiler on the CPU.

Each top-level ``aten`` operator that computes (views and allocations left out) is one kernel
launch on a GPU, so the count says how launch-bound a small batch is there, and how much a
fused or compiled step can save. A host sync (``item``, ``is_nonzero``, ``nonzero``, ``_local_scalar_dense``)
stops the GPU's queue and keeps a step out of a CUDA graph: the target is 0.

    python benchmarks/launches.py [--rows 64]
"""

from __future__ import annotations

import argparse
import collections

import torch
from torch.profiler import ProfilerActivity, profile

from dyn4_gym.envs.config import EnvConfig
from dyn4_gym.envs.core import TaskCore
from dyn4_gym.envs.diff import Dyn4DiffEnv
from dyn4_gym.ground import Flat
from dyn4_gym.plant import HUMVEE, dyn4_params, dyn4_rest, dyn4_step

# operators that launch no kernel (views, metadata, allocations without a fill)
VIEWS = frozenset({"aten::unsqueeze", "aten::select", "aten::slice", "aten::view", "aten::expand", "aten::reshape",
                   "aten::as_strided", "aten::squeeze", "aten::t", "aten::transpose", "aten::permute", "aten::alias",
                   "aten::unbind", "aten::split", "aten::chunk", "aten::narrow", "aten::detach", "aten::lift_fresh",
                   "aten::_unsafe_view", "aten::result_type", "aten::empty", "aten::empty_like",
                   "aten::resolve_conj", "aten::resolve_neg", "aten::empty_strided"})
SYNCS = frozenset({"aten::item", "aten::_local_scalar_dense", "aten::is_nonzero", "aten::nonzero"})


def count(fn) -> tuple[int, collections.Counter, collections.Counter]:
    """``(launches, launches by operator, host syncs by operator)`` of one call of ``fn``."""
    fn()  # warm: first-call set-up is not the step's
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    ev = [e for e in prof.events() if e.name.startswith("aten::")]
    top = [e for e in ev if e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::")]
    ops = collections.Counter(e.name for e in top if e.name not in VIEWS)
    syncs = collections.Counter(e.name for e in ev if e.name in SYNCS)
    return sum(ops.values()), ops, syncs


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=64)
    return ap.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    B = args.rows
    p = dyn4_params(HUMVEE, dtype=torch.float64)
    x = dyn4_rest(p, Flat(), (B,)).clone()
    x[:, 3] = 10.0
    u = torch.zeros(B, 2, dtype=torch.float64)
    rows = []
    for books in (False, True):
        n, ops, syncs = count(lambda: dyn4_step(x, u, p, Flat(), 0.01, books=books))
        rows.append((f"dyn4_step, Flat, books={books}", n, 1, syncs, ops))
    for action in ("accel", "driver"):
        core = TaskCore(EnvConfig.from_dict({"dtype": "float64", "action": action}))
        st = core.new_state(torch.arange(B), torch.zeros(B, dtype=torch.long))
        a = torch.zeros(B, core.n_action, dtype=torch.float64)
        n, ops, syncs = count(lambda: core.step(st, a))
        rows.append((f"TaskCore.step, rough, action={action}", n, core.n_sub, syncs, ops))
    # the differentiable env's step with gradients on, every row finishing and restarting in it
    # (episode_steps=1): the default path's reset (nonzero, index_copy of the drawn rows) against
    # the sync-free select over every row's draw (Dyn4DiffEnv(sync_free=True), issue 49)
    for sync_free in (False, True):
        env = Dyn4DiffEnv(num_envs=B, sync_free=sync_free, dtype="float64", episode_steps=1)
        obs = env.reset(seed=0)
        w = torch.zeros(obs.shape[1], 2, dtype=torch.float64, requires_grad=True)
        n, ops, syncs = count(lambda: env.step(torch.tanh(obs @ w)))
        rows.append((f"Dyn4DiffEnv.step, resets, sync_free={sync_free}", n, env.core.n_sub, syncs, ops))
    print(f"{'call':42s} {'launches':>9s} {'/substep':>9s} {'host syncs':>11s}  most frequent")
    for name, n, n_sub, syncs, ops in rows:
        top = ", ".join(f"{k[6:]} {v}" for k, v in ops.most_common(4))
        print(f"{name:42s} {n:9d} {n / n_sub:9.0f} {sum(syncs.values()):11d}  {top}")


if __name__ == "__main__":
    main()
