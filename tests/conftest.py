"""Shared fixtures: the Humvee in float64, a helper to build states by name, and a loader for
the top-level scripts (agents/, envs/, benchmarks/ are folders of scripts, not packages)."""

import importlib.util
from pathlib import Path

import pytest
import torch

from dyn4_gym.plant import HUMVEE, bike_params, dyn4_params


ROOT = Path(__file__).resolve().parents[1]


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
