"""Plant throughput: substeps per second for bike_step and dyn4_step (books off and on),
forward and forward+backward, float32, eager and torch.compile, at several batch sizes, on CPU
(and CUDA when present), and the Numba CPU engine's substep (float64, forward only). Prints a
table, then the cost of books=True against books=False.

    python benchmarks/plant.py [--batches 1 64 1024 4096 16384] [--no-compile]
"""

from __future__ import annotations

import time

import torch

from dyn4_gym.ground import Flat
from dyn4_gym.plant import HUMVEE, bike_params, bike_step, dyn4_params, dyn4_rest, dyn4_step
from dyn4_gym.plant.fast import compiled_step
from dyn4_gym import cli


def _inputs(name, p, B, device):
    if name == "bike":
        x = torch.zeros(B, 8, device=device)
    else:
        x = dyn4_rest(p, Flat(), (B,)).to(device)
    x = x.clone()
    x[:, 3] = 10.0 + torch.rand(B, device=device)
    u = torch.stack((0.05 * torch.randn(B, device=device), torch.randn(B, device=device)), -1)
    return x, u


def _time(fn, sync, min_time=0.5, min_iter=5):
    fn()
    fn()
    sync()
    n, t0 = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        if n >= min_iter and time.perf_counter() - t0 > min_time:
            break
    sync()
    return (time.perf_counter() - t0) / n


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def run(batches, devices, use_compile):
    rows = {}
    for device in devices:
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        plants = [("bike", bike_step, bike_params, {}), ("dyn4", dyn4_step, dyn4_params, {}),
                  ("dyn4+books", dyn4_step, dyn4_params, {"books": True})]
        for name, step, make, kw in plants:
            p = make(HUMVEE, dtype=torch.float32, device=device)
            g = Flat()

            def eager(x, u, step=step, p=p, kw=kw):
                return step(x, u, p, g, **kw)

            for mode in ("eager", "compile") if use_compile else ("eager",):
                for B in batches:
                    x, u = _inputs(name[:4], p, B, device)
                    # one compiled function per (batch, grad mode): no recompiles inside a timing
                    f_fwd = compiled_step(step, p, g, **kw) if mode == "compile" else eager
                    f_bwd = compiled_step(step, p, g, **kw) if mode == "compile" else eager
                    xg = x.clone().requires_grad_()

                    def fwd():
                        with torch.no_grad():
                            f_fwd(x, u)

                    def fwd_bwd():
                        out = f_bwd(xg, u)
                        loss = _first(out).sum()
                        if isinstance(out, tuple):
                            loss = loss + out[1].dH.sum()
                        loss.backward()

                    tf, tb = _time(fwd, sync), _time(fwd_bwd, sync)
                    rows[(device, name, mode, B)] = (tf, tb)
                    print(f"{device:5s} {name:10s} {mode:8s} {B:6d} {B / tf:14,.0f} {B / tb:14,.0f} {tb / tf:6.2f}",
                          flush=True)
    print("\ncost of books=True against books=False (forward time ratio)")
    for (device, name, mode, B), (tf, _) in rows.items():
        if name == "dyn4+books":
            print(f"{device:5s} {mode:8s} {B:6d} {tf / rows[(device, 'dyn4', mode, B)][0]:6.2f}x")
    return rows


def run_numba(batches):
    """The CPU engine's substep (float64, books off and on) on the same inputs, same table."""
    from dyn4_gym.engine import numba_plant as nb

    p = dyn4_params(HUMVEE, dtype=torch.float64)
    packed = nb.pack_params(p)
    for books in (False, True):
        for B in batches:
            x, u = _inputs("dyn4", p, B, "cpu")
            xn, un = x.double().numpy(), u.double().numpy()
            terrain = nb.pack_terrain(Flat(), B)
            t = _time(lambda: nb.dyn4_step_np(xn, un, packed, terrain, books=books), lambda: None)
            name = "dyn4+books" if books else "dyn4"
            print(f"cpu   {name:10s} {'numba':8s} {B:6d} {B / t:14,.0f} {'-':>14s} {'-':>6s}", flush=True)


def parse_args(argv=None):
    from dyn4_gym import cli

    ap = cli.Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=cli.int_in(1, 2**20), nargs="+", default=[1, 64, 1024, 4096, 16384])
    ap.add_argument("--no-compile", action="store_true")
    return ap.parse_args(argv)


@cli.script(default_torch_threads=None)
def main(argv=None):
    # one compiled function per (plant, batch, grad mode) shares the step's code object
    torch._dynamo.config.recompile_limit = 256
    args = parse_args(argv)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, float32, substeps per second")
    print("ratio = (forward + backward) time / forward time")
    print(f"{'dev':5s} {'plant':10s} {'mode':8s} {'batch':>6s} {'forward':>14s} {'fwd+bwd':>14s} {'ratio':>6s}")
    run(args.batches, devices, not args.no_compile)
    run_numba(args.batches)


if __name__ == "__main__":
    main()
