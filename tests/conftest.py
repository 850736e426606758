"""Shared fixtures: the Humvee in float64, and a helper to build states by name."""

import pytest
import torch

from dyn4_gym.plant import HUMVEE, bike_params, dyn4_params


@pytest.fixture(scope="session")
def p64():
    return dyn4_params(HUMVEE, dtype=torch.float64)


@pytest.fixture(scope="session")
def pb64():
    return bike_params(HUMVEE, dtype=torch.float64)
