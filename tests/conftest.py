"""Shared fixtures: the Humvee in float64, a helper to build states by name, and a loader for
the top-level scripts (agents/, envs/, benchmarks/ are folders of scripts, not packages)."""

import importlib.util
from pathlib import Path

import pytest
import torch

from dyn4_gym.plant import HUMVEE, bike_params, dyn4_params


ROOT = Path(__file__).resolve().parents[1]

# One torch thread in every test process. Beside any other busy process (the second xdist worker,
# a training run), torch's pool of 2 threads on 2 cores ran a small MLP's Adam updates 35x slower
# (693 -> 20 updates/s, measured; with 1 thread 573 -> 584), and SAC's test took 446 s instead of
# 31. Tests of thread settings set their own (``keep_threads``); scripts default to 1 too (threads.py).
torch.set_num_threads(1)


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (the README's test command): a worker per core, at most 4; each holds torch,
    the Numba kernels it compiled and, for some tests, a compiled torch graph (1-3 GB)."""
    from dyn4_gym.threads import usable_cores

    return min(usable_cores(), 4)


@pytest.fixture(scope="session")
def load_script():
    """``load_script("agents/tune.py")``: the script imported as a module (its ``main()`` callable)."""

    def load(relpath: str):
        spec = importlib.util.spec_from_file_location(relpath.replace("/", "_").removesuffix(".py"), ROOT / relpath)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    return load


@pytest.fixture
def keep_threads():
    """torch's and the Numba kernels' thread counts, given back after the test (for tests of
    code that sets this process's threads)."""
    import numba

    before = torch.get_num_threads(), numba.get_num_threads()
    yield
    torch.set_num_threads(before[0])
    numba.set_num_threads(before[1])


@pytest.fixture(scope="session")
def p64():
    return dyn4_params(HUMVEE, dtype=torch.float64)


@pytest.fixture(scope="session")
def pb64():
    return bike_params(HUMVEE, dtype=torch.float64)


@pytest.fixture(scope="session")
def drive_engines():
    """``drive(kw, seed=0, scale=0.6) -> ((obs_numba, ends_numba), (obs_torch, ends_torch))``:
    the same random actions (a drive bias, some outside the box) for 300 steps on 4 rows of
    ``Dyn4VectorEnv(**kw)`` on each engine, float64, 150-step episodes: every observation
    (float64 array ``(301, 4, n_obs)``) and where episodes ended ``(300, 4)``."""
    import numpy as np

    from dyn4_gym.envs import Dyn4VectorEnv

    def drive(kw, seed=0, scale=0.6):
        runs = []
        for engine in ("numba", "torch"):
            env = Dyn4VectorEnv(num_envs=4, engine=engine, **dict(kw, dtype="float64", episode_steps=150))
            rng = np.random.default_rng(seed)
            obs, _ = env.reset(seed=0)
            out, ends = [obs], []
            for _ in range(300):
                obs, _, te, tr, _ = env.step(np.clip(rng.normal((0.0, 0.5), scale, (4, 2)), -1.5, 1.5))
                out.append(obs)
                ends.append(te | tr)
            runs.append((np.asarray(out, dtype=np.float64), np.asarray(ends)))
        return tuple(runs)

    return drive
