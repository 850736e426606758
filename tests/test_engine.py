"""The two engines are one model: the Numba substep (dyn4_gym.engine.numba_plant) against the torch
plant, state and every books line, float64; and both reproduce the golden file."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from dyn4_gym.envs import EnvConfig, TaskCore
from dyn4_gym.ground import Flat
from dyn4_gym.plant import HUMVEE, dyn4_energy, dyn4_params, dyn4_step
from dyn4_gym.plant import dyn4_state as state

from dyn4_gym.engine import numba_plant
from dyn4_gym.model.books import BOOK_LINES
from dyn4_gym.model.state import N_DYN4

D = torch.float64
GOLDEN = Path(__file__).parent / "data" / "dyn4_golden.json"


def _states(B, seed, terrain_x):
    gen = torch.Generator().manual_seed(seed)
    x = terrain_x.clone()
    x[:, 0] += torch.rand(B, generator=gen, dtype=D) * 120
    x[:, 1] += torch.randn(B, generator=gen, dtype=D) * 2
    x[:, 3] = torch.rand(B, generator=gen, dtype=D) * 22
    x[:, 4] = torch.randn(B, generator=gen, dtype=D) * 2.5  # many past the tires' peak
    x[:, 5] = torch.randn(B, generator=gen, dtype=D) * 0.6
    x[:, 7] += torch.randn(B, generator=gen, dtype=D) * 0.05
    x[:, 9:12] = torch.randn(B, 3, generator=gen, dtype=D) * 0.25
    x[:, 12] = torch.randn(B, generator=gen, dtype=D) * 0.3
    x[:, 13] = torch.randn(B, generator=gen, dtype=D) * 4
    x[: B // 8, 3] = torch.rand(B // 8, generator=gen, dtype=D) * 0.3  # creeping
    x[: B // 16, 13] = 0.0  # at a = 0
    u = torch.stack((torch.randn(B, generator=gen, dtype=D) * 0.4, torch.randn(B, generator=gen, dtype=D) * 6), -1)
    return x, u


@pytest.mark.parametrize("grade", [False, True], ids=["grade_off", "grade_on"])
@pytest.mark.parametrize("damper", ["passive", "skyhook"])
@pytest.mark.parametrize("ground", ["rough", "flat"])
def test_numba_substep_equals_the_torch_plant(grade, damper, ground):
    B = 512
    core = TaskCore(EnvConfig(dtype="float64"))
    st = core.new_state(torch.arange(B), torch.zeros(B, dtype=torch.long))
    g = st.terrain if ground == "rough" else Flat(mu=0.7)
    x, u = _states(B, 3, st.x)
    p = dyn4_params(HUMVEE, dtype=D, grade_force=grade, damper=damper)
    x1, b = dyn4_step(x, u, p, g, books=True)
    y, bk = numba_plant.dyn4_step_np(x.numpy(), u.numpy(), numba_plant.pack_params(p),
                                     numba_plant.pack_terrain(g, B), books=True)
    ref = x1.numpy()
    assert np.isfinite(ref).all()
    assert np.max(np.abs(y - ref) / np.maximum(np.abs(ref), 1.0)) < 1e-12
    # books: each line against the step's energy scale (dH is a difference of H ~ 1e5-1e6 J)
    scale = np.maximum(np.abs(dyn4_energy(x, p, g).numpy()), 1.0)
    for j, name in enumerate(BOOK_LINES):
        err = np.abs(bk[:, j] - getattr(b, name).numpy()) / scale
        assert err.max() < 1e-12, name


def test_numba_substep_reproduces_the_golden_file():
    from dyn4_gym.ground import Bump, MuSplit  # noqa: F401  (the golden's grounds are the torch ones)

    cases = json.loads(GOLDEN.read_text())["cases"]
    flat = [c for c in cases if c["ground"] == "flat"]
    assert flat
    for c in flat:
        kw = {} if c["params"] == "sprung" else dict(ride_freq_front=15.0, ride_freq_rear=15.0,
                                                    damping_ratio_front=1.0, damping_ratio_rear=1.0)
        p = dyn4_params(HUMVEE, dtype=D, **kw)
        y = numba_plant.dyn4_step_np(np.asarray([c["x"]]), np.asarray([c["u"]]), numba_plant.pack_params(p),
                                     numba_plant.pack_terrain(Flat(), 1))
        np.testing.assert_allclose(y[0], c["next"], rtol=1e-9, atol=1e-9)


def test_numba_engine_refuses_what_it_does_not_model():
    p = dyn4_params(HUMVEE, dtype=D).replace(m=torch.tensor([2500.0, 2600.0], dtype=D))
    with pytest.raises(ValueError, match="scalar parameters"):
        numba_plant.pack_params(p)
    with pytest.raises(ValueError, match="height 0"):
        numba_plant.pack_terrain(Flat(height0=1.0), 1)
    assert state(vx=1.0).shape == (N_DYN4,)
