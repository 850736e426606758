"""The torch engine's whole step, autoreset inside (``TaskCore.whole_step``, issue 49): eager
against one ``torch.compile(fullgraph=True)`` program, env steps per second as a ratio to eager
in the same run, the compile's seconds, the states' largest difference after the timed steps,
and the host syncs of one eager step (benchmarks/launches.py's count: 0 is the target).

Episodes are short (``--episode-steps``), so rows restart inside most timed steps. On a GPU
(``--device cuda``) the compiled program can also be captured in a CUDA graph
(``--mode reduce-overhead``); this machine has none, so the figures in docs/speed.md are CPU's.

    python benchmarks/whole_step.py [--rows 256] [--dtype float32] [--steps 20] [--device cpu]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import launches  # noqa: E402  the launch and sync count, one home

from dyn4_gym import cli  # noqa: E402
from dyn4_gym.envs.config import EnvConfig  # noqa: E402
from dyn4_gym.envs.core import TaskCore  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=cli.int_in(1, 1 << 20), default=256)
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=cli.int_in(1, 100_000), default=20, help="timed steps per variant")
    ap.add_argument("--episode-steps", type=cli.int_in(1, 100_000), default=50)
    ap.add_argument("--action", choices=("accel", "driver"), default="accel")
    ap.add_argument("--mode", default=None, help="torch.compile's mode (reduce-overhead: CUDA graphs)")
    ap.add_argument("--no-compile", action="store_true", help="eager only")
    ap.add_argument("--parts", action="store_true",
                    help="also compile=True's parts (TaskCore.compiled_step: a substep and the finish compiled, "
                         "the substep loop and the reset eager)")
    return ap.parse_args(argv)


def _run(fn, state, action, steps: int, device: torch.device):
    """``steps`` whole steps from ``state``: (seconds, last state)."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    t = time.perf_counter()
    for _ in range(steps):
        state = fn(state, action)[0]
    sync()
    return time.perf_counter() - t, state


def main(argv=None) -> dict:
    args = parse_args(argv)
    core = TaskCore(EnvConfig.from_dict({"dtype": args.dtype, "device": args.device, "action": args.action,
                                         "episode_steps": args.episode_steps}))
    B = args.rows
    start = core.new_state(torch.arange(B), torch.zeros(B, dtype=torch.long))
    action = torch.full((B, core.n_action), 0.3, dtype=core.dtype, device=core.device)
    res = {"rows": B, "dtype": args.dtype, "device": str(core.device), "action": args.action}
    with torch.no_grad():
        _run(core.whole_step, start, action, 1, core.device)  # warm
        _, _, syncs = launches.count(lambda: core.whole_step(start, action))
        res["host_syncs"] = sum(syncs.values())
        sec, eager_state = _run(core.whole_step, start, action, args.steps, core.device)
        res["eager_steps_per_s"] = args.steps * B / sec
        print(f"whole step, {B} rows, {args.dtype}, {args.action}, {core.device}: host syncs {res['host_syncs']}")
        print(f"  eager     {res['eager_steps_per_s']:12,.0f} env steps/s   1.00x")
        if not args.no_compile:
            t = time.perf_counter()
            fn = torch.compile(core.whole_step, fullgraph=True, dynamic=False, mode=args.mode)
            _run(fn, start, action, 1, core.device)
            res["compile_s"] = time.perf_counter() - t
            sec, state = _run(fn, start, action, args.steps, core.device)
            res["compiled_steps_per_s"] = args.steps * B / sec
            res["max_abs_dx"] = float((state.x - eager_state.x).abs().max())
            print(f"  compiled  {res['compiled_steps_per_s']:12,.0f} env steps/s  {res['compiled_steps_per_s'] / res['eager_steps_per_s']:5.2f}x"
                  f"   (fullgraph; compiled in {res['compile_s']:.0f} s; after {args.steps} steps the states differ by "
                  f"at most {res['max_abs_dx']:.3g})")
        if args.parts:
            parts = core.compiled_step()

            def by_parts(state, a):
                state, obs, reward, term, trunc, info = parts(state, a)
                return core.restart_finished(state, obs, term | trunc)

            t = time.perf_counter()
            _run(by_parts, start, action, 1, core.device)
            res["parts_compile_s"] = time.perf_counter() - t
            sec, _ = _run(by_parts, start, action, args.steps, core.device)
            res["parts_steps_per_s"] = args.steps * B / sec
            print(f"  parts     {res['parts_steps_per_s']:12,.0f} env steps/s  {res['parts_steps_per_s'] / res['eager_steps_per_s']:5.2f}x"
                  f"   (compile=True's two compiled parts, the reset eager; compiled in {res['parts_compile_s']:.0f} s)")
    return res


if __name__ == "__main__":
    main()
